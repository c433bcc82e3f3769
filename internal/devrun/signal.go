package devrun

import (
	"os"
)

// forwarder passes the signals detour receives on to CMD.
type forwarder struct {
	child *os.Process
	// delivered reports whether the terminal has already delivered sig to
	// the child itself; keyboardDelivered in production, a stub in tests.
	delivered func(sig os.Signal, pid int) bool
}

// forward sends sig to the child unless the terminal already did, and
// reports whether it sent it.
//
// Why the exception: CMD runs in detour's process group, so that an
// interactive CMD can read the terminal and Ctrl-Z stops detour and CMD
// together. The price is that Ctrl-C (SIGINT) and Ctrl-\ (SIGQUIT) reach CMD
// straight from the terminal as well as detour; forwarding them again would
// deliver them twice, and many programs take a second Ctrl-C as "quit now,
// skip the clean shutdown". uv's `uv run` met the same problem and settled on
// the same kind of check (astral-sh/uv#13925).
func (f *forwarder) forward(sig os.Signal) bool {
	if f.delivered != nil && f.delivered(sig, f.child.Pid) {
		return false
	}
	// An error means the child has exited: nothing left to tell.
	return f.child.Signal(sig) == nil
}
