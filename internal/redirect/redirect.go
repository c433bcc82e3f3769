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
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
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

var table = &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}

// Install replaces detour's table with one holding r's rules.
func Install(r Rules) error {
	if r.ToPort == 0 {
		return errors.New("the port to redirect to is required (--to-port, transparent.listen's port)")
	}
	ports := r.Ports
	if len(ports) == 0 {
		ports = DefaultPorts
	}
	for _, p := range ports {
		if p == 0 {
			return errors.New("port 0 cannot be redirected")
		}
		if p == r.ToPort {
			return fmt.Errorf("port %d is both redirected and the port redirected to: every connection to it would loop", p)
		}
	}
	c, err := conn(r.NetNS)
	if err != nil {
		return err
	}
	// Adding the table before deleting it makes the delete succeed when
	// there was none; the whole batch is one transaction.
	c.AddTable(table)
	c.DelTable(table)
	t := c.AddTable(table)
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{
		Name: ChainName, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &accept,
	})
	add := func(text string, exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs,
			UserData: userdata.AppendString(nil, userdata.TypeComment, text)})
	}
	ret := &expr.Verdict{Kind: expr.VerdictReturn}
	for _, uid := range r.ExcludeUIDs {
		add(fmt.Sprintf("meta skuid %d return", uid),
			&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: native32(uid)}, ret)
	}
	for _, m := range r.ExcludeMarks {
		add(fmt.Sprintf("meta mark 0x%08x return", m),
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: native32(m)}, ret)
	}
	for _, p := range append(append([]netip.Prefix(nil), AlwaysExcluded...), r.ExcludeCIDRs...) {
		add(daddrText(p)+" return", append(daddrMatch(p), ret)...)
	}
	for _, p := range ports {
		add(fmt.Sprintf("tcp dport %d redirect to :%d", p, r.ToPort),
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(p)},
			&expr.Immediate{Register: 1, Data: be16(r.ToPort)},
			&expr.Redir{RegisterProtoMin: 1})
	}
	return explain("install the redirect rules", c.Flush())
}

// Remove deletes detour's table. Removing rules that are not there
// succeeds: the end state is the same.
func Remove(netNS int) error {
	c, err := conn(netNS)
	if err != nil {
		return err
	}
	c.AddTable(table)
	c.DelTable(table)
	return explain("remove the redirect rules", c.Flush())
}

// Show returns the rules of detour's table as the kernel holds them; none
// (and no error) when the table is absent.
func Show(netNS int) ([]Rule, error) {
	c, err := conn(netNS)
	if err != nil {
		return nil, err
	}
	t, err := c.ListTableOfFamily(TableName, nftables.TableFamilyINet)
	if errors.Is(err, syscall.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, explain("list the redirect rules", err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, explain("list the redirect rules", err)
	}
	var out []Rule
	for _, ch := range chains {
		if ch.Table.Name != TableName {
			continue
		}
		rules, err := c.GetRules(t, ch)
		if err != nil {
			return nil, explain("list the redirect rules", err)
		}
		for _, r := range rules {
			text, ok := userdata.GetString(r.UserData, userdata.TypeComment)
			if !ok {
				// Not one of detour's: someone edited the table by hand.
				text = fmt.Sprintf("(a rule detour did not write, %d expressions)", len(r.Exprs))
			}
			out = append(out, Rule{Handle: r.Handle, Text: text})
		}
	}
	return out, nil
}

func conn(netNS int) (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if netNS != 0 {
		opts = append(opts, nftables.WithNetNSFd(netNS))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, explain("open a netlink socket to nf_tables", err)
	}
	return c, nil
}

// explain turns the kernel's terse errors into what to do about them.
func explain(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return fmt.Errorf("cannot %s: permission denied: programming nftables needs the CAP_NET_ADMIN capability "+
			"(run as root, or grant it: in Kubernetes, securityContext.capabilities.add: [\"NET_ADMIN\", \"NET_RAW\"]): %w", what, err)
	case errors.Is(err, syscall.EPROTONOSUPPORT), errors.Is(err, syscall.EAFNOSUPPORT), errors.Is(err, syscall.EOPNOTSUPP):
		return fmt.Errorf("cannot %s: this kernel has no nf_tables over netlink (it needs CONFIG_NF_TABLES with nf_tables_inet, "+
			"nft_nat/nft_redir and nft_chain_nat: `modprobe nf_tables nft_redir`, or a kernel that has them): %w", what, err)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("cannot %s: the kernel lacks part of nf_tables' NAT support (nft_chain_nat, nft_redir or nft_meta; "+
			"`modprobe nft_chain_nat nft_redir`): %w", what, err)
	}
	return fmt.Errorf("cannot %s: %w", what, err)
}

// daddrMatch matches the destination address against p; it checks the
// packet's family first, since an inet table sees IPv4 and IPv6 alike.
func daddrMatch(p netip.Prefix) []expr.Any {
	fam, off := byte(unix.NFPROTO_IPV4), uint32(16)
	if !p.Addr().Is4() {
		fam, off = unix.NFPROTO_IPV6, 24
	}
	n := uint32(p.Addr().BitLen() / 8)
	mask := make([]byte, n)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{fam}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()},
	}
}

func daddrText(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "ip daddr " + p.String()
	}
	return "ip6 daddr " + p.String()
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func native32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

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
