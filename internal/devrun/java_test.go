package devrun

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/javatest"
	"github.com/detour-proxy/detour/internal/mitm"
	"software.sslmate.com/src/go-pkcs12"
)

// requireTool returns the path of a tool the test needs. Without it the
// test skips on a developer's machine, and fails in CI (CI=true), whose
// .ci/run must install it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "true" {
			t.Skipf("%s is not installed", name)
		}
		t.Fatalf("%s is not installed; .ci/run must install it", name)
	}
	return path
}

func TestJavaToolOptions(t *testing.T) {
	t.Parallel()
	const props = "-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=5000 -Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=5000 " +
		"-Dhttp.nonProxyHosts=localhost|127.*|[::1]|169.254.* -Djavax.net.ssl.trustStore=/tmp/d/java-truststore.p12 -Djavax.net.ssl.trustStoreType=PKCS12"
	if got := javaToolOptions("", "127.0.0.1:5000", "/tmp/d/java-truststore.p12"); got != props {
		t.Errorf("no user value:\n got %s\nwant %s", got, props)
	}
	if got, want := javaToolOptions("-Xmx1g -Dfoo=bar", "127.0.0.1:5000", "/tmp/d/java-truststore.p12"), "-Xmx1g -Dfoo=bar "+props; got != want {
		t.Errorf("with the user's value (kept first, never dropped):\n got %s\nwant %s", got, want)
	}
	if got := javaToolOptions("", "127.0.0.1:5000", "/tmp/a dir/java-truststore.p12"); !strings.Contains(got, `"-Djavax.net.ssl.trustStore=/tmp/a dir/java-truststore.p12"`) {
		t.Errorf("a trust store path with a space is not quoted: %s", got)
	}
}

// The trust store detour writes is one Java's own keytool reads as PKCS12,
// with every certificate of the PEM bundle (the system roots) and detour's
// CA, with no password asked.
func TestJavaTrustStoreReadByKeytool(t *testing.T) {
	t.Parallel()
	keytool := requireTool(t, "keytool")
	ca, err := mitm.Generate()
	if err != nil {
		t.Fatal(err)
	}
	files, _, err := writeTrustFiles(t.TempDir(), ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := os.ReadFile(files.bundle)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(keytool, quickJVM("-J", "-list", "-keystore", files.java, "-storetype", "PKCS12")...)
	cmd.Env = append(os.Environ(), "JAVA_TOOL_OPTIONS=") // the machine's own options are not under test
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("keytool -list: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Your keystore contains (\d+) entr`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("keytool -list did not count the entries:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	if want := bytes.Count(bundle, []byte("BEGIN CERTIFICATE")); n != want || n < 2 {
		t.Errorf("keytool lists %d entries; want %d, one per certificate of the bundle (system roots and detour's CA)", n, want)
	}
	if !bytes.Contains(out, []byte("detour-ca, ")) || !bytes.Contains(out, []byte("trustedCertEntry")) {
		t.Errorf("keytool -list shows no trusted entry detour-ca:\n%s", out)
	}
}

// The proof with an unmodified Java 17 program: java.net.http.HttpClient,
// with no proxy or trust configured, calls https://api.openai.com under
// detour run; the JVM takes the proxy and the trust store from
// JAVA_TOOL_OPTIONS, the primary fails, the backup answers, and a property
// of the user's own JAVA_TOOL_OPTIONS is still set.
func TestJavaHttpClientFailsOverUnmodified(t *testing.T) {
	t.Parallel()
	javac := requireTool(t, "javac")
	java := requireTool(t, "java")
	// Compiled once per source and JDK, not once per run (javatest).
	classes, err := javatest.Compile(javac, filepath.Join("testdata", "java", "App.java"))
	if err != nil {
		t.Fatal(err)
	}

	policyPath, primary, backup := vendors(t, fakevendor.Fault{Kind: fakevendor.Status, Status: 503})
	jvm, jvmDone := javatest.RunOptions(classes)
	defer jvmDone() // once the JVM has exited: run returns after it
	res, stdout, stderr := run(t, Options{
		Command:    append(append([]string{java}, jvm...), "App"),
		PolicyPath: policyPath,
		Env:        baseEnv("JAVA_TOOL_OPTIONS=-Duser.prop=kept"),
	})
	t.Logf("detour run's stderr:\n%s", stderr.String())
	if res.ExitCode != 0 {
		t.Fatalf("java exited %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "status 200") || !strings.Contains(out, "Hello from backup.") {
		t.Errorf("the Java app got no answer from the backup:\n%s", out)
	}
	if !strings.Contains(out, "user.prop=kept") {
		t.Errorf("the user's JAVA_TOOL_OPTIONS was dropped:\n%s", out)
	}
	if primary.Calls() < 1 || backup.Calls() != 1 {
		t.Errorf("primary called %d times, backup %d; want the primary tried and the backup once", primary.Calls(), backup.Calls())
	}
	if s := res.Summary; s.FailedOver != 1 || s.WaysIn["HTTPS_PROXY"] != 1 {
		t.Errorf("summary = %+v; want one failover, through the proxy", s)
	}
	if len(res.Summary.Unseen) != 0 {
		t.Errorf("connections past detour reported for an app that went through it: %+v", res.Summary.Unseen)
	}
}

// quickJVM puts, before args, the options that make a short-lived JVM
// cheap (prefix "-J" passes them through javac or keytool): the first JIT
// tier only and one GC thread. A run of a few seconds spends most of its
// CPU compiling with the optimising tier and starting GC threads; what the
// program does is the same.
func quickJVM(prefix string, args ...string) []string {
	return append([]string{prefix + "-XX:TieredStopAtLevel=1", prefix + "-XX:+UseSerialGC"}, args...)
}

// Runs with one CA and the same system roots share one encoding of the
// Java trust store, and a new CA gets a store of its own: writeTrustFiles
// encodes a store only for a bundle it has not just encoded, and every
// store written holds its own bundle's CA.
func TestJavaTrustStoreEncodedOncePerBundle(t *testing.T) {
	// Not parallel: the memo is the process's, and the parallel tests' runs
	// would encode their own bundles between these calls.
	store := func(ca *mitm.CA) []byte {
		t.Helper()
		files, _, err := writeTrustFiles(t.TempDir(), ca, nil)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(files.java)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	holds := func(data []byte, ca *mitm.CA) bool {
		certs, err := pkcs12.DecodeTrustStore(data, "")
		if err != nil {
			t.Fatalf("decoding the store: %v", err)
		}
		return len(certs) > 0 && certs[len(certs)-1].Equal(ca.Cert)
	}
	ca1, err := mitm.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ca2, err := mitm.Generate()
	if err != nil {
		t.Fatal(err)
	}
	encodes := func() int {
		javaStoreMemo.Lock()
		defer javaStoreMemo.Unlock()
		return javaStoreMemo.encodes
	}
	before := encodes()
	first := store(ca1)
	again := store(ca1)
	if n := encodes() - before; n != 1 || !bytes.Equal(first, again) {
		t.Errorf("two runs with one CA: %d stores encoded, the same bytes: %v; want 1 and the same", n, bytes.Equal(first, again))
	}
	other := store(ca2)
	if n := encodes() - before; n != 2 || !holds(other, ca2) || holds(other, ca1) {
		t.Errorf("a new CA: %d stores encoded in all, the new store holds the new CA: %v; want 2, and the new CA's store", n, holds(other, ca2))
	}
	if back := store(ca1); !holds(back, ca1) || !bytes.Equal(back, first) {
		t.Error("back to the first CA: the store is not the first CA's")
	}
}
