// Package sniff reads the start of a connection without consuming it: the
// TLS ClientHello's server name (SNI), or a plain HTTP request's method and
// Host, so that detour's transparent listener can decide between
// interception and a splice. What was read is returned whole, for the
// caller to replay. It is bounded in size; the caller bounds it in time.
//
// sniff imports nothing of detour's. It is a package of its own so that its
// fuzz target runs in a small binary.
package sniff

import (
	"errors"
	"io"
	"net"
	"strings"

	"golang.org/x/crypto/cryptobyte"
)

// MaxHelloBytes bounds the ClientHello detour reads. Browsers' and SDKs'
// hellos are under 2 KiB, post-quantum key shares included; a hello larger
// than this is not parsed (its connection is spliced, never intercepted).
const MaxHelloBytes = 32 << 10

// maxTLSRecord is the largest TLS plaintext record (RFC 8446 §5.1).
const maxTLSRecord = 1 << 14

// Errors of Read; in every case the bytes read so far are returned.
var (
	// ErrMalformed is a connection that starts like TLS but is not a
	// ClientHello detour can read.
	ErrMalformed = errors.New("malformed TLS ClientHello")
	// ErrTooLarge is a ClientHello larger than MaxHelloBytes.
	ErrTooLarge = errors.New("TLS ClientHello larger than detour reads")
)

// Start is what Read found at the start of a connection.
type Start struct {
	// Raw is every byte read, to be replayed.
	Raw []byte
	// TLS is true when the connection starts with a TLS handshake record.
	TLS bool
	// ServerName is the ClientHello's host name, lower case, without a
	// trailing dot; "" when there is none or it is not a host name.
	ServerName string
	// Host is a plain HTTP request's Host header (host only, lower case),
	// when it was in the first bytes read.
	Host string
	// Method is a plain HTTP request's method, when there was a request
	// line.
	Method string
}

// Read reads the start of a connection from r: a whole ClientHello
// when the first byte is a TLS handshake record's, otherwise whatever the
// first read returns. It never reads past the ClientHello, so the rest of
// the connection is untouched. The caller bounds the time with a deadline.
func Read(r io.Reader) (Start, error) {
	var p Start
	buf := make([]byte, 0, 2048)
	var first [1]byte
	if _, err := io.ReadFull(r, first[:]); err != nil {
		return p, err
	}
	buf = append(buf, first[0])
	if first[0] != 0x16 {
		// Not TLS. One read is enough for a request line and a Host
		// header, which an HTTP client sends in one go.
		more := make([]byte, 4096)
		n, err := r.Read(more)
		buf = append(buf, more[:n]...)
		p.Raw = buf
		p.Method, p.Host = httpRequestHost(buf)
		if err == io.EOF {
			err = nil
		}
		return p, err
	}
	p.TLS = true
	var hs []byte // the handshake bytes, over one or more records
	hdr := make([]byte, 5)
	hdr[0] = first[0]
	next := hdr[1:] // the first record's type byte is already read
	for {
		k, err := io.ReadFull(r, next)
		buf = append(buf, next[:k]...)
		if err != nil {
			p.Raw = buf
			return p, err
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if hdr[0] != 0x16 || hdr[1] != 3 || n == 0 || n > maxTLSRecord {
			p.Raw = buf
			return p, ErrMalformed
		}
		if len(buf)+n > MaxHelloBytes+64 {
			p.Raw = buf
			return p, ErrTooLarge
		}
		rec := make([]byte, n)
		k, err = io.ReadFull(r, rec)
		buf = append(buf, rec[:k]...)
		if err != nil {
			p.Raw = buf
			return p, err
		}
		hs = append(hs, rec...)
		if len(hs) >= 4 {
			if hs[0] != 1 { // not a client_hello
				p.Raw = buf
				return p, ErrMalformed
			}
			want := 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
			if want > MaxHelloBytes {
				p.Raw = buf
				return p, ErrTooLarge
			}
			if len(hs) >= want {
				p.Raw = buf
				p.ServerName, err = parseClientHello(hs[:want])
				return p, err
			}
		}
		// The hello goes on in the next record.
		next = hdr
	}
}

// parseClientHello returns the host name of a ClientHello handshake
// message (RFC 8446 §4.1.2, RFC 6066 §3). A hello without one is not an
// error; a hello that does not parse is.
func parseClientHello(msg []byte) (string, error) {
	s := cryptobyte.String(msg)
	var typ uint8
	var body cryptobyte.String
	if !s.ReadUint8(&typ) || typ != 1 || !s.ReadUint24LengthPrefixed(&body) || !s.Empty() {
		return "", ErrMalformed
	}
	var version uint16
	var sessionID, suites, compression cryptobyte.String
	if !body.ReadUint16(&version) || !body.Skip(32) ||
		!body.ReadUint8LengthPrefixed(&sessionID) ||
		!body.ReadUint16LengthPrefixed(&suites) ||
		!body.ReadUint8LengthPrefixed(&compression) {
		return "", ErrMalformed
	}
	if body.Empty() {
		return "", nil // no extensions
	}
	var exts cryptobyte.String
	if !body.ReadUint16LengthPrefixed(&exts) || !body.Empty() {
		return "", ErrMalformed
	}
	sni := ""
	for !exts.Empty() {
		var ext uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&ext) || !exts.ReadUint16LengthPrefixed(&data) {
			return "", ErrMalformed
		}
		if ext != 0 { // server_name
			continue
		}
		var names cryptobyte.String
		if !data.ReadUint16LengthPrefixed(&names) || !data.Empty() {
			return "", ErrMalformed
		}
		for !names.Empty() {
			var nameType uint8
			var name cryptobyte.String
			if !names.ReadUint8(&nameType) || !names.ReadUint16LengthPrefixed(&name) {
				return "", ErrMalformed
			}
			if nameType == 0 && sni == "" {
				sni = hostName(string(name))
			}
		}
	}
	return sni, nil
}

// hostName returns s lower-cased without a trailing dot when it is a DNS
// host name, and "" otherwise: a server name is only ever compared with
// the policy's hosts and logged, and a name with other bytes matches none.
func hostName(s string) string {
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if s == "" || len(s) > 253 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return ""
		}
	}
	return s
}

// httpRequestHost returns the method and the Host header's host of the
// HTTP/1.x request whose start is b, or "" for each it cannot find.
func httpRequestHost(b []byte) (method, host string) {
	head := string(b)
	line, rest, ok := strings.Cut(head, "\r\n")
	if !ok {
		return "", ""
	}
	m, _, ok := strings.Cut(line, " ")
	if !ok || !strings.HasSuffix(line, " HTTP/1.1") && !strings.HasSuffix(line, " HTTP/1.0") {
		return "", ""
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return "", ""
		}
	}
	for {
		var h string
		h, rest, ok = strings.Cut(rest, "\r\n")
		if !ok || h == "" {
			return m, ""
		}
		name, value, found := strings.Cut(h, ":")
		if found && strings.EqualFold(name, "host") {
			hh := strings.TrimSpace(value)
			if h, _, err := net.SplitHostPort(hh); err == nil {
				hh = h
			}
			hh = strings.Trim(hh, "[]")
			return m, hostName(hh)
		}
	}
}
