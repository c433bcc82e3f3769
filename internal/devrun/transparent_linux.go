//go:build linux

package devrun

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/detour-proxy/detour/internal/redirect"
	"github.com/detour-proxy/detour/proxy"
)

// This file is `detour run --transparent` on Linux. CMD starts inside a
// fresh cgroup2 child, <cgroup2 mount>/detour-run-<detour's pid>-<n>, through
// clone3's CLONE_INTO_CGROUP (SysProcAttr.CgroupFD), so that its very first
// connection is already in it; a table "inet detour-run-<pid>-<n>" redirects
// the TCP connections of sockets created in that cgroup (and below it) to
// the transparent listener. detour itself is not in the cgroup, so its own
// upstream calls are never redirected; a uid exclusion would not do, as
// detour and CMD run as the same user.
//
// The table and the cgroup are removed when the run ends. A run that could
// not clean up (killed by SIGKILL, a power cut of the namespace) leaves a
// table and a cgroup named after a pid that is no longer alive: the next
// run removes those before it starts.

const (
	// cgroupRemoveTimeout bounds how long the end of a run waits for the
	// processes CMD left behind in its cgroup to die before removing it.
	cgroupRemoveTimeout = 5 * time.Second
	// cgroupPoll is the interval of that bounded wait: the kernel offers
	// a file-modified event on cgroup.events, but a wait this rare and
	// this short is not worth an inotify watch.
	cgroupPoll = 10 * time.Millisecond
	// extraNamespaceLevels is how many levels above the cgroup2 mount's
	// root the hierarchy may have when detour runs in a cgroup namespace
	// (a container), where the mount's root is not the hierarchy's and
	// the cgroup's real depth cannot be read: a rule is installed for each
	// candidate depth, and only the true one can match.
	extraNamespaceLevels = 16
	// initCgroupNS is the inode number of the initial cgroup namespace
	// (PROC_CGROUP_INIT_INO in the kernel's include/linux/proc_ns.h).
	initCgroupNS = 0xEFFFFFFB
)

// runCount numbers the transparent runs of this process.
var runCount atomic.Int64

// transparent is a running `detour run --transparent`.
type transparent struct {
	lns    []net.Listener
	table  string
	dir    string   // the cgroup's directory
	fd     *os.File // dir, open for CLONE_INTO_CGROUP
	ports  []uint16
	stderr io.Writer
	// installed is whether the table was written (and is to be removed).
	installed bool
}

// startTransparent prepares a transparent run when o asks for one (nil
// when not): the listeners, CMD's cgroup and the run's nftables table.
// mark is the policy's transparent.mark, excluded as `detour redirect
// install --exclude-mark` would.
func startTransparent(o TransparentOptions, mark uint32, stderr io.Writer) (_ *transparent, err error) {
	if !o.Enabled {
		return nil, nil
	}
	if !hasNetAdmin() {
		return nil, errors.New("detour run --transparent needs the CAP_NET_ADMIN capability, to program nftables and create a cgroup: " +
			"run it as root (sudo detour run --transparent -- CMD), or run `detour run -- CMD` without --transparent")
	}
	mount, root, err := cgroup2Mount()
	if err != nil {
		return nil, err
	}
	sweepStaleRuns(mount, stderr)

	// Numbered within the process, so that runs at once in one process
	// (tests) have tables and cgroups of their own too.
	tr := &transparent{stderr: stderr, ports: o.Ports, table: redirect.RunName(os.Getpid(), int(runCount.Add(1)))}
	if len(tr.ports) == 0 {
		tr.ports = redirect.DefaultPorts
	}
	defer func() {
		if err != nil {
			tr.stop()
		}
	}()
	// Both loopbacks on one port: the kernel redirects an IPv4 connection
	// to 127.0.0.1 and an IPv6 one to ::1.
	if tr.lns, err = proxy.ListenTransparent("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("detour run: listening on loopback: %w", err)
	}
	_, port, _ := net.SplitHostPort(tr.lns[0].Addr().String())
	toPort, _ := strconv.Atoi(port)

	dir := filepath.Join(mount, tr.table)
	err = os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrExist) {
		// A cgroup of an earlier detour with this pid (pids are reused)
		// that the sweep could not remove; removing it fails when it
		// still has processes, and then so does the run.
		_ = unix.Rmdir(dir)
		err = os.Mkdir(dir, 0o755)
	}
	if err != nil {
		return nil, fmt.Errorf("detour run --transparent: creating CMD's cgroup %s: %w (it needs write access to the cgroup2 file system: run as root)", dir, err)
	}
	tr.dir = dir
	if tr.fd, err = os.Open(dir); err != nil {
		return nil, fmt.Errorf("detour run --transparent: %w", err)
	}
	id, err := cgroupID(dir)
	if err != nil {
		return nil, fmt.Errorf("detour run --transparent: reading the id of cgroup %s: %w", dir, err)
	}
	var marks []uint32
	if mark != 0 {
		marks = []uint32{mark}
	}
	err = redirect.InstallCgroup(redirect.CgroupRules{
		Table: tr.table, CgroupID: id, CgroupPath: cgroupPath(root, tr.table), Levels: cgroupLevels(root, inInitialCgroupNS()),
		ToPort: uint16(toPort), Ports: tr.ports, ExcludeMarks: marks,
	})
	if err != nil {
		return nil, fmt.Errorf("detour run --transparent: %w", err)
	}
	tr.installed = true
	return tr, nil
}

