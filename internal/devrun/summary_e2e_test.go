package devrun

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/fakevendor"
)

// A stream the primary cuts after it began reaches curl as part of an
// answer and an error event, and the summary `detour run` prints counts it
// as such: an error, a stream cut, not a request answered directly.
func TestSummaryOfARunCountsACutStream(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("curl is not installed")
		}
		t.Fatal("curl is not installed; .ci/run must install it")
	}
	t.Parallel()
	policyPath, primary, backup := vendors(t, fakevendor.Fault{Kind: fakevendor.StreamCut})
	res, stdout, stderr := run(t, Options{
		Command: []string{"curl", "-q", "-sS", "-N", "--max-time", "30",
			"-H", "Authorization: Bearer sk-test-not-a-real-key",
			"-H", "Content-Type: application/json",
			"-d", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Say hello."}]}`,
			"https://api.openai.com/v1/chat/completions"},
		PolicyPath: policyPath,
	})
	if res.ExitCode != 0 {
		t.Fatalf("curl exited %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), `"error"`) {
		t.Errorf("curl got no error event after the cut:\n%s", stdout.String())
	}
	if primary.Calls() != 1 || backup.Calls() != 0 {
		t.Errorf("calls: primary %d, backup %d; want 1 and 0 (nothing is replayed after the commit point)", primary.Calls(), backup.Calls())
	}
	s := res.Summary
	if s.Requests != 1 || s.Errors != 1 || s.Cut != 1 || s.Direct != 0 || s.FailedOver != 0 || len(s.AnsweredBy) != 0 {
		t.Errorf("summary = %+v; want 1 request, 1 error, 1 cut, nothing answered", s)
	}
	if want := "detour: 1 request: 0 answered directly, 0 failed over; 1 error (1 stream cut after it began)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
}
