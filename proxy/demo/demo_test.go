package demo

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDemoFailsOverWithoutAppErrors(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := Run(ctx, Options{Requests: 30, Pace: time.Millisecond, Seed: 7, Out: &out}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	s := out.String()
	if !strings.Contains(s, "30 requests in") || !strings.Contains(s, "0 reached the app as errors") {
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
