package policy

import (
	"slices"
	"testing"
)

func TestTransparentSection(t *testing.T) {
	t.Parallel()
	if c := compileParts(t, policyParts{}); c.Transparent.Enabled() {
		t.Errorf("no transparent section: Transparent = %+v; want off", c.Transparent)
	}
	c := compileParts(t, policyParts{top: `"transparent": {}`})
	if want := (TransparentPolicy{Listen: DefaultTransparentListen}); c.Transparent != want {
		t.Errorf("empty transparent section: %+v; want %+v", c.Transparent, want)
	}
	c = compileParts(t, policyParts{top: `"transparent": {"listen": "[::1]:15002", "mark": 4919}`})
	if want := (TransparentPolicy{Listen: "[::1]:15002", Mark: 4919}); c.Transparent != want {
		t.Errorf("transparent section: %+v; want %+v", c.Transparent, want)
	}
	// A public transparent listen is allowed as a public listen is.
	c = compileParts(t, policyParts{top: `"listen_public": true, "transparent": {"listen": "0.0.0.0:15001"}`})
	if c.Transparent.Listen != "0.0.0.0:15001" {
		t.Errorf("listen_public: transparent.listen = %q", c.Transparent.Listen)
	}
}

func TestTransparentRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		top  string
		want []fieldErr
	}{
		{"not host:port", `"transparent": {"listen": "15001"}`,
			[]fieldErr{{"transparent.listen", `must be host:port, e.g. "127.0.0.1:15001": address 15001: missing port in address`}}},
		{"public without listen_public", `"transparent": {"listen": "0.0.0.0:15001"}`,
			[]fieldErr{{"transparent.listen", `"0.0.0.0:15001" is not a loopback address: redirected connections arrive on loopback, and anything else that reaches this address could have detour connect for it. Listen on "127.0.0.1:15001", or set "listen_public": true (or "egress": {"tunnel": "deny"}) if it is meant`}}},
		{"mark too large", `"transparent": {"mark": 4294967296}`,
			[]fieldErr{{"transparent.mark", "must be a socket mark from 1 to 4294967295 (0 or absent: no mark); got 4294967296"}}},
		{"mark negative", `"transparent": {"mark": -1}`,
			[]fieldErr{{"transparent.mark", "must be a socket mark from 1 to 4294967295 (0 or absent: no mark); got -1"}}},
		{"same as listen", `"transparent": {"listen": "127.0.0.1:8787"}`,
			[]fieldErr{{"transparent.listen", `"127.0.0.1:8787" is already the address of another detour listener`}}},
	}
	for _, tt := range tests {
		if got := compileErrs(t, policyParts{top: tt.top}); !slices.Equal(got, tt.want) {
			t.Errorf("%s: errors\n%v\nwant\n%v", tt.name, got, tt.want)
		}
	}
}
