//go:build linux

package devrun

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/detourtest"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
)

// littleEndian reports whether the machine stores words low byte first, as
// the literal addresses below are written for.
func littleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

func TestParseProcAddr(t *testing.T) {
	t.Parallel()
	if littleEndian() {
		// As a little-endian kernel prints them in /proc/net/tcp and tcp6.
		for s, want := range map[string]string{
			"0100007F:1F90":                         "127.0.0.1:8080",
			"22D8B85D:01BB":                         "93.184.216.34:443",
			"00000000000000000000000001000000:0050": "[::1]:80",
			"0000000000000000FFFF00000100007F:01BB": "127.0.0.1:443", // IPv4-mapped
		} {
			got, ok := parseProcAddr(s)
			if !ok || got.String() != want {
				t.Errorf("parseProcAddr(%s) = %v, %v; want %s", s, got, ok, want)
			}
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007F:XYZ", "01007F:0050", "0100007F:10000"} {
		if _, ok := parseProcAddr(bad); ok {
			t.Errorf("parseProcAddr(%q) succeeded", bad)
		}
	}
}

// procAddr writes an address as the kernel does in /proc/net/tcp: each
// 32-bit word of the IP as the machine holds it, in hex.
func procAddr(ap netip.AddrPort) string {
	var ip []byte
	if ap.Addr().Is4() {
		a := ap.Addr().As4()
		ip = a[:]
	} else {
		a := ap.Addr().As16()
		ip = a[:]
	}
	var b strings.Builder
	for i := 0; i < len(ip); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[i:]))
	}
	fmt.Fprintf(&b, ":%04X", ap.Port())
	return b.String()
}

