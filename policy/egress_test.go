package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// withTop inserts top-level members into goodPolicy.
func withTop(members string) string {
	return strings.Replace(goodPolicy, `"version": "t1",`, `"version": "t1", `+members+`,`, 1)
}

// TestNonLoopbackListenNeedsDenyOrListenPublic: a listen other machines can
// reach makes detour an open proxy, so it is refused unless egress.tunnel is
// "deny" or listen_public says it is meant — and then it is still warned
// about, as is a non-loopback admin_listen.
func TestNonLoopbackListenNeedsDenyOrListenPublic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		members  string
		wantErr  string // in the error on field listen; "" = compiles
		warnings []string
	}{
		{"default", `"listen": "127.0.0.1:8787"`, "", nil},
		{"localhost", `"listen": "localhost:8787"`, "", nil},
		{"ipv6 loopback", `"listen": "[::1]:8787"`, "", nil},
		{"other loopback address", `"listen": "127.0.0.2:8787"`, "", nil},
		{"every interface", `"listen": "0.0.0.0:8787"`, `"0.0.0.0:8787" is not a loopback address`, nil},
		{"empty host", `"listen": ":8787"`, `":8787" is not a loopback address`, nil},
		{"every ipv6 interface", `"listen": "[::]:8787"`, "not a loopback address", nil},
		{"pod address", `"listen": "10.0.0.5:8787"`, "not a loopback address", nil},
		{"a name", `"listen": "detour.internal:8787"`, "not a loopback address", nil},
		{"listen_public false", `"listen": "0.0.0.0:8787", "listen_public": false`, "not a loopback address", nil},
		{"tunnel allow said", `"listen": "0.0.0.0:8787", "egress": {"tunnel": "allow"}`, "not a loopback address", nil},
		{"tunnel deny", `"listen": "0.0.0.0:8787", "egress": {"tunnel": "deny"}`, "", []string{`listen "0.0.0.0:8787" is not a loopback address`, `egress.tunnel is "deny"`}},
		{"listen_public", `"listen": "0.0.0.0:8787", "listen_public": true`, "", []string{`listen "0.0.0.0:8787" is not a loopback address`, "listen_public is true"}},
		{"public admin", `"admin_listen": "0.0.0.0:8788"`, "", []string{`admin_listen "0.0.0.0:8788" is not a loopback address`}},
		{"admin off", `"admin_listen": "off"`, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile("policy.json", []byte(withTop(tc.members)), testOptions())
			if tc.wantErr != "" {
				var es Errors
				if !errors.As(err, &es) || len(es) != 1 || es[0].Field != "listen" || !strings.Contains(es[0].Msg, tc.wantErr) {
					t.Fatalf("error %v; want one on field listen containing %q", err, tc.wantErr)
				}
				for _, hint := range []string{`"tunnel": "deny"`, `"listen_public": true`, "127.0.0.1"} {
					if !strings.Contains(es[0].Msg, hint) {
						t.Errorf("error %q does not say %s", es[0].Msg, hint)
					}
				}
				if es[0].Line != 2 {
					t.Errorf("error at line %d; want 2, where listen is", es[0].Line)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(c.ListenWarnings(), "\n")
			if len(tc.warnings) == 0 && got != "" {
				t.Errorf("warnings %q; want none", got)
			}
			for _, w := range tc.warnings {
				if !strings.Contains(got, w) {
					t.Errorf("warnings %q lack %q", got, w)
				}
			}
		})
	}
}

