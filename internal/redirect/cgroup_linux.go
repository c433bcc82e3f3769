//go:build linux

package redirect

// This file is the redirect of `detour run --transparent -- CMD`: unlike
// Install's, which takes every connection of a network namespace (a pod's),
// it takes only the connections of the processes in one cgroup (CMD's), so
// that a developer's other programs on the same machine are left alone.
//
// Each run has a table of its own, "inet detour-run-<pid>-<n>" (RunName),
// so that two runs at once, and `detour redirect install` beside them, never
// touch each other's rules. Its "output" chain (nat output) holds one rule per cgroup
// level to try: a socket created in the cgroup (or below it) jumps to the
// "cmd" chain, where detour's own mark, loopback, link-local and the
// excluded ranges return, and each listed port is redirected.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
)

// InstallCgroup replaces the table r.Table with one that redirects the TCP
// connections of sockets created in the cgroup r.CgroupID, IPv4 and IPv6,
// in the calling process's network namespace.
func InstallCgroup(r CgroupRules) error {
	switch {
	case !strings.HasPrefix(r.Table, RunTablePrefix):
		return fmt.Errorf("table %q: a run's table name starts with %q", r.Table, RunTablePrefix)
	case r.CgroupID == 0:
		return errors.New("the cgroup's id is required")
	case len(r.Levels) == 0:
		return errors.New("at least one cgroup level is required")
	case r.ToPort == 0:
		return errors.New("the port to redirect to is required")
	}
	ports := r.Ports
	if len(ports) == 0 {
		ports = DefaultPorts
	}
	for _, p := range ports {
		if p == 0 || p == r.ToPort {
			return fmt.Errorf("port %d cannot be redirected to port %d", p, r.ToPort)
		}
	}
	c, err := conn(0)
	if err != nil {
		return err
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: r.Table}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	accept := nftables.ChainPolicyAccept
	out := c.AddChain(&nftables.Chain{
		Name: ChainName, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &accept,
	})
	cmd := c.AddChain(&nftables.Chain{Name: CgroupChainName, Table: t})
	add := func(ch *nftables.Chain, text string, exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs,
			UserData: userdata.AppendString(nil, userdata.TypeComment, text)})
	}
	for _, level := range r.Levels {
		add(out, fmt.Sprintf("socket cgroupv2 level %d %q (id %d) jump %s", level, r.CgroupPath, r.CgroupID, CgroupChainName),
			&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: level, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: native64(r.CgroupID)},
			&expr.Verdict{Kind: expr.VerdictJump, Chain: CgroupChainName})
	}
	ret := &expr.Verdict{Kind: expr.VerdictReturn}
	for _, m := range r.ExcludeMarks {
		add(cmd, fmt.Sprintf("meta mark 0x%08x return", m),
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: native32(m)}, ret)
	}
	for _, p := range AlwaysExcluded {
		add(cmd, daddrText(p)+" return", append(daddrMatch(p), ret)...)
	}
	for _, p := range ports {
		add(cmd, fmt.Sprintf("tcp dport %d redirect to :%d", p, r.ToPort), redirectPort(p, r.ToPort)...)
	}
	return explainCgroup(explain("install the run's redirect rules", c.Flush()))
}

// explainCgroup adds what a kernel that rejects the socket expression lacks.
func explainCgroup(err error) error {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EOPNOTSUPP) {
		return fmt.Errorf("%w (matching a cgroup needs nft_socket with cgroup v2 support: `modprobe nft_socket`, kernel 5.13 or later)", err)
	}
	return err
}

// RemoveTable deletes the table name (family inet) from the calling
// process's network namespace; a table that is not there is no error.
func RemoveTable(name string) error {
	c, err := conn(0)
	if err != nil {
		return err
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: name}
	c.AddTable(t)
	c.DelTable(t)
	return explain("remove the table "+name, c.Flush())
}

// ListRunTables returns the tables of family inet whose names start with
// RunTablePrefix, in the calling process's network namespace.
func ListRunTables() ([]RunTable, error) {
	c, err := conn(0)
	if err != nil {
		return nil, err
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, explain("list the nftables tables", err)
	}
	var out []RunTable
	for _, t := range tables {
		if !strings.HasPrefix(t.Name, RunTablePrefix) {
			continue
		}
		pid, _ := ParseRunName(t.Name)
		out = append(out, RunTable{Name: t.Name, PID: pid})
	}
	return out, nil
}

// ShowTable returns the rules of the table name (family inet) in the calling
// process's network namespace, chain by chain; none when it is absent.
func ShowTable(name string) ([]Rule, error) {
	c, err := conn(0)
	if err != nil {
		return nil, err
	}
	return listRules(c, name, "list the table "+name, true)
}

// native64 is v as the socket expression writes a cgroup id to its
// register: a u64 in the host's byte order.
func native64(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }
