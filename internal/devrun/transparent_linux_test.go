//go:build linux

package devrun

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
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/redirect"
)

// transparentClientEnv, set in a child's environment, makes the test binary
// run TestTransparentClientHelper as a client that ignores every proxy
// variable: it dials the comma-separated addresses it holds directly, as
// api.openai.com, trusting the system roots (SSL_CERT_FILE).
const transparentClientEnv = "DETOUR_DEVRUN_TRANSPARENT_CLIENT"

// TestTransparentClientHelper is not a test: it is the test binary's role
// as the CMD of TestRunTransparentRedirectsOnlyTheCommand.
func TestTransparentClientHelper(t *testing.T) {
	addrs := os.Getenv(transparentClientEnv)
	if addrs == "" {
		return
	}
	os.Exit(transparentClient(strings.Split(addrs, ",")))
}

// transparentClient calls the chat API of api.openai.com at each address
// and prints "ADDRESS ANSWER" lines; then it waits for its stdin to close,
// so that the test can look at the run while the command still runs.
func transparentClient(addrs []string) int {
	for _, addr := range addrs {
		_, port, _ := net.SplitHostPort(addr)
		client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
			Proxy: nil, // what Node 20's fetch does with HTTPS_PROXY
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			},
		}}
		resp, err := client.Post("https://api.openai.com:"+port+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}`))
		if err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			return 1
		}
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || len(out.Choices) != 1 {
			fmt.Fprintf(os.Stderr, "client: status %d, %v\n", resp.StatusCode, err)
			return 1
		}
		fmt.Printf("%s %s\n", addr, out.Choices[0].Message.Content)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// requireTransparent skips a test that cannot run `detour run
// --transparent` here, saying why, and returns the cgroup2 mount.
func requireTransparent(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: detour run --transparent needs root (CAP_NET_ADMIN, and a cgroup to create); CI runs as root")
	}
	mount, _, err := cgroup2Mount()
	if err != nil {
		t.Skipf("skipped: %v", err)
	}
	return mount
}

// standInAddresses adds an IPv4 address, and an IPv6 one when the host has
// IPv6, of the test's own to the loopback interface, removed when the test
// ends: addresses that are local, so a server can stand at them for the
// vendor, but not loopback ones, which the redirect leaves alone. They are
// derived from the pid, so two test processes never share one.
func standInAddresses(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipped: ip is not installed (.ci/run installs iproute2)")
	}
	pid := os.Getpid()
	// 198.18.0.0/15 is reserved for tests of network devices; fd00::/8 is
	// unique-local.
	v4 := fmt.Sprintf("198.%d.%d.%d", 18+pid>>16&1, pid>>8&0xff, pid&0xff)
	v6 := fmt.Sprintf("fd00:de71::%x", pid)
	var addrs []string
	for _, a := range []struct{ ip, prefix, family string }{{v4, "/32", "-4"}, {v6, "/128", "-6"}} {
		args := []string{a.family, "addr", "add", a.ip + a.prefix, "dev", "lo"}
		if a.family == "-6" {
			args = append(args, "nodad")
		}
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			if a.family == "-6" {
				t.Logf("no IPv6 stand-in address (%v: %s): testing IPv4 only", err, out)
				continue
			}
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", a.family, "addr", "del", a.ip+a.prefix, "dev", "lo").Run() })
		addrs = append(addrs, a.ip)
	}
	return addrs
}

// standIn serves, at ip, a TLS server with a certificate of its own for
// api.openai.com: whoever reaches it directly sees that certificate, not
// one of detour's. It returns the address and the pool that trusts it.
func standIn(t *testing.T, ip string) (string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stand-in for api.openai.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"api.openai.com"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "the stand-in's own answer")
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return ln.Addr().String(), pool
}

