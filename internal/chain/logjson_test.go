package chain

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/rewrite"
)

// logOracle is Record.Log as it was written before logjson.go: every
// field through zerolog's own encoders. Record.Log must write exactly its
// bytes.
func (r *Record) logOracle(l zerolog.Logger) {
	var ev *zerolog.Event
	switch {
	case r.Status == 499:
		ev = l.Info()
	case r.AnsweredBy == "" || r.Status >= 500:
		ev = l.Error()
	case r.failedOver() || r.Status >= 400 || r.Error != "":
		ev = l.Warn()
	default:
		ev = l.Info()
	}
	if ev == nil {
		return
	}
	attempts := zerolog.Arr()
	for _, a := range r.Attempts {
		d := zerolog.Dict().
			Str("upstream", a.Upstream).
			Str("model", a.Model).
			Int("status", a.Status).
			Str("class", a.Class).
			Str("outcome", a.Outcome).
			Float64("ms", ms(a.Duration)).
			Int("retry", a.Retry)
		if a.Reason != "" {
			d = d.Str("reason", a.Reason)
		}
		if a.Hedge {
			d = d.Bool("hedge", true)
		}
		if a.Translated {
			d = d.Bool("translated", true)
			if len(a.Notes) > 0 {
				d = d.Strs("notes", a.Notes)
			}
		}
		attempts = attempts.Dict(d)
	}
	reasons := r.Reasons
	if reasons == nil {
		reasons = []string{}
	}
	ev = ev.Str("id", r.ID).
		Str("mode", r.Mode).
		Str("host", r.Host).
		Str("method", r.Method).
		Str("path", r.Path).
		Str("route", r.Route).
		Str("policy", r.Policy).
		Str("tier", r.Tier).
		Strs("reasons", reasons).
		Bool("stream", r.Stream).
		Str("model", r.Model).
		Array("attempts", attempts).
		Str("answered_by", r.AnsweredBy).
		Int("status", r.Status).
		Str("error", r.Error).
		Float64("ttfb_ms", ms(r.TTFB)).
		Float64("total_ms", ms(r.Total)).
		Dict("usage", zerolog.Dict().Int64("input", r.Usage.Input).Int64("output", r.Usage.Output)).
		Str("cache", r.Cache).
		Float64("cost_usd", r.CostUSD).
		Str("priority", r.Priority)
	if r.Prompt != "" {
		ev = ev.Str("prompt", r.Prompt)
	}
	if r.Selection != nil {
		ev = ev.Dict("selection", r.Selection.dict())
	}
	ev.Msg("request")
}

// logStrings are strings with every kind of byte zerolog treats apart.
var logStrings = []string{
	"", "gpt-4o", "openai", "ok", `"quoted" \back\slash/`, "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "é 😀 \u2028\u2029", "bad \xff\xfe utf8 \xe2\x80", "<html>&amp;",
	"200 in-body rate_limit_exceeded", "cooldown until 2026-08-21T10:00:00Z",
}

func randomLogString(rng *rand.Rand) string {
	if rng.IntN(3) > 0 {
		return logStrings[rng.IntN(len(logStrings))]
	}
	b := make([]byte, rng.IntN(24))
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return string(b)
}

// logDurations reach every branch of appendMS and its float fallback.
func randomLogDuration(rng *rand.Rand) time.Duration {
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return -time.Duration(rng.Int64N(int64(time.Hour)))
	case 2:
		return time.Duration(rng.Int64N(math.MaxInt64))
	case 3:
		return time.Duration(maxExactMS-1-rng.Int64N(3)) * time.Microsecond
	case 4:
		return time.Duration(rng.Int64N(1000)) * time.Millisecond
	case 5:
		return time.Duration(rng.Int64N(2000)) * time.Microsecond
	}
	return time.Duration(rng.Int64N(int64(10 * time.Minute)))
}

func randomRecord(rng *rand.Rand) *Record {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	r := &Record{
		ID: "0123456789abcdef", Mode: pick("proxy", "base_url", "transparent"), Host: randomLogString(rng),
		Method: pick("POST", "GET"), Path: randomLogString(rng), Route: randomLogString(rng), Policy: "aa6a9d4647ff",
		Tier: randomLogString(rng), Stream: rng.IntN(2) == 0, Model: randomLogString(rng),
		AnsweredBy: pick("", "up", "passthrough", randomLogString(rng)), Status: pick2(rng, 200, 499, 503, 400, 0),
		Error: pick("", randomLogString(rng)), TTFB: randomLogDuration(rng), Total: randomLogDuration(rng),
		Usage: rewrite.Usage{Input: rng.Int64N(1 << 40), Output: rng.Int64N(100) - 5}, Cache: pick(CacheOff, "stored"),
		CostUSD: pickFloat(rng), Priority: pick("normal", "high", "low"), Prompt: pick("", randomLogString(rng)),
	}
	for range rng.IntN(3) {
		r.Reasons = append(r.Reasons, randomLogString(rng))
	}
	for range rng.IntN(4) {
		a := AttemptRecord{
			Upstream: randomLogString(rng), Model: randomLogString(rng), Status: pick2(rng, 200, 429, 503, 0),
			Class: pick("", "rate_limited", randomLogString(rng)), Outcome: pick(OutcomeOK, OutcomeFallback, OutcomeRetry),
			Reason: pick("", randomLogString(rng)), Duration: randomLogDuration(rng), Retry: rng.IntN(3),
			Hedge: rng.IntN(3) == 0, Translated: rng.IntN(2) == 0,
		}
		for range rng.IntN(3) {
			a.Notes = append(a.Notes, randomLogString(rng))
		}
		r.addAttempt(a)
	}
	if rng.IntN(4) == 0 {
		r.Selection = &SelectionRecord{Strategy: "weighted", Chosen: "up",
			Candidates: []SelectionCandidate{{Upstream: "up", Weight: 0.95}, {Upstream: randomLogString(rng), Weight: 0.05}}}
	}
	return r
}

