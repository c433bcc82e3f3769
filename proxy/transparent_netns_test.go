//go:build linux

package proxy_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/cli"
	"github.com/detour-proxy/detour/internal/detourtest"
	fv "github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/redirect"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/proxy"
	"github.com/detour-proxy/detour/rewrite"
)

// helperEnv selects what TestTransparentNetnsHelper does when the test
// binary runs itself inside a network namespace.
const helperEnv = "DETOUR_NETNS_HELPER"

// TestTransparentNetnsHelper is not a test: it is the test binary's other
// role, run by TestTransparentModeInANetworkNamespace inside the
// namespace, as `detour redirect …` (the real command) or as detour itself.
func TestTransparentNetnsHelper(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "":
		return
	case "redirect":
		// The arguments after the test flags' "--".
		err := cli.Redirect(context.Background(), flagArgs(), os.Stdout, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "detour:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "latency":
		measureLatency()
		os.Exit(0)
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		tlns, err := proxy.ListenTransparent("127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "transparent listen:", err)
			os.Exit(1)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "listen:", err)
			os.Exit(1)
		}
		_, port, _ := net.SplitHostPort(tlns[0].Addr().String())
		err = proxy.Serve(ctx, proxy.Options{
			PolicyPath: os.Getenv("DETOUR_HELPER_POLICY"), Stderr: os.Stderr, Listener: ln, TransparentListeners: tlns,
			Ready: func(net.Addr, *mitm.CA) {
				_, explicit, _ := net.SplitHostPort(ln.Addr().String())
				fmt.Printf("ready %s %d %s\n", port, len(tlns), explicit)
			},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// flagArgs is what follows "--" on the command line.
func flagArgs() []string {
	for i, a := range os.Args {
		if a == "--" {
			return os.Args[i+1:]
		}
	}
	return nil
}

// TestTransparentModeInANetworkNamespace is transparent mode end to end:
// a namespace stands for the app's pod, with redirect rules installed by
// `detour redirect install` and detour listening transparently in it; the
// vendors are across a veth pair. An app (curl) that knows nothing of
// detour calls the vendor host by name: a host the policy names is
// answered through the chain, a host it does not name is spliced (the app
// sees that server's own certificate), over IPv4 and IPv6; detour's own
// connections are not redirected back to it (by mark, then by uid); a
// connection to detour's own port is refused, and so is one of detour's
// own that rules without exclusions send back; `detour redirect remove`
// leaves no rule.
func TestTransparentModeInANetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create a network namespace and program nftables in it (CI runs as root)")
	}
	for _, tool := range []string{"ip", "curl", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s is not installed (.ci/run installs iproute2, curl and util-linux)", tool)
		}
	}
	hostIP, ns := vethPair(t)
	nsFile, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nsFile.Close()
	if _, err := redirect.Show(int(nsFile.Fd())); err != nil {
		t.Skipf("skipped: nf_tables over netlink is not available here: %v", err)
	}
	hostIP6 := addIPv6(t, ns)

	// Files the client reads as another uid live in a directory it can
	// enter (t.TempDir's parent is root's alone).
	pub, err := os.MkdirTemp("", "detour-transparent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	if err := os.Chmod(pub, 0o755); err != nil {
		t.Fatal(err)
	}
	vendorCert, vendorCA := testCertificate(t, pub, "vendor", []net.IP{net.ParseIP(hostIP), net.ParseIP(hostIP6)}, nil)
	otherCert, otherCA := testCertificate(t, pub, "other", nil, []string{"other.example"})

	primary := fv.New(rewrite.OpenAI, fv.Options{Name: "primary"})
	primary.Script(fv.Fault{Kind: fv.Status, Status: 429, Class: fv.ClassInsufficientQuota})
	backup := fv.New(rewrite.OpenAI, fv.Options{Name: "backup"})
	primaryURL := serveTLS(t, hostIP, primary, vendorCert)
	backupURL := serveTLS(t, hostIP, backup, vendorCert)
	other := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the other server's own answer") })
	otherURL := serveTLS(t, hostIP, other, otherCert)
	otherURL6 := serveTLS(t, hostIP6, other, otherCert)
	plainURL := servePlain(t, hostIP, other)

	const mark = 0x1e7
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "policy.json")
	pol := fmt.Sprintf(`{
  "admin_listen": "off",
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "transparent": {"listen": "127.0.0.1:15001", "mark": %d},
  "egress": {"tunnel": "deny"},
  "upstreams": {
    "primary": {"shape": "openai", "base_url": %q, "auth": {"from": "client"}, "ca_file": %q},
    "backup": {"shape": "openai", "base_url": %q, "auth": {"from": "client"}, "ca_file": %q}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["primary", "backup"]}]
}`, mark, primaryURL+"/v1", vendorCA, backupURL+"/v1", vendorCA)
	if err := os.WriteFile(policyPath, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}

	var log detourtest.SyncBuffer
	toPort, _ := startDetourInNamespace(t, ns, policyPath, &log)
	detourCA := filepath.Join(dir, "ca.pem")

	portOf := func(u string) string { return u[strings.LastIndex(u, ":")+1:] }
	vendorPort := portOf(primaryURL)
	ports := strings.Join([]string{vendorPort, portOf(backupURL), portOf(otherURL), portOf(otherURL6), portOf(plainURL)}, ",")
	redirectCmd(t, ns, "install", "--to-port", toPort, "--ports", ports, "--exclude-mark", strconv.Itoa(mark))

	chat := func(ip string, asUID int) string {
		t.Helper()
		out, err := curlIn(ns, asUID, "-sS", "--cacert", detourCA,
			"--resolve", "api.openai.com:"+vendorPort+":"+ip,
			"-H", "Authorization: Bearer sk-test", "-H", "Content-Type: application/json",
			"--data", `{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}`,
			"https://api.openai.com:"+vendorPort+"/v1/chat/completions")
		if err != nil {
			t.Fatalf("chat through %s: %v\n%s\ndetour's log:\n%s", ip, err, out, log.String())
		}
		var resp struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil || len(resp.Choices) != 1 {
			t.Fatalf("chat through %s: answer %q (%v)", ip, out, err)
		}
		return resp.Choices[0].Message.Content
	}

	// Intercepted: the primary's quota is exhausted, the backup answers.
	if got := chat(hostIP, 0); got != "Hello from backup." {
		t.Errorf("intercepted call over IPv4: answer %q; want the backup's \"Hello from backup.\"", got)
	}
	if primary.Calls() != 1 || backup.Calls() != 1 {
		t.Errorf("calls: primary %d, backup %d; want 1 and 1 (429 insufficient_quota, then the backup)", primary.Calls(), backup.Calls())
	}
	if got := chat("["+hostIP6+"]", 0); got != "Hello from backup." {
		t.Errorf("intercepted call over IPv6: answer %q; want the backup's", got)
	}

	// Spliced: curl trusts only the other server's own CA, so an answer
	// means it saw that server's certificate, not one of detour's.
	other4 := func(asUID int) {
		t.Helper()
		out, err := curlIn(ns, asUID, "-sS", "--cacert", otherCA, "--resolve", "other.example:"+portOf(otherURL)+":"+hostIP,
			"https://other.example:"+portOf(otherURL)+"/")
		if err != nil || out != "the other server's own answer" {
			t.Errorf("spliced call over IPv4: %q, %v; want the other server's own answer under its own certificate\n%s", out, err, log.String())
		}
	}
	other4(0)
	out, err := curlIn(ns, 0, "-sS", "--cacert", otherCA, "--resolve", "other.example:"+portOf(otherURL6)+":["+hostIP6+"]",
		"https://other.example:"+portOf(otherURL6)+"/")
	if err != nil || out != "the other server's own answer" {
		t.Errorf("spliced call over IPv6: %q, %v; want the other server's own answer", out, err)
	}
	out, err = curlIn(ns, 0, "-sS", "--resolve", "other.example:"+portOf(plainURL)+":"+hostIP, "http://other.example:"+portOf(plainURL)+"/")
	if err != nil || out != "the other server's own answer" {
		t.Errorf("spliced plain HTTP call: %q, %v; want the other server's own answer", out, err)
	}
	// Plain HTTP to a host a route names, on the same redirected port:
	// decided by its Host header and answered by the chain (the primary is
	// cooling down after its quota), not spliced to the server there.
	out, err = curlIn(ns, 0, "-sS", "--resolve", "api.openai.com:"+portOf(plainURL)+":"+hostIP,
		"-H", "Authorization: Bearer sk-test", "-H", "Content-Type: application/json",
		"--data", `{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}`,
		"http://api.openai.com:"+portOf(plainURL)+"/v1/chat/completions")
	if err != nil || !strings.Contains(out, "Hello from backup.") {
		t.Errorf("plain HTTP call to api.openai.com: %q, %v; want the backup's answer through the chain\n%s", out, err, log.String())
	}

	// detour's own port, dialled directly: refused, never spliced to itself.
	if out, err := curlIn(ns, 0, "-sS", "-k", "https://127.0.0.1:"+toPort+"/"); err == nil {
		t.Errorf("a connection to detour's own transparent port was answered: %q", out)
	}

	// detour's own connections by uid: the rules now exclude uid 0
	// (detour's, here) and no mark, and the app runs as another uid. A
	// spliced connection is a new dial of detour's each time, so a loop
	// would show as more than one line for it.
	redirectCmd(t, ns, "install", "--to-port", toPort, "--ports", ports, "--exclude-uid", "0")
	other4(65534)

	// Rules that exclude nothing send detour's own splice back to it: it
	// refuses that connection, once, rather than splicing itself until it
	// runs out of file descriptors.
	redirectCmd(t, ns, "install", "--to-port", toPort, "--ports", ports)
	if out, err := curlIn(ns, 0, "-sS", "--cacert", otherCA, "--resolve", "other.example:"+portOf(otherURL)+":"+hostIP,
		"https://other.example:"+portOf(otherURL)+"/"); err == nil {
		t.Errorf("spliced call with detour's own connections redirected back to it: answered %q; want it to fail", out)
	}

	lines := waitLogLines(t, &log, 9)
	var intercepted, spliced, refusedSelf, looped int
	for _, l := range lines {
		if l["mode"] != proxy.ModeTransparent {
			t.Errorf("log line without mode transparent: %v", l)
			continue
		}
		switch {
		case l["host"] == "api.openai.com":
			intercepted++
		case l["host"] == "other.example" && l["outcome"] == proxy.EgressOK:
			spliced++
		case l["outcome"] == proxy.EgressRefused && strings.Contains(fmt.Sprint(l["error"]), "detour's own listener"):
			refusedSelf++
		case l["outcome"] == proxy.EgressRefused && strings.Contains(fmt.Sprint(l["error"]), "redirected back to it"):
			looped++
		default:
			t.Errorf("unexpected log line (detour's own connection looped back?): %v", l)
		}
	}
	// Three intercepted: two over TLS, one over plain HTTP. Five splices:
	// four answered, and the last one's, whose own dial came back.
	if intercepted != 3 || spliced != 5 || refusedSelf != 1 || looped != 1 {
		t.Errorf("log lines: %d intercepted, %d spliced, %d refused as detour itself, %d refused as looped; want 3, 5, 1, 1:\n%s",
			intercepted, spliced, refusedSelf, looped, log.String())
	}

	redirectCmd(t, ns, "remove")
	redirectCmd(t, ns, "remove") // removing what is gone succeeds
	if out := redirectCmd(t, ns, "show"); out != "" {
		t.Errorf("redirect show after remove printed %q; want nothing", out)
	}
	if rules, err := redirect.Show(int(nsFile.Fd())); err != nil || len(rules) != 0 {
		t.Errorf("rules in the namespace after remove: %v, %v; want none", rules, err)
	}
}

