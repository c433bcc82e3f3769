package sniff

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// clientHello returns the bytes crypto/tls sends first as a client for
// serverName: its ClientHello records.
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_ = c.Handshake()
	}()
	_ = b.SetDeadline(time.Now().Add(5 * time.Second))
	var hdr [5]byte
	if _, err := io.ReadFull(b, hdr[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(b, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr[:], body...)
}

// fragment re-splits the handshake of one record into records of at most
// n bytes each, as a client may.
func fragment(rec []byte, n int) []byte {
	hs := rec[5:]
	var out []byte
	for len(hs) > 0 {
		k := min(n, len(hs))
		out = append(out, 0x16, rec[1], rec[2], byte(k>>8), byte(k))
		out = append(out, hs[:k]...)
		hs = hs[k:]
	}
	return out
}

func TestReadFindsTheServerNameAndReadsNoFurther(t *testing.T) {
	t.Parallel()
	hello := clientHello(t, "API.OpenAI.com.")
	after := []byte("application data that must stay unread")
	for name, in := range map[string][]byte{
		"one record":   hello,
		"many records": fragment(hello, 100),
	} {
		r := bytes.NewReader(append(append([]byte(nil), in...), after...))
		p, err := Read(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !p.TLS || p.ServerName != "api.openai.com" {
			t.Errorf("%s: tls %v sni %q; want true, api.openai.com", name, p.TLS, p.ServerName)
		}
		if !bytes.Equal(p.Raw, in) {
			t.Errorf("%s: read %d bytes; want exactly the hello's %d", name, len(p.Raw), len(in))
		}
		if rest, _ := io.ReadAll(r); !bytes.Equal(rest, after) {
			t.Errorf("%s: left %q unread; want %q", name, rest, after)
		}
	}
}

func TestReadWithoutServerName(t *testing.T) {
	t.Parallel()
	// crypto/tls sends no server name for an IP address.
	p, err := Read(bytes.NewReader(clientHello(t, "192.0.2.1")))
	if err != nil || !p.TLS || p.ServerName != "" {
		t.Errorf("hello for an IP: tls %v sni %q err %v; want TLS without a name", p.TLS, p.ServerName, err)
	}
}

func TestReadRefusesMalformedAndHugeHellos(t *testing.T) {
	t.Parallel()
	hello := clientHello(t, "api.openai.com")
	truncated := append([]byte(nil), hello...)
	// The handshake claims more than the record holds, and the record
	// ends the stream.
	truncated[8]++
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"wrong record version", []byte{0x16, 9, 1, 0, 4, 1, 0, 0, 0}, ErrMalformed},
		{"empty record", []byte{0x16, 3, 1, 0, 0}, ErrMalformed},
		{"record over 16 KiB", []byte{0x16, 3, 1, 0x40, 0x01}, ErrMalformed},
		{"not a client hello", []byte{0x16, 3, 1, 0, 4, 2, 0, 0, 0}, ErrMalformed},
		{"hello claims 1 MiB", []byte{0x16, 3, 1, 0, 4, 1, 0x10, 0, 0}, ErrTooLarge},
		{"hello body garbage", []byte{0x16, 3, 1, 0, 6, 1, 0, 0, 2, 3, 3}, ErrMalformed},
		{"stream ends in the hello", truncated, io.EOF},
	}
	for _, tt := range tests {
		p, err := Read(bytes.NewReader(tt.in))
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err %v; want %v", tt.name, err, tt.want)
		}
		if p.ServerName != "" {
			t.Errorf("%s: sni %q; want none", tt.name, p.ServerName)
		}
		if !bytes.HasPrefix(tt.in, p.Raw) {
			t.Errorf("%s: raw is not what was read", tt.name)
		}
	}
	// A hello spread over records until it passes the bound.
	var many []byte
	for len(many) <= MaxHelloBytes+64 {
		many = append(many, fragment(append([]byte{0x16, 3, 1, 0, 4}, 1, 0x00, 0x7f, 0xff), 4)...)
		many = append(many, 0x16, 3, 1, 0x10, 0, 1)
		many = append(many, make([]byte, 0x1000-1)...)
	}
	if _, err := Read(bytes.NewReader(many)); !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMalformed) {
		t.Errorf("endless hello: err %v; want it refused", err)
	}
}

func TestReadPlainHTTP(t *testing.T) {
	t.Parallel()
	in := "POST /v1/chat/completions HTTP/1.1\r\nUser-Agent: x\r\nhost: API.OpenAI.com:80\r\n\r\n{}"
	p, err := Read(bytes.NewReader([]byte(in)))
	if err != nil || p.TLS || p.Method != "POST" || p.Host != "api.openai.com" || string(p.Raw) != in {
		t.Errorf("plain HTTP: %+v err %v; want POST for api.openai.com, all bytes kept", p, err)
	}
	p, err = Read(bytes.NewReader([]byte("SSH-2.0-OpenSSH_9.6\r\n")))
	if err != nil || p.TLS || p.Method != "" || p.Host != "" {
		t.Errorf("not HTTP: %+v err %v; want neither method nor host", p, err)
	}
}

// FuzzRead: whatever a redirected app sends, Read returns without
// panicking, never reads past what it was given, and never reports a
// server name that is not a host name.
func FuzzRead(f *testing.F) {
	f.Add(clientHello(f, "api.openai.com"))
	f.Add(fragment(clientHello(f, "api.anthropic.com"), 7))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, _ := Read(bytes.NewReader(data))
		if !bytes.HasPrefix(data, p.Raw) {
			t.Fatalf("raw %x is not a prefix of the input", p.Raw)
		}
		if p.ServerName != "" && hostName(p.ServerName) != p.ServerName {
			t.Fatalf("sni %q is not a clean host name", p.ServerName)
		}
	})
}
