package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// TestServeTransparentFlagOverridesThePolicy: `detour serve --transparent
// ADDR` listens for redirected connections on ADDR, on both loopbacks,
// whether the policy has a transparent section or names another address
// (here one that is taken, so listening there would fail the start), which
// is how the Kubernetes sidecar gets the port its init container's rules
// redirect to from a user's policy that knows nothing of it.
func TestServeTransparentFlagOverridesThePolicy(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	for _, tc := range []struct{ name, section string }{
		{"no transparent section", ""},
		{"another transparent.listen", fmt.Sprintf(`"transparent": {"listen": %q},`, taken.Addr().String())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pol := filepath.Join(t.TempDir(), "policy.json")
			os.WriteFile(pol, []byte(fmt.Sprintf(`{%s "listen": "127.0.0.1:0", "admin_listen": "off",
  "upstreams": {"openai": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}}},
  "routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["openai"]}],
  "ca": {"cert_file": %q, "key_file": %q}}`, tc.section, filepath.Join(dir, tc.name+"-ca.pem"), filepath.Join(dir, tc.name+"-ca-key.pem"))), 0o644)
			ctx, cancel := context.WithCancel(context.Background())
			var stderr testsupport.SyncBuffer
			done := make(chan error, 1)
			go func() {
				done <- Serve(nil)(ctx, []string{"--policy", pol, "--transparent", "127.0.0.1:0"}, &stderr, &stderr)
			}()
			defer func() {
				cancel()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("serve: %v", err)
					}
				case <-time.After(30 * time.Second):
					t.Error("serve did not stop")
				}
			}()
			if !stderr.Wait(10*time.Second, func(s string) bool {
				return strings.Contains(s, "transparent listener is listening") || strings.Contains(s, "serve returned")
			}) {
				t.Fatalf("no transparent listener:\n%s", stderr.String())
			}
			var line struct{ Listen []string }
			for l := range strings.SplitSeq(stderr.String(), "\n") {
				if strings.Contains(l, "transparent listener is listening") {
					if err := json.Unmarshal([]byte(l), &line); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(line.Listen) == 0 || !strings.HasPrefix(line.Listen[0], "127.0.0.1:") || slicesContain(line.Listen, taken.Addr().String()) {
				t.Fatalf("transparent listener on %q; want the flag's 127.0.0.1 (and [::1]) only:\n%s", line.Listen, stderr.String())
			}
			c, err := net.Dial("tcp", line.Listen[0])
			if err != nil {
				t.Fatalf("dialling the transparent listener: %v", err)
			}
			c.Close()
		})
	}
}

func slicesContain(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// TestServeTransparentFlagWantsLoopback: any other address is a usage
// error, before anything listens.
func TestServeTransparentFlagWantsLoopback(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"10.1.2.3:15001", "0.0.0.0:15001", "15001", "example.com:15001"} {
		_, stderr, err := runCmd(t, Serve(nil), "--transparent", addr)
		if !errors.Is(err, ErrUsage) || !strings.Contains(stderr, "--transparent") {
			t.Errorf("--transparent %s: %v %q; want a usage error naming --transparent", addr, err, stderr)
		}
	}
}