// listeners are the transparent listeners, for proxy.Options.
func (tr *transparent) listeners() []net.Listener {
	if tr == nil {
		return nil
	}
	return tr.lns
}

// attach makes cmd start inside the run's cgroup, and says what is
// redirected.
func (tr *transparent) attach(cmd *exec.Cmd) {
	if tr == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(tr.fd.Fd())
	ports := make([]string, len(tr.ports))
	for i, p := range tr.ports {
		ports[i] = strconv.Itoa(int(p))
	}
	noun := "port"
	if len(ports) > 1 {
		noun = "ports"
	}
	fmt.Fprintf(tr.stderr, "detour run: transparent %s: the command's TCP connections to %s %s are redirected to it (cgroup %s, nftables table inet %s)\n",
		tr.lns[0].Addr(), noun, strings.Join(ports, ","), tr.dir, tr.table)
}

// stop removes the table, ends what CMD left running in its cgroup, and
// removes the cgroup. It is safe on a half-started run.
func (tr *transparent) stop() {
	if tr == nil {
		return
	}
	if tr.installed {
		if err := redirect.RemoveTable(tr.table); err != nil {
			fmt.Fprintf(tr.stderr, "detour run: warning: %v (the next `detour run --transparent` removes it)\n", err)
		}
	}
	if tr.dir != "" {
		tr.removeCgroup()
	}
	if tr.fd != nil {
		tr.fd.Close()
	}
	for _, ln := range tr.lns {
		ln.Close()
	}
}

// removeCgroup kills the processes CMD left in its cgroup and removes it.
// They are killed rather than left behind: detour has stopped, so their
// LLM calls could no longer be answered, and outside the run's cgroup
// nothing would redirect them any more.
func (tr *transparent) removeCgroup() {
	if n := len(cgroupProcs(tr.dir)); n > 0 {
		fmt.Fprintf(tr.stderr, "detour run: killing %d process(es) the command left running in its cgroup\n", n)
	}
	deadline := time.Now().Add(cgroupRemoveTimeout)
	for {
		killCgroup(tr.dir)
		err := unix.Rmdir(tr.dir)
		if err == nil {
			return
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			fmt.Fprintf(tr.stderr, "detour run: warning: cannot remove cgroup %s: %v (the next `detour run --transparent` removes it)\n", tr.dir, err)
			return
		}
		time.Sleep(cgroupPoll)
	}
}

// killCgroup sends SIGKILL to every process in the cgroup dir: through
// cgroup.kill (Linux 5.14), else one by one.
func killCgroup(dir string) {
	if os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for _, pid := range cgroupProcs(dir) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}

