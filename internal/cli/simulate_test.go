package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestSimulatePrintsTheTablesAskedFor(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	err := Simulate(context.Background(), []string{"--only", "a", "--requests", "50", "--seed", "3"}, &out, &errb)
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"seed 3", "`detour simulate --seed 3 --requests 50 ", "--only a`", "## (a)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "## (b)") {
		t.Error("--only a printed table (b)")
	}
	if !strings.Contains(errb.String(), "table (a) took") {
		t.Errorf("stderr lacks the timing: %q", errb.String())
	}
}

func TestSimulateRefusesUnknownTable(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	err := Simulate(context.Background(), []string{"--only", "a,x"}, &out, &errb)
	if !errors.Is(err, ErrUsage) || !strings.Contains(errb.String(), `unknown table "x"`) {
		t.Errorf("err = %v, stderr %q; want a usage error naming x", err, errb.String())
	}
}
