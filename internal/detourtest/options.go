package detourtest

import (
	"time"

	"github.com/detour-proxy/detour/proxy"
)

// Options are what StartWith sets on the detour it runs (proxy.Options of
// the same names).
type Options struct {
	// Now is the runner's clock (cooldowns, breakers, the windows of
	// scored selections); nil is the real clock.
	Now func() time.Time
	// Rand draws weighted selections; nil is math/rand/v2.
	Rand func() uint64
	// With may change the other options detour is started with (a
	// listener handed over, as `detour run` does).
	With []func(*proxy.Options)
}