// fakeProc builds a /proc with: sh (pid 100) → node (101), an unrelated
// curl (200), and detour (300). node holds a connection to a vendor, one to
// detour's listener, a listening socket, a file, and a connection to a
// vendor's address that detour accepted (redirected by the kernel); sh, a
// java binary exec'd under its old name, a connection over IPv6 that is
// still opening; curl, a vendor connection of its own.
func fakeProc(t *testing.T, childrenFiles bool) string {
	t.Helper()
	dir := t.TempDir()
	write := func(path, data string) {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(path, target string) {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	for pid, ppid := range map[int]int{100: 1, 101: 100, 200: 1} {
		write(fmt.Sprintf("%d/stat", pid), fmt.Sprintf("%d (a (odd) name) S %d 1 1 0 -1\n", pid, ppid))
		if childrenFiles {
			kids := map[int]string{100: "101 "}[pid]
			write(fmt.Sprintf("%d/task/%d/children", pid, pid), kids)
		} else {
			if err := os.MkdirAll(filepath.Join(dir, strconv.Itoa(pid), "task", strconv.Itoa(pid)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	link("100/exe", "/usr/lib/jvm/java-17/bin/java (deleted)")
	link("101/exe", "/usr/bin/node")
	link("200/exe", "/usr/bin/curl")
	link("100/fd/7", "socket:[558]")
	link("101/fd/0", "/dev/null")
	link("101/fd/3", "socket:[555]")
	link("101/fd/4", "socket:[556]")
	link("101/fd/5", "socket:[557]")
	link("200/fd/3", "socket:[559]")
	// detour itself (pid 300, not in the tree): its transparent listener,
	// and a connection of node's (socket 560, to a vendor's address) that
	// the kernel redirected to it.
	write("300/stat", "300 (detour) S 1 1 1 0 -1\n")
	link("300/fd/3", "socket:[600]")
	link("300/fd/4", "socket:[601]")
	link("101/fd/6", "socket:[560]")
	line := func(sl int, local, remote, state, inode string) string {
		return fmt.Sprintf("%4d: %s %s %s 00000000:00000000 00:00000000 00000000  1000        0 %s 1 0000000000000000 20 4 30 10 -1\n",
			sl, procAddr(netip.MustParseAddrPort(local)), procAddr(netip.MustParseAddrPort(remote)), state, inode)
	}
	header := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	write("100/net/tcp", header+
		line(0, "10.0.0.2:40000", "93.184.216.34:443", tcpEstablished, "555")+
		line(1, "127.0.0.1:40001", "127.0.0.1:5000", tcpEstablished, "556")+
		line(2, "0.0.0.0:8080", "0.0.0.0:0", "0A", "557")+
		line(3, "10.0.0.2:40002", "1.2.3.4:443", tcpEstablished, "559")+
		line(4, "10.0.0.2:40003", "93.184.216.34:443", "06", "555")+ // TIME_WAIT: a socket gone
		line(5, "127.0.0.1:15001", "0.0.0.0:0", tcpListen, "600")+
		line(6, "127.0.0.1:15001", "10.0.0.2:40004", tcpEstablished, "601")+
		line(7, "10.0.0.2:40004", "93.184.216.35:443", tcpEstablished, "560"))
	write("100/net/tcp6", header+
		line(0, "[2001:db8::2]:40000", "[2001:db8::1]:443", tcpSynSent, "558"))
	return dir
}

// One scan of a fake /proc finds exactly the connections of CMD's tree to
// a vendor's port, named by runtime, each once however many scans see it;
// with or without the kernel's children files.
func TestProcWatcherFindsConnectionsOfTheTree(t *testing.T) {
	t.Parallel()
	want := []Bypass{
		{Runtime: "node", PID: 101, Remote: "93.184.216.34:443"},
		{Runtime: "java", PID: 100, Remote: "[2001:db8::1]:443"},
	}
	for _, children := range []bool{true, false} {
		t.Run(fmt.Sprintf("children files %v", children), func(t *testing.T) {
			own := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
			var reported []Bypass
			w := &procWatcher{root: 100, self: 300, proc: fakeProc(t, children), targets: newBypassTargets(compileRoutes(t, "api.openai.com"), own), report: func(b Bypass) { reported = append(reported, b) }}
			w.scan()
			w.scan()
			sortBypasses(reported)
			if !slices.Equal(reported, want) {
				t.Errorf("reported %+v; want %+v", reported, want)
			}
			found := w.log.all()
			sortBypasses(found)
			if !slices.Equal(found, want) {
				t.Errorf("kept %+v; want %+v", found, want)
			}
		})
	}
}

func sortBypasses(bs []Bypass) {
	slices.SortFunc(bs, func(a, b Bypass) int { return b.PID - a.PID })
}

// vendorProcess starts this test binary as a server in a process of its
// own (serverEnv), and returns its address, its output (a line "accepted"
// once a connection came in) and a function that makes it close that
// connection and exit.
func vendorProcess(t *testing.T) (string, *detourtest.SyncBuffer, func()) {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := &detourtest.SyncBuffer{}
	cmd := exec.Command(bin)
	cmd.Env = testsupport.ChildEnv(serverEnv + "=1")
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() { stdin.Close() }
	t.Cleanup(func() {
		stop()
		_ = cmd.Wait()
	})
	if !out.Wait(30*time.Second, func(s string) bool { return strings.Contains(s, "\n") }) {
		t.Fatalf("the vendor process did not say its address: %q", out.String())
	}
	addr, _, _ := strings.Cut(out.String(), "\n")
	addr = strings.TrimPrefix(addr, "listening ")
	return addr, out, stop
}

// The end-to-end proof: an app that connects to one of the policy's
// upstreams directly, past detour, is warned about while it runs, named by
// its executable, and the summary repeats it.
func TestConnectionPastDetourIsWarnedAbout(t *testing.T) {
	t.Parallel()
	// The vendor the app reaches directly is a process of its own: a
	// connection detour's process accepted counts as seen by detour.
	addr, accepted, closeVendor := vendorProcess(t)
	policyPath, _, _ := vendors(t, fakevendor.Fault{})
	withUpstreamAt(t, policyPath, addr)
	bin, _ := selfCommand(t)
	stderr := &detourtest.SyncBuffer{}
	done := runAsync(t, Options{
		Command:    []string{bin},
		PolicyPath: policyPath,
		Stderr:     stderr,
		Env:        baseEnv(dialerEnv+"="+addr, testsupport.ChildGORACE()),
	})
	if !accepted.Wait(30*time.Second, func(s string) bool { return strings.Contains(s, "accepted\n") }) {
		t.Fatalf("the app never connected\n%s", stderr.String())
	}
	runtime := filepath.Base(bin)
	live := fmt.Sprintf("detour run: warning: %s (pid ", runtime)
	if !stderr.Wait(30*time.Second, func(s string) bool {
		return strings.Contains(s, live) && strings.Contains(s, "connected to "+addr+" directly, so detour never saw that call")
	}) {
		t.Fatalf("no live warning while the app held its connection:\n%s", stderr.String())
	}
	closeVendor() // the app reads EOF and exits
	var res Result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end after the connection closed")
	}
	if res.ExitCode != 0 {
		t.Fatalf("app exited %d\n%s", res.ExitCode, stderr.String())
	}
	u := res.Summary.Unseen
	if len(u) != 1 || u[0].Runtime != runtime || u[0].Remote != addr || u[0].PID <= 0 {
		t.Fatalf("summary's connections past detour = %+v; want one, %s to %s", u, runtime, addr)
	}
	if want := fmt.Sprintf("warning: 1 connection detour never saw: %s (pid %d) → %s", runtime, u[0].PID, addr); !strings.Contains(stderr.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, stderr.String())
	}
	if n := strings.Count(stderr.String(), live); n != 1 {
		t.Errorf("live warning printed %d times; want once per process and address:\n%s", n, stderr.String())
	}
}

// BenchmarkProcWatcherScan measures one scan (what the watcher costs every
// bypassInterval) of a small real tree: this process, holding a few
// sockets, and a child shell. "full" reads the socket table each time (by
// sock_diag, or /proc/<pid>/net/tcp and tcp6), "steady" is the watcher as
// it runs, reading it only when the tree has a new socket or every
// fullEvery scans.
func BenchmarkProcWatcherScan(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	for range 4 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
	}
	child := exec.Command("sh", "-c", "read x")
	stdin, _ := child.StdinPipe()
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); _ = child.Wait() }()
	targets := newBypassTargets(compileRoutes(b, "api.openai.com"))
	for _, bc := range []struct {
		name       string
		diag, full bool
	}{{"full sock_diag", true, true}, {"full proc", false, true}, {"steady", true, false}} {
		b.Run(bc.name, func(b *testing.B) {
			w := &procWatcher{root: os.Getpid(), proc: "/proc", diag: bc.diag, targets: targets, report: func(Bypass) {}}
			b.ReportAllocs()
			for b.Loop() {
				if bc.full {
					w.known = nil
				}
				w.scan()
			}
		})
	}
}

// The sock_diag reader finds a connection of this process by its inode,
// with its ends, as /proc/net/tcp shows it.
func TestDiagTCPFindsAConnection(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var link string
	if err := raw.Control(func(fd uintptr) { link, err = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)) }); err != nil || link == "" {
		t.Fatalf("the connection's inode: %q, %v", link, err)
	}
	inode := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
	conns, err := diagTCP()
	if err != nil {
		t.Skipf("no sock_diag here: %v", err)
	}
	want := tcpConn{state: tcpEstablished, local: netip.MustParseAddrPort(c.LocalAddr().String()), remote: netip.MustParseAddrPort(ln.Addr().String())}
	if got := conns[inode]; got != want {
		t.Errorf("sock_diag has inode %s as %+v; want %+v", inode, got, want)
	}
	w := &procWatcher{proc: "/proc"}
	if got := w.table(os.Getpid())[inode]; got != want {
		t.Errorf("/proc/<pid>/net/tcp has inode %s as %+v; want %+v", inode, got, want)
	}
}