func pick2(rng *rand.Rand, v ...int) int { return v[rng.IntN(len(v))] }

func pickFloat(rng *rand.Rand) float64 {
	return []float64{0, 0.000123, 1e-7, 12.5, 1e21, rng.Float64() * 100}[rng.IntN(6)]
}

// TestLogLineBytes: Record.Log writes the bytes the zerolog-built line
// (logOracle) writes, for records with every kind of string, duration,
// attempt and field zerolog encodes apart, at every level.
func TestLogLineBytes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	var got, want bytes.Buffer
	gl := zerolog.New(&got).With().Str("component", "chain").Logger()
	wl := zerolog.New(&want).With().Str("component", "chain").Logger()
	// 4,000 records: every block of logjson.go and of rewrite's log-string
	// escaper that the records reach is reached by the first 300 (measured
	// with -coverprofile; 20,000 reach no more), and the escaper meets every
	// single byte in TestAppendMSMatchesZerolog. Under -race each record
	// costs some 0.15 ms of CPU for the two lines.
	for i := range 4000 {
		r := randomRecord(rng)
		got.Reset()
		want.Reset()
		r.Log(gl)
		r.logOracle(wl)
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got.Bytes(), want.Bytes())
		}
	}
	// A disabled level writes nothing, as before.
	got.Reset()
	randomRecord(rng).Log(zerolog.New(&got).Level(zerolog.Disabled))
	if got.Len() != 0 {
		t.Errorf("a disabled logger got %q", got.Bytes())
	}
}

// TestAppendMSMatchesZerolog holds appendMS to zerolog's Float64 of ms(d)
// on whole ranges of durations around every digit boundary, and
// rewrite.AppendLogString to zerolog's Str on every byte.
func TestAppendMSMatchesZerolog(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	l := zerolog.New(&b)
	check := func(d time.Duration) {
		t.Helper()
		b.Reset()
		l.Log().Float64("x", ms(d)).Send()
		want := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(b.String()), `{"x":`), "}")
		if got := string(appendMS(nil, d)); got != want {
			t.Fatalf("appendMS(%d) = %s; zerolog writes %s", d, got, want)
		}
	}
	// The durations go in batches: one zerolog line of a Float64 field per
	// duration against appendMS's values written the same way, and check
	// again one by one, for the message, only a batch that differs. A line
	// per duration cost most of the test's CPU under -race (an event, a
	// string and its trimming for each of 222,000 durations).
	var batch []time.Duration
	var mine []byte
	flush := func() {
		t.Helper()
		b.Reset()
		ev := l.Log()
		mine = append(mine[:0], '{')
		for i, d := range batch {
			ev = ev.Float64("x", ms(d))
			if i > 0 {
				mine = append(mine, ',')
			}
			mine = appendMS(append(mine, `"x":`...), d)
		}
		ev.Send()
		mine = append(mine, "}\n"...)
		if !bytes.Equal(b.Bytes(), mine) {
			for _, d := range batch {
				check(d)
			}
			t.Fatalf("appendMS differs from zerolog in a batch from %d to %d, and in none of it alone", batch[0], batch[len(batch)-1])
		}
		batch = batch[:0]
	}
	add := func(d time.Duration) {
		t.Helper()
		if batch = append(batch, d); len(batch) == 1000 {
			flush()
		}
	}
	for us := int64(0); us < 200000; us++ {
		add(time.Duration(us) * time.Microsecond)
	}
	for p := int64(1000); p < maxExactMS*10; p *= 10 {
		for us := p - 1100; us < p+1100; us++ {
			add(time.Duration(us)*time.Microsecond + time.Duration(us%1000))
		}
	}
	if len(batch) > 0 {
		flush()
	}
	for c := 0; c < 256; c++ {
		s := "a" + string(rune(c)) + string([]byte{byte(c)}) + "z"
		b.Reset()
		l.Log().Str("x", s).Send()
		want := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(b.String()), `{"x":`), "}")
		if got := string(rewrite.AppendLogString(nil, s)); got != want {
			t.Fatalf("rewrite.AppendLogString(%q) = %s; zerolog writes %s", s, got, want)
		}
	}
	// Where zerolog and encoding/json part ways: the line separators.
	for _, s := range []string{"a\u2028b\u2029c", "\u00e9\u4e16\U0001F600"} {
		b.Reset()
		l.Log().Str("x", s).Send()
		want := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(b.String()), `{"x":`), "}")
		if got := string(rewrite.AppendLogString(nil, s)); got != want {
			t.Fatalf("rewrite.AppendLogString(%q) = %s; zerolog writes %s", s, got, want)
		}
	}
}
