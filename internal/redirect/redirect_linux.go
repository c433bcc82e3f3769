//go:build linux

package redirect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

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
		add(fmt.Sprintf("tcp dport %d redirect to :%d", p, r.ToPort), redirectPort(p, r.ToPort)...)
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
	return listRules(c, TableName, "list the redirect rules", false)
}

// listRules reads back the rules of the inet table name, chain by chain;
// none when the table is absent. withChain prefixes each rule's text with
// its chain's name, for tables of more than one chain.
func listRules(c *nftables.Conn, name, what string, withChain bool) ([]Rule, error) {
	t, err := c.ListTableOfFamily(name, nftables.TableFamilyINet)
	if errors.Is(err, syscall.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, explain(what, err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, explain(what, err)
	}
	var out []Rule
	for _, ch := range chains {
		if ch.Table.Name != name {
			continue
		}
		rules, err := c.GetRules(t, ch)
		if err != nil {
			return nil, explain(what, err)
		}
		for _, r := range rules {
			text, ok := userdata.GetString(r.UserData, userdata.TypeComment)
			if !ok {
				// Not one of detour's: someone edited the table by hand.
				text = fmt.Sprintf("(a rule detour did not write, %d expressions)", len(r.Exprs))
			}
			if withChain {
				text = ch.Name + ": " + text
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

// redirectPort redirects a TCP connection to port to the local port to.
func redirectPort(port, to uint16) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(port)},
		&expr.Immediate{Register: 1, Data: be16(to)},
		&expr.Redir{RegisterProtoMin: 1},
	}
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func native32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
