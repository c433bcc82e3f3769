package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/cli"
)

// helpCases is every command and subcommand with the words its usage must
// show: its synopsis and each of its flags.
var helpCases = []struct {
	cmd  []string
	want []string
}{
	{[]string{"serve"}, []string{"detour serve", "-policy"}},
	{[]string{"run"}, []string{"detour run", "-- CMD", "-policy", "-log", "-verbose"}},
	{[]string{"demo"}, []string{"detour demo", "-requests", "-seed"}},
	{[]string{"simulate"}, []string{"detour simulate", "-seed", "-requests", "-latency-requests", "-only", "-quota-run", "-quota-at", "-breaker-run"}},
	{[]string{"ca"}, []string{"detour ca init", "detour ca print", "detour ca bundle", "-policy", "-cert", "-key", "-out"}},
	{[]string{"ca", "init"}, []string{"detour ca init", "-cert", "-key", "-policy"}},
	{[]string{"ca", "print"}, []string{"detour ca print", "-cert", "-policy"}},
	{[]string{"ca", "bundle"}, []string{"detour ca bundle", "-out", "-cert", "-policy"}},
	{[]string{"policy"}, []string{"detour policy check FILE", "detour policy explain FILE", "-request", "-host", "-path", "-tier", "-admin"}},
	{[]string{"policy", "check"}, []string{"detour policy check FILE"}},
	{[]string{"policy", "explain"}, []string{"detour policy explain FILE", "-request", "-host", "-path", "-tier", "-admin"}},
	{[]string{"fake-vendor"}, []string{"detour fake-vendor", "-shape", "-faults", "-listen", "-tls", "-name", "-seed", "-event-delay"}},
	{[]string{"inject"}, []string{"detour inject", "-tls-cert", "-tls-key", "-listen", "-config", "-log-level"}},
	{[]string{"redirect"}, []string{"detour redirect install", "detour redirect remove", "detour redirect show", "-to-port", "-ports", "-exclude-uid", "-exclude-mark", "-exclude-cidr"}},
	{[]string{"redirect", "install"}, []string{"detour redirect install", "-to-port", "-ports", "-exclude-uid", "-exclude-mark", "-exclude-cidr"}},
	{[]string{"redirect", "remove"}, []string{"detour redirect remove"}},
	{[]string{"redirect", "show"}, []string{"detour redirect show"}},
}

// `detour X --help`, `detour X -h` and `detour help X` print X's whole usage
// to stdout and exit 0, for every command and subcommand: help that was
// asked for is output, not an error.
func TestEveryCommandPrintsItsUsageOnHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range helpCases {
		for _, args := range [][]string{
			append(slices.Clone(tc.cmd), "--help"),
			append(slices.Clone(tc.cmd), "-h"),
			append([]string{"help"}, tc.cmd...),
		} {
			var out, errb bytes.Buffer
			err := run(context.Background(), args, &out, &errb)
			if err != nil {
				t.Errorf("detour %s = %v; want nil (exit 0)", strings.Join(args, " "), err)
			}
			if errb.Len() > 0 {
				t.Errorf("detour %s wrote to stderr:\n%s", strings.Join(args, " "), errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("detour %s: stdout lacks %q:\n%s", strings.Join(args, " "), w, out.String())
				}
			}
		}
	}
}

// Every command of the dispatcher has a row above, so that a new command
// cannot ship without its help being tested.
func TestHelpCasesCoverEveryCommand(t *testing.T) {
	t.Parallel()
	for name := range commands() {
		if !slices.ContainsFunc(helpCases, func(c struct {
			cmd  []string
			want []string
		}) bool {
			return c.cmd[0] == name
		}) {
			t.Errorf("command %q has no row in helpCases", name)
		}
	}
}

// `detour --help`, `-h` and `help` print the list of every command, not
// serve's flags (detour with no command runs serve).
func TestTopLevelHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err != nil {
			t.Errorf("detour %s = %v; want nil", args[0], err)
		}
		if errb.Len() > 0 {
			t.Errorf("detour %s wrote to stderr:\n%s", args[0], errb.String())
		}
		for name := range commands() {
			if !strings.Contains(out.String(), "detour "+name) && !strings.Contains(out.String(), "detour ["+name+"]") {
				t.Errorf("detour %s does not list %q:\n%s", args[0], name, out.String())
			}
		}
	}
}

// An unknown flag is a mistake: the error and the usage go to stderr,
// nothing to stdout, and the exit status is 2.
func TestEveryCommandRefusesAnUnknownFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range helpCases {
		args := append(slices.Clone(tc.cmd), "--no-such-flag")
		var out, errb bytes.Buffer
		err := run(context.Background(), args, &out, &errb)
		if !errors.Is(err, cli.ErrUsage) {
			t.Errorf("detour %s = %v; want a usage error (exit 2)", strings.Join(args, " "), err)
		}
		if out.Len() > 0 {
			t.Errorf("detour %s wrote to stdout:\n%s", strings.Join(args, " "), out.String())
		}
		if !strings.Contains(errb.String(), "no-such-flag") || !strings.Contains(errb.String(), "usage: detour "+tc.cmd[0]) {
			t.Errorf("detour %s: stderr names neither the flag nor the usage:\n%s", strings.Join(args, " "), errb.String())
		}
	}
}
