package demo

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/fakevendor"
)

func TestDemoFailsOverWithoutAppErrors(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := Run(ctx, Options{Requests: 30, Seed: 7, Out: &out}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	s := out.String()
	if !strings.Contains(s, "30 requests: ") || !strings.Contains(s, "0 reached the app as errors") {
		t.Errorf("summary missing or the app saw errors:\n%s", s)
	}
	// The primary's quota runs out a third of the way in: it must then be
	// skipped (cooling down), not called on every request.
	m := regexp.MustCompile(`(?m)^openai\s+(\d+)\s+(\d+)\s+(\d+)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no openai row:\n%s", s)
	}
	calls, _ := strconv.Atoi(m[2])
	skipped, _ := strconv.Atoi(m[3])
	if skipped == 0 || calls >= 30 {
		t.Errorf("openai calls %d skipped %d; want it skipped while cooling down\n%s", calls, skipped, s)
	}
}

// Off a terminal the demo prints the same bytes for the same seed: no
// progress line, no timings, no port, and every count the same however the
// machine schedules the run.
func TestDemoPrintsTheSameBytesForTheSameSeed(t *testing.T) {
	t.Parallel()
	// The two runs go side by side: most of a run is waiting on the fake
	// vendors' event delays, and running them at once is also a harder
	// test of "however the machine schedules the run".
	var outs [2]bytes.Buffer
	var errs [2]error
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			errs[i] = Run(ctx, Options{Requests: 40, Seed: 3, Out: &outs[i]})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("demo: %v\n%s", err, outs[i].String())
		}
	}
	first, second := outs[0].String(), outs[1].String()
	if first != second {
		t.Errorf("two runs with seed 3 differ:\n--- first\n%s\n--- second\n%s", first, second)
	}
	for _, leak := range []string{"127.0.0.1", "\r", "[ "} {
		if strings.Contains(first, leak) {
			t.Errorf("output off a terminal holds %q (a port, the progress line or a timing):\n%s", leak, first)
		}
	}
	if regexp.MustCompile(`\d\.\ds\b`).MatchString(first) {
		t.Errorf("output off a terminal holds a wall-clock time:\n%s", first)
	}
}

// The skipped section names only the causes that happened: an upstream
// skipped by its breaker alone is not "0 while cooling down".
func TestDemoTableNamesOnlyTheSkipsThatHappened(t *testing.T) {
	t.Parallel()
	tl := newTally()
	skip := func(up, reason string) *chain.Record {
		return &chain.Record{AnsweredBy: "local", Attempts: []chain.AttemptRecord{
			{Upstream: up, Outcome: chain.OutcomeSkipped, Reason: reason},
			{Upstream: "local", Outcome: chain.OutcomeOK},
		}}
	}
	tl.add(skip("backup", "breaker open until 2026-01-01T09:00:01Z (5 failures in a row)"))
	tl.add(skip("backup", "breaker half-open: probes in flight"))
	tl.add(skip("openai", "cooling down until 2026-01-01T09:00:02Z (429 insufficient_quota)"))
	tl.add(skip("openai", "no models entry matches \"gpt-4o\""))
	vendors := make([]*fakevendor.Vendor, len(cast))
	for i, spec := range cast {
		vendors[i] = fakevendor.New(spec.shape, fakevendor.Options{})
	}
	var out bytes.Buffer
	tl.table(&out, vendors)
	for _, want := range []string{
		"  backup  2 while its circuit breaker was open after repeated failures\n",
		"  openai  1 while cooling down after a quota error, 1 for another reason (the log says which)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), " 0 while") {
		t.Errorf("table counts a cause that never happened:\n%s", out.String())
	}
}