// runName is the name of a run's table and cgroup, as its stderr says.
func runName(t *testing.T, stderr string) string {
	t.Helper()
	m := regexp.MustCompile(`nftables table inet (` + redirect.RunTablePrefix + `[0-9-]+)\)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not say what is redirected:\n%s", stderr)
	}
	return m[1]
}

// TestRunTransparentRedirectsOnlyTheCommand is `detour run --transparent`
// end to end: a command that ignores HTTPS_PROXY calls api.openai.com at
// an address where a server of its own stands, over IPv4 and IPv6; detour
// intercepts those calls and answers them through the chain (the fake
// vendor), logged with mode "transparent". Meanwhile the same address
// dialled by a process outside the command's cgroup (the test itself)
// reaches the stand-in, under its own certificate. When the run ends, its
// nftables table and its cgroup are gone.
func TestRunTransparentRedirectsOnlyTheCommand(t *testing.T) {
	t.Parallel()
	mount := requireTransparent(t)
	var targets []string
	var pools []*x509.CertPool
	var ports []uint16
	for _, ip := range standInAddresses(t) {
		addr, pool := standIn(t, ip)
		_, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		targets, pools, ports = append(targets, addr), append(pools, pool), append(ports, uint16(p))
	}
	policyPath, primary, _ := vendors(t, fakevendor.Fault{})
	bin, gorace := selfCommand(t)
	stdin, closeStdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	defer closeStdin.Close()
	opts, stdout, stderr := withDefaults(t, Options{
		Command:     []string{bin, "-test.run=^TestTransparentClientHelper$"},
		PolicyPath:  policyPath,
		Env:         baseEnv(transparentClientEnv+"="+strings.Join(targets, ","), gorace),
		Stdin:       stdin,
		Transparent: TransparentOptions{Enabled: true, Ports: ports},
	})
	done := make(chan Result, 1)
	go func() {
		res, err := Run(context.Background(), opts)
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- res
	}()

	// Until the command has printed its answers, or has ended without.
	deadline := time.After(60 * time.Second)
	for {
		changed := stdout.Changed()
		if strings.Count(stdout.String(), "\n") >= len(targets) {
			break
		}
		select {
		case <-changed:
			continue
		case <-done:
		case <-deadline:
			closeStdin.Close()
			<-done
		}
		t.Fatalf("the command did not print its answers\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	for _, addr := range targets {
		if want := addr + " Hello from primary."; !strings.Contains(stdout.String(), want+"\n") {
			t.Errorf("the command printed %q; want the line %q (answered by detour's chain)", stdout.String(), want)
		}
	}

	// While the command runs: its rules are in place, and they do not
	// touch a process outside its cgroup.
	name := runName(t, stderr.String())
	if rules, err := redirect.ShowTable(name); err != nil || len(rules) == 0 {
		t.Errorf("table inet %s during the run: %v, %v; want its rules", name, rules, err)
	}
	if _, err := os.Stat(filepath.Join(mount, name)); err != nil {
		t.Errorf("the command's cgroup during the run: %v", err)
	}
	for i, addr := range targets {
		client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
			Proxy:           nil,
			TLSClientConfig: &tls.Config{RootCAs: pools[i]},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			},
		}}
		resp, err := client.Get("https://api.openai.com:" + strconv.Itoa(int(ports[i])) + "/")
		if err != nil {
			t.Errorf("a call to %s from outside the command's cgroup: %v; want the stand-in's own answer under its own certificate", addr, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "the stand-in's own answer" {
			t.Errorf("a call to %s from outside the command's cgroup: %q; want the stand-in's own answer", addr, body)
		}
	}

	closeStdin.Close()
	var res Result
	select {
	case res = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the run did not end within 60s of the command's stdin closing")
	}
	if res.ExitCode != 0 {
		t.Errorf("exit code %d; want 0\nstderr:\n%s", res.ExitCode, stderr.String())
	}
	if primary.Calls() != len(targets) {
		t.Errorf("the vendor was called %d times; want %d", primary.Calls(), len(targets))
	}
	var transparent int
	for _, l := range logLines(t, opts.LogFile) {
		if l["message"] == "request" && l["host"] == "api.openai.com" {
			if l["mode"] != "transparent" {
				t.Errorf("request logged with mode %v; want transparent: %v", l["mode"], l)
			}
			transparent++
		}
	}
	if transparent != len(targets) {
		t.Errorf("%d intercepted requests logged; want %d", transparent, len(targets))
	}
	assertRunCleanedUp(t, mount, name)
}

// assertRunCleanedUp checks that the table and the cgroup of the run name
// are gone.
func assertRunCleanedUp(t *testing.T, mount, name string) {
	t.Helper()
	tables, err := redirect.ListRunTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == name {
			t.Errorf("table inet %s remains after the run", tb.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(mount, name)); !os.IsNotExist(err) {
		t.Errorf("cgroup %s remains after the run (%v)", filepath.Join(mount, name), err)
	}
}

// logLines reads detour's JSON log.
func logLines(t *testing.T, file string) []map[string]any {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// TestRunTransparentRemovesWhatADeadRunLeft: a table and a cgroup named
// after a detour that died (a pid no process has) are removed by the next
// transparent run, which says so.
//
// Not parallel: any run that starts meanwhile would remove them first.
func TestRunTransparentRemovesWhatADeadRunLeft(t *testing.T) {
	mount := requireTransparent(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	name := redirect.RunName(dead.Process.Pid, 1)
	dir := filepath.Join(mount, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir); _ = redirect.RemoveTable(name) })
	id, err := cgroupID(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := redirect.InstallCgroup(redirect.CgroupRules{Table: name, CgroupID: id, Levels: []uint32{1}, ToPort: 1, Ports: []uint16{2}}); err != nil {
		t.Fatal(err)
	}

	res, _, stderr := run(t, Options{Command: []string{"true"}, PolicyPath: quietPolicy(t), Transparent: TransparentOptions{Enabled: true}})
	if res.ExitCode != 0 {
		t.Errorf("exit code %d; want 0\n%s", res.ExitCode, stderr.String())
	}
	if rules, err := redirect.ShowTable(name); err != nil || rules != nil {
		t.Errorf("the dead run's table after the next run: %v, %v; want it gone", rules, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the dead run's cgroup %s after the next run: %v; want it gone", dir, err)
	}
	for _, want := range []string{"removed table inet " + name, "removed cgroup " + dir} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	assertRunCleanedUp(t, mount, runName(t, stderr.String()))
}

// TestRunTransparentEndsWhatTheCommandLeftRunning: a process CMD started in
// the background is in CMD's cgroup; it is killed when the run ends, so
// that the cgroup can be removed.
func TestRunTransparentEndsWhatTheCommandLeftRunning(t *testing.T) {
	t.Parallel()
	mount := requireTransparent(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	res, _, stderr := run(t, Options{
		Command:     []string{"sh", "-c", "sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > " + pidFile},
		PolicyPath:  quietPolicy(t),
		Transparent: TransparentOptions{Enabled: true},
	})
	if res.ExitCode != 0 {
		t.Errorf("exit code %d; want 0\n%s", res.ExitCode, stderr.String())
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid > 0 && alive(pid) {
		// Reaped by init once killed; a zombie still answers signal 0,
		// so look at its state.
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if f := strings.Fields(string(stat)); len(f) > 2 && f[2] != "Z" && f[2] != "X" {
			_ = exec.Command("kill", "-9", strconv.Itoa(pid)).Run()
			t.Errorf("the background process %d outlived the run (state %s)", pid, f[2])
		}
	}
	if !strings.Contains(stderr.String(), "killing 1 process(es)") {
		t.Errorf("stderr does not say it killed the leftover:\n%s", stderr.String())
	}
	assertRunCleanedUp(t, mount, runName(t, stderr.String()))
}

func TestUnescapeMountinfo(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/sys/fs/cgroup":         "/sys/fs/cgroup",
		`/mnt/my\040cgroup`:      "/mnt/my cgroup",
		`/a\134b`:                `/a\b`,
		`/trailing\04`:           `/trailing\04`,
		"/sys/fs/cgroup/unified": "/sys/fs/cgroup/unified",
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q; want %q", in, got, want)
		}
	}
}

// noCapEnv makes the test binary run TestTransparentWithoutCapabilityHelper:
// a transparent run attempted without CAP_NET_ADMIN, printing its error.
const noCapEnv = "DETOUR_DEVRUN_TRANSPARENT_NO_CAP"

// TestTransparentWithoutCapabilityHelper is not a test: it is the test
// binary's role, under setpriv, in TestRunTransparentNamesTheCapability.
func TestTransparentWithoutCapabilityHelper(t *testing.T) {
	if os.Getenv(noCapEnv) == "" {
		return
	}
	_, err := Run(context.Background(), Options{Command: []string{"true"}, PolicyPath: os.Getenv(noCapEnv), Transparent: TransparentOptions{Enabled: true}})
	fmt.Println(err)
	os.Exit(0)
}

// TestRunTransparentNamesTheCapability: without CAP_NET_ADMIN, a
// transparent run does not start, and its error names the capability and
// what to do. Root runs the check in a child that setpriv deprived of it.
func TestRunTransparentNamesTheCapability(t *testing.T) {
	t.Parallel()
	pol := quietPolicy(t)
	var msg string
	if os.Geteuid() != 0 {
		_, err := Run(context.Background(), Options{Command: []string{"true"}, PolicyPath: pol, Stderr: io.Discard, Transparent: TransparentOptions{Enabled: true}})
		if err == nil {
			t.Fatal("a transparent run without root started")
		}
		msg = err.Error()
	} else {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("skipped: as root, this needs setpriv to drop CAP_NET_ADMIN (.ci/run installs util-linux)")
		}
		bin, gorace := selfCommand(t)
		cmd := exec.Command("setpriv", "--bounding-set=-net_admin", "--inh-caps=-net_admin", "--",
			bin, "-test.run=^TestTransparentWithoutCapabilityHelper$")
		cmd.Env = baseEnv(noCapEnv+"="+pol, gorace)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the helper failed: %v\n%s", err, out)
		}
		msg = string(out)
	}
	for _, want := range []string{"CAP_NET_ADMIN", "run it as root", "without --transparent"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

// TestRunTransparentCleansUpWhenDetourFailsToStart: detour's start fails
// after the run's table and cgroup exist (a CA file that is not one); Run
// returns the error, and neither remains.
//
// Not parallel: it looks for any run of this process left behind, and the
// parallel tests' runs are in flight only once the serial tests are done.
func TestRunTransparentCleansUpWhenDetourFailsToStart(t *testing.T) {
	mount := requireTransparent(t)
	dir := t.TempDir()
	notACert := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notACert, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(dir, "policy.json")
	data := fmt.Sprintf(`{"ca": {"cert_file": %q, "key_file": %q}, "admin_listen": "off"}`, notACert, filepath.Join(dir, "ca-key.pem"))
	if err := os.WriteFile(pol, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, _, stderr := withDefaults(t, Options{Command: []string{"true"}, PolicyPath: pol, Transparent: TransparentOptions{Enabled: true}})
	if _, err := Run(context.Background(), opts); err == nil {
		t.Fatalf("Run with an unusable CA succeeded\n%s", stderr.String())
	}
	tables, err := redirect.ListRunTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.PID == os.Getpid() {
			t.Errorf("table inet %s remains after a run whose detour did not start", tb.Name)
		}
	}
	entries, _ := os.ReadDir(mount)
	for _, e := range entries {
		if pid, ok := redirect.ParseRunName(e.Name()); ok && pid == os.Getpid() {
			t.Errorf("cgroup %s remains after a run whose detour did not start", filepath.Join(mount, e.Name()))
		}
	}
}

// TestRunTransparentCleansUpAfterASignal: a SIGTERM that detour passes on
// ends CMD; the run's table and cgroup go with it.
func TestRunTransparentCleansUpAfterASignal(t *testing.T) {
	t.Parallel()
	mount := requireTransparent(t)
	sigs := make(chan os.Signal, 1)
	opts, _, stderr := withDefaults(t, Options{
		Command: []string{"sleep", "1000"}, PolicyPath: quietPolicy(t), Signals: sigs,
		Transparent: TransparentOptions{Enabled: true},
	})
	done := make(chan Result, 1)
	go func() {
		res, err := Run(context.Background(), opts)
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- res
	}()
	stderr.WaitFor(t, 30*time.Second, "nftables table inet ")
	name := runName(t, stderr.String())
	// The child may not have started when the line is written; a signal
	// that arrives before it ends the run too, as the user asked.
	sigs <- syscall.SIGTERM
	select {
	case res := <-done:
		if res.ExitCode != 128+int(syscall.SIGTERM) {
			t.Errorf("exit code %d; want %d (SIGTERM)", res.ExitCode, 128+int(syscall.SIGTERM))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end within 30s of SIGTERM")
	}
	assertRunCleanedUp(t, mount, name)
}

// TestCgroupLevels: in the host's cgroup namespace a cgroup made below the
// mount is at one known depth; in another (a container's), whose root's
// own depth cannot be read, every depth it may be at is tried.
func TestCgroupLevels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		root      string
		initialNS bool
		want      []uint32
	}{
		{"/", true, []uint32{1}},
		{"/user.slice/session-1.scope", true, []uint32{3}},
		{"/", false, []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}},
	} {
		if got := cgroupLevels(tc.root, tc.initialNS); !slices.Equal(got, tc.want) {
			t.Errorf("cgroupLevels(%q, %v) = %v; want %v", tc.root, tc.initialNS, got, tc.want)
		}
	}
}
