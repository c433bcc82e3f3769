package chain_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/chain"
)

// A request without x-detour-priority takes its tier's priority_by_tier;
// the header wins over it.
func TestPriorityByTier(t *testing.T) {
	t.Parallel()
	vendors := newMemVendors("big", "small")
	r := newMemVendorRunner(t, vendors, `{"upstreams": {`+memUpstream("big", "")+`,`+memUpstream("small", "")+`},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "tiers": {"hard": ["big"], "easy": ["small"]}}],
  "priority_by_tier": {"easy": "low", "hard": "high"}}`, nil)
	for _, tc := range []struct {
		tier, priority, want string
	}{
		{"easy", "", "low"},
		{"hard", "", "high"},
		{"easy", "high", "high"},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(chain.HeaderTier, tc.tier)
		if tc.priority != "" {
			req.Header.Set(chain.HeaderPriority, tc.priority)
		}
		resp := r.serveMem(req)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if rec := r.record(t); rec.Tier != tc.tier || rec.Priority != tc.want {
			t.Errorf("tier %s, header %q: tier %q priority %q; want %s", tc.tier, tc.priority, rec.Tier, rec.Priority, tc.want)
		}
	}
}
