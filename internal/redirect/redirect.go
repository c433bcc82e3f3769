// Package redirect programs the kernel to send an app's outbound TCP
// connections to detour's transparent listener: nftables rules in a table
// of detour's own, written over netlink (github.com/google/nftables), so
// that the distroless image needs no iptables or nft binary. It is what
// `detour redirect install | remove | show` runs, and what a Kubernetes
// init container runs before the app starts.
//
// One table, "inet detour", holds one chain hooked on nat output: locally
// generated connections, IPv4 and IPv6 alike. Its rules, in order: let
// detour's own connections pass (by uid, by socket mark), let loopback,
// link-local and the excluded ranges pass, then redirect each listed TCP
// destination port to the listener's port on loopback. Installing replaces
// the whole table in one netlink transaction, so installing twice leaves
// one set of rules, and an app never sees half a table.
//
// redirect imports nothing of detour's: it knows ports, uids, marks and
// address ranges, not policies.
package redirect

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Names of detour's nftables objects. `nft list table inet detour` shows them.
const (
	TableName = "detour"
	ChainName = "output"
)

// DefaultPorts are the destination ports redirected when Rules.Ports is
// empty: HTTPS and plain HTTP.
var DefaultPorts = []uint16{443, 80}

// AlwaysExcluded are the destinations never redirected: loopback (the app's
// own local services, and detour itself), and link-local, where the cloud
// metadata service answers the app's own cloud SDK — detour would refuse
// to connect there for an app, so redirecting it would break the SDK.
var AlwaysExcluded = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
}

// Rules is what `detour redirect install` installs.
type Rules struct {
	// ToPort is the transparent listener's port (transparent.listen).
	// Required.
	ToPort uint16
	// Ports are the TCP destination ports redirected. Empty: DefaultPorts.
	Ports []uint16
	// ExcludeUIDs are uids whose connections are never redirected: detour's
	// own, so that its upstream calls are not sent back to it.
	ExcludeUIDs []uint32
	// ExcludeMarks are socket marks whose connections are never redirected
	// (detour sets transparent.mark on its own).
	ExcludeMarks []uint32
	// ExcludeCIDRs are destinations never redirected, beside AlwaysExcluded.
	ExcludeCIDRs []netip.Prefix
	// NetNS, when not 0, is an open file descriptor of the network
	// namespace to program instead of the calling process's own.
	NetNS int
}

// Rule is one installed rule as read back from the kernel.
type Rule struct {
	// Handle is the kernel's handle of the rule.
	Handle uint64
	// Text says what the rule does, in nft's own syntax; it is kept in the
	// rule's comment, so it is what the kernel holds, not what was asked.
	Text string
}

// ParsePorts parses a comma-separated port list such as "443,80".
func ParsePorts(s string) ([]uint16, error) {
	var out []uint16
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var p uint16
		if _, err := fmt.Sscanf(f, "%d", &p); err != nil || p == 0 || fmt.Sprint(p) != f {
			return nil, fmt.Errorf("%q is not a TCP port (1-65535)", f)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("no port given")
	}
	return out, nil
}

// RunTablePrefix starts the name of every table `detour run --transparent`
// writes (RunName); the rest of the name holds the pid of the detour that
// wrote it, which is how a table left by a run that died is recognised.
const RunTablePrefix = "detour-run-"

// RunName is the name of the table, and of the cgroup, of run n (counted
// from 1 within the process) of the detour with pid pid.
func RunName(pid, n int) string { return fmt.Sprintf("%s%d-%d", RunTablePrefix, pid, n) }

// ParseRunName returns the pid in a name RunName made; ok is false for any
// other name.
func ParseRunName(name string) (pid int, ok bool) {
	rest, ok := strings.CutPrefix(name, RunTablePrefix)
	if !ok {
		return 0, false
	}
	p, n, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return 0, false
	}
	if _, err := strconv.Atoi(n); n != "" && err != nil {
		return 0, false
	}
	return pid, true
}

// CgroupChainName is the chain, beside ChainName, that a socket of the
// cgroup jumps to.
const CgroupChainName = "cmd"

// CgroupRules is what InstallCgroup installs.
type CgroupRules struct {
	// Table is the table's name (family inet); required, and it must start
	// with RunTablePrefix so that ListRunTables finds it.
	Table string
	// CgroupID is the cgroup's id (the inode number of its directory in the
	// cgroup2 file system); required.
	CgroupID uint64
	// CgroupPath is the cgroup's path below the cgroup2 mount, for the
	// rules' comments only.
	CgroupPath string
	// Levels are the cgroup's candidate depths in the cgroup hierarchy (the
	// root is level 0). The kernel compares the id of the socket's
	// cgroup's ancestor at that level, so a level that is not the cgroup's
	// own never matches (ids are unique): trying several is safe, and is
	// what a caller does when it cannot know the depth (inside a cgroup
	// namespace). Required.
	Levels []uint32
	// ToPort is the transparent listener's port; required.
	ToPort uint16
	// Ports are the TCP destination ports redirected. Empty: DefaultPorts.
	Ports []uint16
	// ExcludeMarks are socket marks never redirected.
	ExcludeMarks []uint32
}

// RunTable is a table a `detour run --transparent` wrote.
type RunTable struct {
	// Name is the table's name.
	Name string
	// PID is the pid of the detour that wrote it (0 when the name is not
	// one RunName makes).
	PID int
}
