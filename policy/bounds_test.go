package policy

import (
	"slices"
	"testing"
	"time"
)

func TestBoundsDefaults(t *testing.T) {
	t.Parallel()
	c := compileParts(t, policyParts{})
	want := Bounds{BufferedBytes: 128 << 20, ClientBody: 30 * time.Second, DrainTimeout: 30 * time.Second}
	if c.Bounds != want {
		t.Errorf("Bounds = %+v; want %+v", c.Bounds, want)
	}
	// A timeouts section without client_body keeps its default.
	if c := compileParts(t, policyParts{top: `"timeouts": {"connect": "2s"}`}); c.Bounds.ClientBody != DefaultClientBodyTimeout {
		t.Errorf("client_body = %v; want the default", c.Bounds.ClientBody)
	}
}

func TestBoundsFromThePolicy(t *testing.T) {
	t.Parallel()
	c := compileParts(t, policyParts{top: `"limits": {"buffered_bytes": 67108864}, "timeouts": {"client_body": "5s"}, "drain_timeout": "45s"`})
	want := Bounds{BufferedBytes: 64 << 20, ClientBody: 5 * time.Second, DrainTimeout: 45 * time.Second}
	if c.Bounds != want {
		t.Errorf("Bounds = %+v; want %+v", c.Bounds, want)
	}
}

func TestBoundsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    policyParts
		want []fieldErr
	}{
		{"buffered_bytes too small", policyParts{top: `"limits": {"buffered_bytes": 4096}`},
			[]fieldErr{{"limits.buffered_bytes", "must be at least 1048576 (1 MiB; 0 or absent: the default, 134217728); got 4096"}}},
		{"buffered_bytes negative", policyParts{top: `"limits": {"buffered_bytes": -1}`},
			[]fieldErr{{"limits.buffered_bytes", "must be at least 1048576 (1 MiB; 0 or absent: the default, 134217728); got -1"}}},
		{"client_body not a duration", policyParts{top: `"timeouts": {"client_body": "soon"}`},
			[]fieldErr{{"timeouts.client_body", `invalid duration "soon" (use Go duration syntax such as "250ms", "30s", "10m")`}}},
		{"drain_timeout negative", policyParts{top: `"drain_timeout": "-1s"`},
			[]fieldErr{{"drain_timeout", `duration "-1s" must not be negative`}}},
		{"client_body on an upstream", policyParts{upstreams: `
    "o": {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}, "timeouts": {"client_body": "5s"}}`,
			routes: `{"name": "r", "match": {"host": "api.openai.com"}, "chain": ["o"]}`},
			[]fieldErr{{"upstreams.o.timeouts.client_body", "the request body is read once, before any upstream is chosen: set timeouts.client_body at the top level"}}},
		{"unknown limits field", policyParts{top: `"limits": {"rpm": 10}`}, nil},
	}
	for _, tt := range tests {
		got := compileErrs(t, tt.p)
		if tt.want == nil {
			// Only that it is refused: the decoder's message is its own.
			if len(got) == 0 || got[0].field != "limits.rpm" {
				t.Errorf("%s: errors %v; want one on limits.rpm", tt.name, got)
			}
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: errors\n%v\nwant\n%v", tt.name, got, tt.want)
		}
	}
}
