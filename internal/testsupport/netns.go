//go:build linux

package testsupport

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// VethPair creates a network namespace joined to this one by a veth pair,
// for the root-only tests that stand for a pod (transparent mode, another
// pod on the node). The namespace is name-PID, the links prefix+"h"/"p"+PID,
// the addresses a per-process /30 in 198.octet.0.0/16 (198.18.0.0/15 is the
// range set aside for testing network devices), so that parallel test
// binaries, and the tests and benchmarks of one binary given different
// names, never meet. It returns this side's address and the namespace's
// name; both are removed when the test ends. It needs root and ip
// (iproute2).
func VethPair(tb testing.TB, name, prefix string, octet int) (hostIP, ns string) {
	tb.Helper()
	id := os.Getpid() % 16000
	ns = fmt.Sprintf("%s-%d", name, id)
	host, peer := fmt.Sprintf("%sh%d", prefix, id), fmt.Sprintf("%sp%d", prefix, id)
	a, b := 4*id/256, 4*id%256 // a < 250: the /30 stays inside 198.octet.0.0/16
	hostIP = fmt.Sprintf("198.%d.%d.%d", octet, a, b+1)
	peerIP := fmt.Sprintf("198.%d.%d.%d", octet, a, b+2)
	sh := func(args ...string) {
		tb.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			tb.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// A run that was killed leaves its namespace and link behind; a later
	// process with the same pid would trip over them.
	_ = exec.Command("ip", "netns", "del", ns).Run()
	_ = exec.Command("ip", "link", "del", host).Run()
	sh("netns", "add", ns)
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	sh("link", "add", host, "type", "veth", "peer", "name", peer)
	tb.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	sh("link", "set", peer, "netns", ns)
	sh("addr", "add", hostIP+"/30", "dev", host)
	sh("link", "set", host, "up")
	sh("netns", "exec", ns, "ip", "addr", "add", peerIP+"/30", "dev", peer)
	sh("netns", "exec", ns, "ip", "link", "set", peer, "up")
	sh("netns", "exec", ns, "ip", "link", "set", "lo", "up")
	return hostIP, ns
}

// NamespaceHosts gives the network namespace ns its own /etc/hosts, made of
// lines, for the programs run in it with `ip netns exec`: that command
// bind-mounts /etc/netns/NS/hosts over /etc/hosts in the mount namespace it
// makes, so a client there resolves a vendor's real host name to a test
// address by the system's own resolver, with no option of its own. The
// file is removed when the test ends.
func NamespaceHosts(tb testing.TB, ns string, lines ...string) {
	tb.Helper()
	dir := "/etc/netns/" + ns
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	data := strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(dir+"/hosts", []byte(data), 0o644); err != nil {
		tb.Fatal(err)
	}
}