// addIPv6 gives the veth pair of vethPair an IPv6 address on each side and
// returns this side's.
func addIPv6(t testing.TB, ns string) string {
	t.Helper()
	id := os.Getpid() % 16000
	host, peer := fmt.Sprintf("dth%d", id), fmt.Sprintf("dtp%d", id)
	mine, theirs := fmt.Sprintf("fd00:de70:%x::1", id), fmt.Sprintf("fd00:de70:%x::2", id)
	for _, args := range [][]string{
		{"-6", "addr", "add", mine + "/64", "dev", host, "nodad"},
		{"netns", "exec", ns, "ip", "-6", "addr", "add", theirs + "/64", "dev", peer, "nodad"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return mine
}

// testCertificate makes a CA and a leaf it signs for ips and names; the CA
// is written to dir/name-ca.pem.
func testCertificate(t testing.TB, dir, name string, ips []net.IP, names []string) (tls.Certificate, string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: ips, DNSNames: names, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+"-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, path
}

// serveTLS serves h over TLS with cert on ip, at a port of the kernel's
// choosing, and returns its https URL.
func serveTLS(t testing.TB, ip string, h http.Handler, cert tls.Certificate) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

// servePlain serves h over plain HTTP on ip and returns its URL.
func servePlain(t testing.TB, ip string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// startDetourInNamespace runs detour (this test binary as
// TestTransparentNetnsHelper) inside ns and returns its transparent port.
func startDetourInNamespace(t testing.TB, ns, policyPath string, log io.Writer) (transparentPort, explicitPort string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, exe, "-test.run=^TestTransparentNetnsHelper$")
	cmd.Env = testsupport.ChildEnv(helperEnv+"=serve", "DETOUR_HELPER_POLICY="+policyPath)
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	ready := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "ready" {
				ready <- f[1:]
			}
		}
	}()
	select {
	case f := <-ready:
		if f[1] != "2" {
			t.Fatalf("detour listens transparently on %s listener(s); want 2 (127.0.0.1 and ::1)", f[1])
		}
		return f[0], f[2]
	case <-exited:
		t.Fatalf("detour exited before it was ready:\n%s", log)
	case <-time.After(30 * time.Second):
		t.Fatalf("detour was not ready within 30s:\n%s", log)
	}
	return "", ""
}

