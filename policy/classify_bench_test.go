package policy

import (
	"net/http"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// BenchmarkClassifyErrorBodies classifies the vendor error bodies a failover
// meets most: every failed attempt is classified, so this is the CPU detour
// spends per failure before it tries the next upstream.
func BenchmarkClassifyErrorBodies(b *testing.B) {
	cases := []struct {
		name   string
		status int
		header http.Header
		body   string
	}{
		{"openai-429-quota", 429, nil, oaiQuota},
		{"openai-429-tpm", 429, nil, oaiTPM},
		{"openai-429-tpm-retry-after", 429, http.Header{"Retry-After": {"1"}}, oaiTPM},
		{"openai-503-overloaded", 503, nil, oaiServerOverloaded},
		{"azure-429-daily", 429, nil, azureDaily},
		{"gemini-429-per-minute", 429, nil, gemPerMinute},
	}
	var all []Outcome
	for _, bc := range cases {
		o := Outcome{Shape: rewrite.OpenAI, Status: bc.status, Header: bc.header, Body: []byte(bc.body)}
		all = append(all, o)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Classify(o, classifyNow)
			}
		})
	}
	// Each body once in turn: no body comes twice in a row.
	b.Run("mixed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, o := range all {
				Classify(o, classifyNow)
			}
		}
	})
}
