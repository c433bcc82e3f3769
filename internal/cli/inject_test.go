package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInjectUsage(t *testing.T) {
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
		err := Inject(context.Background(), tc.args, &out, &errb)
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