// cgroupProcs lists the processes in the cgroup dir.
func cgroupProcs(dir string) []int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sweepStaleRuns removes the tables and cgroups of earlier runs whose
// detour is no longer alive: a table or cgroup is named after its
// detour's pid, and a pid that signal 0 cannot reach (ESRCH) is dead. A
// cgroup that still has processes (CMD outlived its detour) is left alone;
// its table is removed all the same, since the listener it redirected to
// is gone and CMD's connections would be refused.
func sweepStaleRuns(mount string, stderr io.Writer) {
	tables, _ := redirect.ListRunTables() // nftables unusable: InstallCgroup will say why
	for _, t := range tables {
		if t.PID <= 0 || alive(t.PID) {
			continue
		}
		if err := redirect.RemoveTable(t.Name); err == nil {
			fmt.Fprintf(stderr, "detour run: removed table inet %s, left by a run whose detour (pid %d) died\n", t.Name, t.PID)
		}
	}
	entries, _ := os.ReadDir(mount)
	for _, e := range entries {
		pid, ok := redirect.ParseRunName(e.Name())
		if !ok || !e.IsDir() || alive(pid) {
			continue
		}
		dir := filepath.Join(mount, e.Name())
		switch err := unix.Rmdir(dir); {
		case err == nil:
			fmt.Fprintf(stderr, "detour run: removed cgroup %s, left by a run whose detour (pid %d) died\n", dir, pid)
		case errors.Is(err, unix.EBUSY):
			fmt.Fprintf(stderr, "detour run: warning: cgroup %s, left by a run whose detour (pid %d) died, still has processes: left alone\n", dir, pid)
		}
	}
}

// alive reports whether process pid exists (EPERM: it does, as another
// user's).
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// hasNetAdmin reports whether the process has CAP_NET_ADMIN in effect.
func hasNetAdmin() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_NET_ADMIN/32].Effective&(1<<(unix.CAP_NET_ADMIN%32)) != 0
}

// cgroup2Mount finds the cgroup2 file system in /proc/self/mountinfo:
// /sys/fs/cgroup on a unified system, /sys/fs/cgroup/unified on a hybrid
// one, or wherever else it is mounted. root is the mount's root within the
// hierarchy ("/" unless a subtree is bind-mounted).
func cgroup2Mount() (mount, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", fmt.Errorf("detour run --transparent: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPEROPTIONS
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		m, r := unescapeMountinfo(fields[4]), unescapeMountinfo(fields[3])
		if mount == "" || m == "/sys/fs/cgroup" {
			mount, root = m, r
		}
	}
	if mount == "" {
		return "", "", errors.New("detour run --transparent: no cgroup2 file system is mounted (it puts the command in a cgroup of its own): " +
			"mount one (mount -t cgroup2 none /sys/fs/cgroup), or boot with systemd.unified_cgroup_hierarchy=1")
	}
	return mount, root, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupPath is the path of the run's cgroup name in the hierarchy, given
// the mount's root.
func cgroupPath(root, name string) string {
	return strings.TrimPrefix(filepath.Join(root, name), "/")
}

// cgroupLevels are the candidate depths of a cgroup created directly below
// the mount whose root is root: exactly one in the initial cgroup
// namespace, where root is the path from the hierarchy's root. In another
// namespace (a container), that path starts at the namespace's root, and
// kernels disagree on what a level counts from: since Linux 6.11 (commit
// "nft_socket: make cgroupsv2 matching work with namespaces") from the root
// of the rule writer's namespace, which is the depth below the mount;
// before, from the hierarchy's root, whose distance to the namespace's root
// cannot be read from inside. So a range, starting at the former.
func cgroupLevels(root string, initialNS bool) []uint32 {
	depth := uint32(len(strings.Split(cgroupPath(root, "x"), "/")))
	if initialNS {
		return []uint32{depth}
	}
	levels := make([]uint32, 0, extraNamespaceLevels+1)
	for l := depth; l <= depth+extraNamespaceLevels; l++ {
		levels = append(levels, l)
	}
	return levels
}

// inInitialCgroupNS reports whether detour runs in the initial cgroup
// namespace, the host's.
func inInitialCgroupNS() bool {
	var st unix.Stat_t
	return unix.Stat("/proc/self/ns/cgroup", &st) == nil && st.Ino == initCgroupNS
}

// cgroupID is the id of the cgroup at dir, as the kernel's socket matching
// compares it: the 64-bit id in the directory's file handle (what `nft`
// and systemd read), else its inode number, which is the same on 64-bit
// kernels.
func cgroupID(dir string) (uint64, error) {
	if h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, dir, 0); err == nil && len(h.Bytes()) == 8 {
		return binary.NativeEndian.Uint64(h.Bytes()), nil
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
