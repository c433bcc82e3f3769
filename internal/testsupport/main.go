package testsupport

import (
	"os"
	"testing"
)

// Main is every test binary's TestMain: it runs m's tests and exits with
// their status. Under -race it ends without the race runtime's one-second
// sleep at exit when nothing the tests started is still running (see
// exitAfterTests in main_race.go); without -race it is os.Exit(m.Run()).
func Main(m *testing.M) {
	before := goroutineIDs()
	code := m.Run()
	if code != 0 || testing.CoverMode() != "" {
		// A failing run does not sleep at exit anyway, and coverage is
		// written by exit hooks that only os.Exit runs.
		os.Exit(code)
	}
	exitAfterTests(before)
}
