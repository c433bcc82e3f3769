//go:build linux

package devrun

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// maxWatched bounds the processes of CMD's tree one scan looks at, and so a
// scan's cost, whatever CMD forks.
const maxWatched = 1024

// watchBypasses watches the process tree rooted at pid for TCP connections
// to targets until stop is called, calling report (from the watcher's own
// goroutine) on the first sighting of each (process, address). stop returns
// every sighting, in order. The second result is why nothing is watched;
// "" on Linux.
//
// It reads /proc: the tree from each task's children file (each
// /proc/<pid>/stat's parent when the kernel has no children files), and
// each process's sockets from /proc/<pid>/fd. Their state and peer come
// from the kernel's socket table of CMD's network namespace: by sock_diag
// netlink when CMD shares detour's namespace, else from /proc/<pid>/net/tcp
// and tcp6. Only connections being opened (SYN_SENT) or open (ESTABLISHED)
// count; the sockets of detour itself are not CMD's (detour is not in CMD's
// tree), and a connection of CMD's whose other end detour's process
// accepted (one the kernel redirected to detour's transparent listener,
// whose peer is still the vendor's address) was seen by detour.
func watchBypasses(pid int, t bypassTargets, report func(Bypass)) (stop func() []Bypass, unchecked string) {
	same := sameNetns(pid)
	w := &procWatcher{root: pid, targets: t, report: report, proc: "/proc", diag: same}
	if same {
		w.self = os.Getpid()
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(bypassInterval)
		defer tick.Stop()
		for {
			w.scan()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	stopped := false
	return func() []Bypass {
		if !stopped {
			stopped = true
			close(done)
			<-finished
		}
		return w.log.all()
	}, ""
}

// sameNetns reports whether pid is in detour's own network namespace.
func sameNetns(pid int) bool {
	ours, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return false
	}
	theirs, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "ns", "net"))
	return err == nil && ours == theirs
}

// fullEvery is how many scans may skip reading the socket table when CMD's
// tree holds no socket it did not hold at the last read: a socket connected
// after the scan that first saw it (socket() and connect() are two calls)
// is still found within a second.
const fullEvery = 10

// procWatcher is one watch's state.
type procWatcher struct {
	root    int
	targets bypassTargets
	report  func(Bypass)
	proc    string // "/proc"; a variable for tests
	diag    bool   // read the socket table by sock_diag, not /proc/<pid>/net
	// self is detour's own process when it shares CMD's namespace (0
	// otherwise): a connection it accepted was seen by detour, wherever the
	// app meant it to go (transparent mode: the kernel redirected it).
	self int
	log  bypassLog
	// known are the socket inodes of the tree at the last table read, and
	// skipped the scans since that read.
	known   map[string]bool
	skipped int
}

// TCP states as /proc/net/tcp prints them (include/net/tcp_states.h).
const (
	tcpEstablished = "01"
	tcpSynSent     = "02"
	tcpListen      = "0A"
)

// sockets adds the socket inodes pid holds to owner (inode → pid), keeping
// the first holder of a socket shared across a fork.
func (w *procWatcher) sockets(pid int, owner map[string]int) {
	dir := filepath.Join(w.proc, strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			inode = strings.TrimSuffix(inode, "]")
			if _, dup := owner[inode]; !dup {
				owner[inode] = pid
			}
		}
	}
}

// accepted returns the app ends of the connections detour's own process
// accepted on one of its listening sockets.
func (w *procWatcher) accepted(table map[string]tcpConn) map[netip.AddrPort]bool {
	if w.self == 0 {
		return nil
	}
	mine := map[string]int{}
	w.sockets(w.self, mine)
	listening := map[netip.AddrPort]bool{}
	for inode := range mine {
		if c, ok := table[inode]; ok && c.state == tcpListen {
			listening[c.local] = true
		}
	}
	peers := map[netip.AddrPort]bool{}
	for inode := range mine {
		c, ok := table[inode]
		if !ok || c.state != tcpEstablished {
			continue
		}
		any4 := netip.AddrPortFrom(netip.IPv4Unspecified(), c.local.Port())
		any6 := netip.AddrPortFrom(netip.IPv6Unspecified(), c.local.Port())
		if listening[c.local] || listening[any4] || listening[any6] {
			peers[c.remote] = true
		}
	}
	return peers
}

