package inject

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// TestCommandRefusals: the arguments internal/cli's TestInjectUsage gives
// `detour inject` get these errors from the webhook's command, which
// `detour inject` hands back as they are (that test holds it to it).
// The first four detour refuses itself before it execs the webhook; the
// webhook refuses them alike when it is run on its own.
func TestCommandRefusals(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(cfg, []byte(`{"imag": "typo"}`), 0o644)
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{nil, true, "--tls-cert and --tls-key are required"},
		{[]string{"--tls-cert", "c"}, true, "--tls-cert and --tls-key are required"},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "extra"}, true, `unexpected argument "extra"`},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "--log-level", "loud"}, true, `--log-level "loud"`},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "--config", cfg}, false, `unknown field "imag"`},
		{[]string{"--tls-cert", "/nonexistent.crt", "--tls-key", "/nonexistent.key"}, false, "webhook TLS certificate"},
	} {
		var out, errb bytes.Buffer
		err := Command(context.Background(), tc.args, &out, &errb)
		if err == nil {
			t.Errorf("%q: no error", tc.args)
			continue
		}
		if got := errors.Is(err, ErrUsage); got != tc.usage {
			t.Errorf("%q: usage error %v; want %v (%v)", tc.args, got, tc.usage, err)
		}
		if msg := err.Error() + errb.String(); !strings.Contains(msg, tc.want) {
			t.Errorf("%q: %q lacks %q", tc.args, msg, tc.want)
		}
		if tc.usage && !strings.Contains(errb.String(), "usage: detour inject") {
			t.Errorf("%q: no usage text on stderr: %q", tc.args, errb.String())
		}
	}
}

// TestCommandUsageGolden holds the webhook's --help to testdata/usage.txt,
// which internal/cli's TestInjectExecsTheWebhookWithTheSameFlags holds
// `detour inject --help` to: the two commands know the same flags with the
// same defaults, and the sidecar's tests need not link the webhook.
func TestCommandUsageGolden(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := Command(context.Background(), []string{"--help"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	testsupport.Golden(t, "testdata/usage.txt", out.Bytes())
}