func TestEgressSectionCompiles(t *testing.T) {
	t.Parallel()
	c, err := Compile("policy.json", []byte(goodPolicy), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if c.Egress.Tunnel != EgressAllow || len(c.Egress.DenyCIDRs) != 2 || c.Egress.DenyCIDRs[0].String() != "127.0.0.0/8" || c.Egress.DenyCIDRs[1].String() != "::1/128" {
		t.Errorf("default egress = %+v; want allow, loopback", c.Egress)
	}
	c, err = Compile("policy.json", []byte(withTop(`"egress": {"tunnel": "deny", "deny_cidrs": ["10.0.0.0/8", "192.0.2.7", "fd00::/8"]}`)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.Egress.DenyCIDRs {
		got = append(got, p.String())
	}
	if c.Egress.Tunnel != EgressDeny || strings.Join(got, " ") != "10.0.0.0/8 192.0.2.7/32 fd00::/8" {
		t.Errorf("egress = %s %v", c.Egress.Tunnel, got)
	}
	c, err = Compile("policy.json", []byte(withTop(`"egress": {"deny_cidrs": []}`)), testOptions())
	if err != nil || len(c.Egress.DenyCIDRs) != 0 {
		t.Errorf("deny_cidrs [] = %v, %v; want no configured range", c.Egress.DenyCIDRs, err)
	}

	for _, tc := range []struct{ egress, field, want string }{
		{`{"tunnel": "block"}`, "egress.tunnel", `must be "allow" (tunnel hosts no route names) or "deny"`},
		{`{"deny_cidrs": ["10.0.0.0/33"]}`, "egress.deny_cidrs[0]", `want a CIDR such as "10.0.0.0/8"`},
		{`{"deny_cidrs": ["10.0.0.0/8", "example.com"]}`, "egress.deny_cidrs[1]", `got "example.com"`},
		{`{"deny_cidrs": ["10.0.0.1/8"]}`, "egress.deny_cidrs[0]", `did you mean "10.0.0.0/8"?`},
	} {
		_, err := Compile("policy.json", []byte(withTop(`"egress": `+tc.egress)), testOptions())
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 || es[0].Field != tc.field || !strings.Contains(es[0].Msg, tc.want) {
			t.Errorf("egress %s: error %v; want one on %s containing %q", tc.egress, err, tc.field, tc.want)
		}
	}
}

// TestEgressRefusal: the ranges are judged on the address, IPv4-mapped
// addresses as the IPv4 host they reach; link-local, metadata and
// unspecified addresses are refused whatever deny_cidrs says.
func TestEgressRefusal(t *testing.T) {
	t.Parallel()
	def := EgressPolicy{Tunnel: EgressAllow, DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	open := EgressPolicy{Tunnel: EgressAllow, DenyCIDRs: []netip.Prefix{}}
	for _, tc := range []struct {
		ip        string
		def, open string // "" = allowed
	}{
		{"8.8.8.8", "", ""},
		{"10.1.2.3", "", ""},
		{"2001:db8::1", "", ""},
		{"127.0.0.1", "127.0.0.1 is in egress.deny_cidrs (127.0.0.0/8)", ""},
		{"127.9.9.9", "127.9.9.9 is in egress.deny_cidrs (127.0.0.0/8)", ""},
		{"::1", "::1 is in egress.deny_cidrs (::1/128)", ""},
		{"::ffff:127.0.0.1", "127.0.0.1 is in egress.deny_cidrs (127.0.0.0/8)", ""},
		{"169.254.169.254", "169.254.169.254 is link-local, where cloud metadata services answer (always refused)", "169.254.169.254 is link-local"},
		{"::ffff:169.254.169.254", "169.254.169.254 is link-local", "169.254.169.254 is link-local"},
		{"169.254.170.2", "link-local", "link-local"},
		{"fe80::1", "fe80::1 is link-local (always refused)", "fe80::1 is link-local"},
		{"fe80::1%eth0", "fe80::1 is link-local", "fe80::1 is link-local"},
		{"fd00:ec2::254", "fd00:ec2::254 is a cloud metadata address", "a cloud metadata address"},
		{"100.100.100.200", "a cloud metadata address", "a cloud metadata address"},
		{"0.0.0.0", "0.0.0.0 is the unspecified address, which reaches this host", "unspecified"},
		{"::", ":: is the unspecified address", "unspecified"},
	} {
		ip := netip.MustParseAddr(tc.ip)
		for _, v := range []struct {
			name string
			p    EgressPolicy
			want string
		}{{"default", def, tc.def}, {"deny_cidrs []", open, tc.open}} {
			got := v.p.Refusal(ip)
			if (v.want == "") != (got == "") || !strings.Contains(got, v.want) {
				t.Errorf("%s: Refusal(%s) = %q; want %q", v.name, tc.ip, got, v.want)
			}
		}
	}
}

func TestHostRefusalWithTunnelDeny(t *testing.T) {
	t.Parallel()
	c, err := Compile("policy.json", []byte(withTop(`"egress": {"tunnel": "deny"}`)), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.HostRefusal("api.openai.com"); got != "" {
		t.Errorf("a host a route names is refused: %q", got)
	}
	if got := c.HostRefusal("pypi.org"); got != `egress.tunnel is "deny" and no route names pypi.org` {
		t.Errorf("HostRefusal(pypi.org) = %q", got)
	}
	c, _ = Compile("policy.json", []byte(goodPolicy), testOptions())
	if got := c.HostRefusal("pypi.org"); got != "" {
		t.Errorf("tunnel allow refuses pypi.org: %q", got)
	}
}