// scan looks once at every socket of CMD's tree.
func (w *procWatcher) scan() {
	pids := w.tree()
	owner := map[string]int{} // socket inode → a process holding it
	for _, pid := range pids {
		w.sockets(pid, owner)
	}
	if len(owner) == 0 {
		return
	}
	// Reading the socket table is most of a scan's cost (the kernel walks
	// every socket of the namespace): skip it while the tree holds only
	// sockets already looked at, up to fullEvery scans.
	fresh := w.known == nil || w.skipped >= fullEvery
	for inode := range owner {
		if !w.known[inode] {
			fresh = true
			break
		}
	}
	if !fresh {
		w.skipped++
		return
	}
	w.skipped = 0
	w.known = make(map[string]bool, len(owner))
	for inode := range owner {
		w.known[inode] = true
	}
	table := w.table(pids[0])
	var seen map[netip.AddrPort]bool // computed once, when needed
	for inode, c := range table {
		pid, ok := owner[inode]
		if !ok || c.state == tcpListen || !w.targets.matches(c.remote) {
			continue
		}
		if seen == nil {
			seen = w.accepted(table)
		}
		if seen[c.local] {
			continue
		}
		b := Bypass{Runtime: w.runtime(pid), PID: pid, Remote: c.remote.String()}
		if w.log.first(b, c.remote) {
			w.report(b)
		}
	}
}

// table returns the opening, open and listening TCP sockets of pid's
// network namespace by inode.
func (w *procWatcher) table(pid int) map[string]tcpConn {
	if w.diag {
		conns, err := diagTCP()
		if err == nil {
			return conns
		}
		// No sock_diag (a kernel without inet_diag): /proc serves.
		w.diag = false
	}
	conns := map[string]tcpConn{}
	// The tables of CMD's own network namespace: /proc/<pid>/net is the
	// namespace of that process, which need not be detour's.
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(filepath.Join(w.proc, strconv.Itoa(pid), "net", table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Scan() // the header line
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 10 || (f[3] != tcpEstablished && f[3] != tcpSynSent && f[3] != tcpListen) {
				continue
			}
			local, okL := parseProcAddr(f[1])
			remote, okR := parseProcAddr(f[2])
			if okL && okR {
				conns[f[9]] = tcpConn{state: f[3], local: local, remote: remote}
			}
		}
	}
	return conns
}

// tree returns the root and its descendants, root first, at most
// maxWatched of them.
func (w *procWatcher) tree() []int {
	pids := []int{w.root}
	if _, err := os.Stat(filepath.Join(w.proc, strconv.Itoa(w.root), "task", strconv.Itoa(w.root), "children")); err != nil {
		return w.treeByParent()
	}
	seen := map[int]bool{w.root: true}
	for i := 0; i < len(pids) && len(pids) < maxWatched; i++ {
		tasks, _ := os.ReadDir(filepath.Join(w.proc, strconv.Itoa(pids[i]), "task"))
		for _, task := range tasks {
			data, _ := os.ReadFile(filepath.Join(w.proc, strconv.Itoa(pids[i]), "task", task.Name(), "children"))
			for _, s := range strings.Fields(string(data)) {
				if c, err := strconv.Atoi(s); err == nil && !seen[c] && len(pids) < maxWatched {
					seen[c] = true
					pids = append(pids, c)
				}
			}
		}
	}
	return pids
}

// treeByParent is tree for kernels without children files: every process's
// parent from its stat line.
func (w *procWatcher) treeByParent() []int {
	entries, _ := os.ReadDir(w.proc)
	kids := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(w.proc, e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			kids[ppid] = append(kids[ppid], pid)
		}
	}
	pids := []int{w.root}
	for i := 0; i < len(pids) && len(pids) < maxWatched; i++ {
		pids = append(pids, kids[pids[i]]...)
	}
	if len(pids) > maxWatched {
		pids = pids[:maxWatched]
	}
	return pids
}

// runtime names a process by its executable's file name (the comm field
// when the executable cannot be read), as a user would recognise it.
func (w *procWatcher) runtime(pid int) string {
	if exe, err := os.Readlink(filepath.Join(w.proc, strconv.Itoa(pid), "exe")); err == nil {
		return filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	}
	if comm, err := os.ReadFile(filepath.Join(w.proc, strconv.Itoa(pid), "comm")); err == nil {
		return strings.TrimSpace(string(comm))
	}
	return "pid " + strconv.Itoa(pid)
}

// parseProcAddr parses an address of /proc/net/tcp or tcp6: the IP as the
// kernel's 32-bit words printed in the machine's byte order, a colon, the
// port in hex.
func parseProcAddr(s string) (netip.AddrPort, bool) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	ip := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
}
