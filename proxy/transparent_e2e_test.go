package proxy_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// A connection made straight to the transparent listener, not redirected
// by the kernel, has detour itself as its destination: it is refused, with
// a log line, and never spliced to detour's own port. This holds without
// root (no redirect rules are needed to make one).
func TestTransparentListenerRefusesADirectConnection(t *testing.T) {
	t.Parallel()
	primary := detourtest.NewVendor(t, rewrite.OpenAI, "primary")
	backup := detourtest.NewVendor(t, rewrite.OpenAI, "backup")
	h := detourtest.Start(t, twoUpstreams(t, rewrite.OpenAI, primary, backup, `, "transparent": {"listen": "127.0.0.1:0"}`))
	line := h.WaitLogLine(t, "transparent listener is listening", func(map[string]any) bool { return true })
	addrs, _ := line["listen"].([]any)
	if len(addrs) == 0 {
		t.Fatalf("transparent listener line without addresses: %v", line)
	}
	for _, a := range addrs {
		addr := fmt.Sprint(a)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"))
		n, err := io.ReadAll(c)
		c.Close()
		if len(n) != 0 || (err != nil && !errors.Is(err, io.EOF) && !isReset(err)) {
			t.Errorf("direct connection to %s: read %q, %v; want it closed unanswered", addr, n, err)
		}
		h.WaitLogLine(t, "request", func(l map[string]any) bool {
			return l["mode"] == proxy.ModeTransparent && l["outcome"] == proxy.EgressRefused && l["port"] != ""
		})
	}
	if primary.Calls()+backup.Calls() != 0 {
		t.Errorf("a refused connection reached a vendor")
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
