//go:build !race

package testsupport

import "os"

// goroutineIDs is only needed under -race.
func goroutineIDs() map[string]bool { return nil }

// exitAfterTests is os.Exit(0): without -race there is no exit sleep.
func exitAfterTests(map[string]bool) { os.Exit(0) }
