package devrun

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/policy"
)

// dialerEnv, set in a child's environment to an address, makes this test
// binary run as an app that connects to that address directly, past
// detour, and holds the connection until the other side closes it.
const dialerEnv = "DETOUR_DEVRUN_TEST_DIAL"

func dialerMain(addr string) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dialer:", err)
		return 1
	}
	defer c.Close()
	// Until the test has seen the warning and closes its side.
	_, _ = io.Copy(io.Discard, c)
	return 0
}

// serverEnv, set in a child's environment, makes this test binary run as
// a vendor in a process of its own: it prints "listening ADDR", accepts one
// connection, says "accepted", and closes it when its standard input ends.
const serverEnv = "DETOUR_DEVRUN_TEST_SERVE"

func serverMain() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	fmt.Printf("listening %s\n", ln.Addr())
	c, err := ln.Accept()
	if err != nil {
		return 1
	}
	fmt.Println("accepted")
	_, _ = io.Copy(io.Discard, os.Stdin)
	c.Close()
	return 0
}

// withUpstreamAt adds to the policy file an upstream, in no route, whose
// base URL is addr: a vendor of the policy's that an app could call
// directly.
func withUpstreamAt(t *testing.T, policyPath, addr string) {
	t.Helper()
	data, err := os.ReadFile(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	var pol map[string]any
	if err := json.Unmarshal(data, &pol); err != nil {
		t.Fatal(err)
	}
	pol["upstreams"].(map[string]any)["direct"] = map[string]any{"shape": "openai", "base_url": "http://" + addr + "/v1", "auth": map[string]any{"none": true}}
	if data, err = json.Marshal(pol); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policyPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// What counts as a connection detour should have seen: a vendor's port on
// any address but loopback, and an upstream at an IP address exactly;
// never detour's own listeners, nor an app's own local services.
func TestBypassTargets(t *testing.T) {
	t.Parallel()
	data := `{"version": "t",
		"upstreams": {
			"named": {"shape": "openai", "base_url": "https://llm.example:8443/v1", "auth": {"none": true}},
			"local": {"shape": "openai", "base_url": "http://127.0.0.1:11434/v1", "auth": {"none": true}},
			"host": {"shape": "openai", "base_url": "http://localhost:8000/v1", "auth": {"none": true}},
			"canned": {"shape": "static", "text": "hi"}},
		"routes": [{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["named", "local", "host", "canned"]}]}`
	pol, err := policy.Compile(filepath.Join(t.TempDir(), "policy.json"), []byte(data), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	own := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 443}
	targets := newBypassTargets(pol, own)
	for addr, want := range map[string]bool{
		"93.184.216.34:443":   true,  // a vendor's HTTPS port
		"93.184.216.34:80":    true,  // and plain HTTP
		"[2001:db8::1]:443":   true,  // over IPv6
		"[::ffff:1.2.3.4]:80": true,  // IPv4-mapped
		"10.0.0.7:8443":       true,  // the port of an upstream named by host name
		"127.0.0.1:11434":     true,  // an upstream on loopback, exactly
		"127.0.0.1:8000":      true,  // an upstream at localhost
		"[::1]:8000":          true,  // localhost over IPv6
		"127.0.0.1:443":       false, // detour's own listener
		"127.0.0.1:5432":      false, // the app's own database
		"127.0.0.1:80":        false, // the app's own dev server
		"10.0.0.7:5432":       false, // some other service
		"127.0.0.1:11435":     false, // next to the upstream, not it
	} {
		if got := targets.matches(netip.MustParseAddrPort(addr)); got != want {
			t.Errorf("matches(%s) = %v; want %v", addr, got, want)
		}
	}
}

// The summary repeats each connection past detour, or says the check was
// not made.
func TestSummaryOfConnectionsPastDetour(t *testing.T) {
	t.Parallel()
	s := Summary{Unseen: []Bypass{{Runtime: "node", PID: 12, Remote: "93.184.216.34:443"}, {Runtime: "java", PID: 13, Remote: "[2001:db8::1]:443"}}}
	if got, want := s.String(), "detour: no requests were intercepted (does the app call a host of the policy's routes, honour HTTPS_PROXY and trust detour's CA?); warning: 2 connections detour never saw: node (pid 12) → 93.184.216.34:443, java (pid 13) → [2001:db8::1]:443"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	s = Summary{Requests: 1, Direct: 1, AnsweredBy: map[string]int{"p": 1}, WaysIn: map[string]int{"base URL": 1}, UnseenUnchecked: "the check needs Linux's /proc"}
	if got, want := s.String(), "detour: 1 request: 1 answered directly, 0 failed over; answered by p 1; 0 errors; ways in: base URL 1; connections past detour not checked (the check needs Linux's /proc)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// Each runtime's warning says what most likely let it past detour.
func TestHintNamesTheRuntimesWay(t *testing.T) {
	t.Parallel()
	for runtime, want := range map[string]string{
		"node":       "OPENAI_BASE_URL",
		"java":       "JAVA_TOOL_OPTIONS",
		"python3.11": "trust_env=False",
		"curl":       "--noproxy",
		"ruby":       "detour run --transparent",
	} {
		if got := hint(runtime); !strings.Contains(got, want) {
			t.Errorf("hint(%s) = %q; want it to mention %q", runtime, got, want)
		}
	}
}
