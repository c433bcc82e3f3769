//go:build linux

package clientmatrix

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/redirect"
	"github.com/detour-proxy/detour/internal/testsupport"
	"software.sslmate.com/src/go-pkcs12"
)

// transparentMark is the socket mark of detour's own connections, which
// the redirect rules leave alone.
const transparentMark = 0x1e8

// transparentWay is transparent mode as a pod gets it: the apps run in a
// network namespace whose outbound :443 `detour redirect install` sends to
// detour (one detour for every cell, in that namespace), and the vendor
// host names resolve, through the namespace's own /etc/hosts, to the far
// side of a veth pair where no vendor listens. The apps get trust in
// detour's CA (the variables each runtime reads a CA from; Java a PKCS12
// trust store, as the user's own keytool step makes one) and no proxy variable.
func transparentWay(t *testing.T, cls []*client) *way {
	if os.Geteuid() != 0 {
		t.Skip("skipped: transparent mode needs root, to make a network namespace and program nftables in it (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("ip is not installed: .ci/run installs it (apt-get install iproute2)")
		}
		t.Skip("skipped: ip is not installed (apt-get install iproute2)")
	}
	hostIP, ns := testsupport.VethPair(t, "detour-matrix", "dm", 19)
	nsFile, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nsFile.Close()
	if _, err := redirect.Show(int(nsFile.Fd())); err != nil {
		t.Skipf("skipped: nf_tables over netlink is not available here: %v", err)
	}
	testsupport.NamespaceHosts(t, ns,
		"127.0.0.1 localhost", "::1 localhost",
		hostIP+" api.openai.com api.anthropic.com generativelanguage.googleapis.com")

	w := newWorld(t, hostIP, cls)
	pol := w.policy(t, "transparent", w.cells, map[string]any{
		"transparent": map[string]any{"listen": "127.0.0.1:15001", "mark": transparentMark},
	})
	log := &testsupport.SyncBuffer{}
	port := startDetourIn(t, ns, pol, log)
	redirectIn(t, ns, "install", "--to-port", port, "--ports", "443", "--exclude-mark", strconv.Itoa(transparentMark))
	t.Cleanup(func() { redirectIn(t, ns, "remove") })

	// Trust, the one thing the apps are given: a bundle of the system
	// roots and detour's CA for the runtimes that replace their store with
	// a file, detour's CA alone for Node (which adds it to its own), and a
	// PKCS12 trust store for Java.
	bundle := filepath.Join(w.dir, "bundle.pem")
	var b bytes.Buffer
	err = mitm.WriteBundle(&b, w.ca, true)
	if errors.Is(err, mitm.ErrNoSystemRoots) {
		b.Reset()
		err = mitm.WriteBundle(&b, w.ca, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	trust := map[string]string{"NODE_EXTRA_CA_CERTS": w.caCert}
	// The store is what `keytool -importcert -storetype PKCS12 -storepass
	// changeit` writes (Java 17's PKCS12: certificates under PBES2 with
	// AES-256, an HMAC-SHA-256 MAC), encoded here rather than by keytool, a
	// JVM that costs more CPU than the Java app itself.
	store := filepath.Join(w.dir, "truststore.p12")
	p12, err := pkcs12.Modern2023.EncodeTrustStoreEntries([]pkcs12.TrustStoreEntry{{Cert: w.ca.Cert, FriendlyName: "detour"}}, "changeit")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store, p12, 0o644); err != nil {
		t.Fatal(err)
	}
	trust["JAVA_TOOL_OPTIONS"] = "-Djavax.net.ssl.trustStore=" + store + " -Djavax.net.ssl.trustStorePassword=changeit -Djavax.net.ssl.trustStoreType=PKCS12"
	// Each app gets only the variable its runtime reads, so that a cell
	// proves which one that is.
	env := func(c *client) []string {
		v, ok := trust[c.trustVar]
		if !ok {
			v = bundle
		}
		return []string{c.trustVar + "=" + v}
	}

	wy := &way{world: w, env: env, mode: func(*client) string { return "transparent" }}
	wy.run = func(t *testing.T, c *client, cells []*cell, argv, env []string, stdout io.Writer) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, argv...)...)
		cmd.Env = env
		var stderr testsupport.SyncBuffer
		cmd.Stdout, cmd.Stderr = stdout, &stderr
		cmd.WaitDelay = 5 * time.Second
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
		}
		waitRequestLines(log, cells)
		// The log is every app's: keep detour's own lines and this app's
		// requests.
		var mine []string
		for _, l := range strings.Split(log.String(), "\n") {
			keep := !strings.Contains(l, `"message":"request"`)
			for _, cl := range cells {
				keep = keep || strings.Contains(l, `"model":"`+cl.model+`"`)
			}
			if keep {
				mine = append(mine, l)
			}
		}
		return cmd.ProcessState.ExitCode(), "app's stderr:\n" + stderr.String() + "\ndetour's log (this app's requests):\n" + strings.Join(mine, "\n")
	}
	return wy
}

// startDetourIn runs detour (this test binary in its "serve" role) inside
// ns, and returns its transparent port once it is ready.
func startDetourIn(t *testing.T, ns, policyPath string, log io.Writer) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, self)
	cmd.Env = testsupport.ChildEnv(roleEnv+"=serve", policyEnv+"="+policyPath)
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if port, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- port
			}
		}
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
	select {
	case port := <-ready:
		return port
	case <-exited:
		t.Fatalf("detour exited before it was ready:\n%s", log)
	case <-time.After(30 * time.Second):
		t.Fatalf("detour was not ready within 30s:\n%s", log)
	}
	return ""
}

// redirectIn runs `detour redirect ARGS` inside ns.
func redirectIn(t *testing.T, ns string, args ...string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, self}, args...)...)
	cmd.Env = testsupport.ChildEnv(roleEnv + "=redirect")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("detour redirect %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
