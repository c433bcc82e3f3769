package proxy_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/rewrite"
)

// pipelinedConn sends the CONNECT request in the same write as the first
// TLS bytes, and hides the proxy's "200 Connection established" from the
// TLS client — as clients that do not wait for the 200 behave.
type pipelinedConn struct {
	net.Conn
	connect  []byte
	br       *bufio.Reader
	headRead bool
}

func (c *pipelinedConn) Write(p []byte) (int, error) {
	if c.connect != nil {
		buf := append(c.connect, p...)
		c.connect = nil
		_, err := c.Conn.Write(buf)
		return len(p), err
	}
	return c.Conn.Write(p)
}

func (c *pipelinedConn) Read(p []byte) (int, error) {
	if !c.headRead {
		c.headRead = true
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("CONNECT answered %s", resp.Status)
		}
	}
	return c.br.Read(p)
}

func TestClientHelloInTheConnectWriteIsNotLost(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	raw, err := net.Dial("tcp", h.ProxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	pc := &pipelinedConn{Conn: raw, connect: []byte("CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n"), br: bufio.NewReader(raw)}
	tc := tls.Client(pc, &tls.Config{ServerName: "api.openai.com", RootCAs: h.CAPool})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS handshake with a pipelined ClientHello: %v", err)
	}
	io.WriteString(tc, "POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\nAuthorization: Bearer sk-app\r\nContent-Type: application/json\r\nContent-Length: 33\r\n\r\n"+`{"model":"gpt-4o","messages":[]}`+" ")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Hello from primary.") {
		t.Errorf("got %d %s", resp.StatusCode, body)
	}
}

func TestBaseURLRefusesWebPagesAndForeignHosts(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, detourtest.TwoUpstreams(t, rewrite.OpenAI, primary, backup, ""))
	url := h.ProxyURL.String() + "/openai/v1/chat/completions"
	for _, tc := range []struct {
		name   string
		header map[string]string
		host   string
		want   int
	}{
		{"cross-site page", map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, "", 403},
		{"fetch metadata", map[string]string{"Sec-Fetch-Site": "cross-site"}, "", 403},
		{"DNS rebinding", nil, "attacker.example:8787", 421},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d; want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if primary.Calls()+backup.Calls() != 0 {
		t.Error("a refused request reached an upstream")
	}
}