// redirectCmd runs `detour redirect ARGS` inside ns and returns its stdout.
func redirectCmd(t testing.TB, ns string, args ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	full := append([]string{"netns", "exec", ns, exe, "-test.run=^TestTransparentNetnsHelper$", "--"}, args...)
	cmd := exec.Command("ip", full...)
	cmd.Env = testsupport.ChildEnv(helperEnv + "=redirect")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("detour redirect %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// curlIn runs curl inside ns as uid (0: root) and returns its output.
func curlIn(ns string, uid int, args ...string) (string, error) {
	full := []string{"netns", "exec", ns}
	if uid != 0 {
		full = append(full, "setpriv", "--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(uid), "--clear-groups")
	}
	full = append(full, "curl", "--max-time", "20")
	out, err := exec.Command("ip", append(full, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// waitLogLines waits for n request lines in detour's log: the egress line
// of a splice is written when the connection ends, after curl has exited.
func waitLogLines(t *testing.T, log *detourtest.SyncBuffer, n int) []map[string]any {
	t.Helper()
	parse := func(text string) []map[string]any {
		var lines []map[string]any
		for _, s := range strings.Split(text, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(s), &m) == nil && m["message"] == "request" {
				lines = append(lines, m)
			}
		}
		return lines
	}
	// Wait wakes on every write to the log: no polling interval.
	log.Wait(15*time.Second, func(text string) bool { return len(parse(text)) >= n })
	return parse(log.String())
}
