package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// webhookUsage is detour-webhook's --help, as internal/inject's
// TestCommandUsageGolden holds inject.Command to it: read from there, so
// that this binary need not link the webhook and its Kubernetes types to
// compare the two usages.
const webhookUsage = "../inject/testdata/usage.txt"

// errFromWebhook is what the stub webhook of TestInjectUsage answers.
var errFromWebhook = errors.New("the webhook's own error")

func TestInjectUsage(t *testing.T) {
	// What gets past detour's own checks goes to detour-webhook: here, to
	// a stub that records what it was handed (internal/inject's
	// TestCommandRefusals holds inject.Command to the errors these
	// arguments get from the webhook).
	defer func(r func(context.Context, []string, io.Writer, io.Writer) error) { runWebhook = r }(runWebhook)
	var handed []string
	var handedOut, handedErr io.Writer
	runWebhook = func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		handed, handedOut, handedErr = args, stdout, stderr
		return errFromWebhook
	}
	cfg := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(cfg, []byte(`{"imag": "typo"}`), 0o644)
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string // "": the webhook's error, handed back as it is
	}{
		{nil, true, "--tls-cert and --tls-key are required"},
		{[]string{"--tls-cert", "c"}, true, "--tls-cert and --tls-key are required"},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "extra"}, true, `unexpected argument "extra"`},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "--log-level", "loud"}, true, `--log-level "loud"`},
		// The webhook says `unknown field "imag"`.
		{[]string{"--tls-cert", "c", "--tls-key", "k", "--config", cfg}, false, ""},
		// The webhook says "webhook TLS certificate".
		{[]string{"--tls-cert", "/nonexistent.crt", "--tls-key", "/nonexistent.key"}, false, ""},
	} {
		handed, handedOut, handedErr = nil, nil, nil
		var out, errb bytes.Buffer
		err := Inject(context.Background(), tc.args, &out, &errb)
		if err == nil {
			t.Errorf("%q: no error", tc.args)
			continue
		}
		if got := errors.Is(err, ErrUsage); got != tc.usage {
			t.Errorf("%q: usage error %v; want %v (%v)", tc.args, got, tc.usage, err)
		}
		if tc.want == "" {
			if err != errFromWebhook || !slices.Equal(handed, tc.args) || handedOut != &out || handedErr != &errb {
				t.Errorf("%q: Inject = %v, webhook handed %q; want the webhook's error and the arguments and writers as given", tc.args, err, handed)
			}
			continue
		}
		if handed != nil {
			t.Errorf("%q: handed to the webhook (%q); want refused by detour itself", tc.args, handed)
		}
		if msg := err.Error() + errb.String(); !strings.Contains(msg, tc.want) {
			t.Errorf("%q: %q lacks %q", tc.args, msg, tc.want)
		}
		if tc.usage && !strings.Contains(errb.String(), "usage: detour inject") {
			t.Errorf("%q: no usage text on stderr: %q", tc.args, errb.String())
		}
	}
}

// detour inject hands detour-webhook the arguments as the user typed them,
// and both know the same flags with the same defaults.
func TestInjectExecsTheWebhookWithTheSameFlags(t *testing.T) {
	defer func(r func(context.Context, []string, io.Writer, io.Writer) error) { runWebhook = r }(runWebhook)
	var got []string
	runWebhook = func(_ context.Context, args []string, _, _ io.Writer) error { got = args; return nil }
	args := []string{"--listen", ":9443", "--tls-cert", "c", "--tls-key", "k", "--config", "f", "--log-level", "debug"}
	if err := Inject(context.Background(), args, io.Discard, io.Discard); err != nil || !slices.Equal(got, args) {
		t.Fatalf("Inject = %v, webhook args %q; want nil, %q", err, got, args)
	}

	var ours bytes.Buffer
	if err := Inject(context.Background(), []string{"--help"}, &ours, io.Discard); err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile(webhookUsage)
	if err != nil {
		t.Fatal(err)
	}
	if ours.String() != string(theirs) {
		t.Errorf("detour inject and detour-webhook differ in usage:\n--- detour inject\n%s--- detour-webhook (%s)\n%s", ours.String(), webhookUsage, theirs)
	}
}

// Without detour-webhook installed, detour inject says what is missing.
func TestInjectSaysWhereTheWebhookIs(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := webhookPath()
	if err == nil || !strings.Contains(err.Error(), "go install ./cmd/detour-webhook") {
		t.Fatalf("webhookPath = %v; want the missing binary named", err)
	}
}
