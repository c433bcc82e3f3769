package chain

import (
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/rewrite"
)

// typicalRecord is the record of a request the load harness sends: one
// attempt, answered by the first upstream.
func typicalRecord() *Record {
	r := &Record{
		ID: "0123456789abcdef", Mode: "base_url", Host: "api.openai.com", Method: "POST", Path: "/v1/chat/completions",
		Route: "chat", Policy: "aa6a9d4647ff", Tier: "", Model: "gpt-4o-mini", AnsweredBy: "fake", Status: 200,
		TTFB: 412 * time.Microsecond, Total: 455 * time.Microsecond, Usage: rewrite.Usage{Input: 12, Output: 200},
		Cache: CacheOff, Priority: "normal",
	}
	r.addAttempt(AttemptRecord{Upstream: "fake", Model: "gpt-4o-mini", Status: 200, Outcome: OutcomeOK, Duration: 398 * time.Microsecond})
	return r
}

// BenchmarkRecordLog is Record.Log of a typical request's record, through
// the logger detour serve builds (info, a timestamp) to io.Discard.
func BenchmarkRecordLog(b *testing.B) {
	l := zerolog.New(io.Discard).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	r := typicalRecord()
	b.ReportAllocs()
	for b.Loop() {
		r.Log(l)
	}
}
