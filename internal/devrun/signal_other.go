//go:build !(linux || darwin)

package devrun

import (
	"os"
)

// ForwardedSignals are the signals `detour run` passes on to CMD. Outside
// Linux and macOS only an interrupt is portable.
var ForwardedSignals = []os.Signal{os.Interrupt}

// keyboardDelivered is false: without process groups to inspect, every
// signal is passed on.
func keyboardDelivered(os.Signal, int) bool { return false }

// terminate stops the child; there is no portable polite request.
func terminate(p *os.Process) { _ = p.Kill() }

// exitCode is the child's exit status.
func exitCode(ps *os.ProcessState) int { return ps.ExitCode() }

// signalNumber returns 2, SIGINT's number, for a 128+N exit status.
func signalNumber(os.Signal) int { return 2 }
