package testsupport

import (
	"os"
	"strings"
)

// ChildGORACE is the GORACE entry for a process a test starts from its own
// binary (a helper role selected by an environment variable): the
// environment's GORACE options with atexit_sleep_ms=0 after them. Under
// -race every process sleeps a second at exit so that racing goroutines can
// report; a child the test waits for would make the test pay that second
// each time, and the parent's own exit still waits. Race reports and the
// exit status are unchanged. Without -race the variable is ignored.
func ChildGORACE() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// ChildEnv is this process's environment with extra and ChildGORACE
// appended, for a child started from the test binary. A later entry wins
// over an earlier one of the same name (os/exec keeps the last).
func ChildEnv(extra ...string) []string {
	env := append(os.Environ(), extra...)
	return append(env, ChildGORACE())
}
