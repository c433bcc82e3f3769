//go:build linux || darwin

package devrun

import (
	"os"
	"syscall"
	"unsafe"
)

// ForwardedSignals are the signals `detour run` passes on to CMD: the ones
// that ask a process to stop (SIGINT, SIGTERM, SIGQUIT), that a terminal
// sends when it goes away (SIGHUP; also a common "reload" request), and the
// two left to applications (SIGUSR1, SIGUSR2).
var ForwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// keyboardDelivered reports whether a SIGINT or SIGQUIT most likely came
// from the terminal's keyboard and so reached the child directly: the child
// is in detour's process group and that group is the terminal's foreground
// group, to which the terminal sends Ctrl-C and Ctrl-\. A `kill -INT` aimed
// at detour alone while it runs in the foreground is then not forwarded;
// Go's os/signal does not tell the sender, so that case cannot be told apart.
func keyboardDelivered(sig os.Signal, pid int) bool {
	if sig != syscall.SIGINT && sig != syscall.SIGQUIT {
		return false
	}
	pgrp, err := syscall.Getpgid(pid)
	if err != nil || pgrp != syscall.Getpgrp() {
		// The child has exited, or moved to a group of its own (some
		// programs do): the terminal's signal did not reach it.
		return false
	}
	fg, ok := terminalForeground()
	return ok && fg == pgrp
}

// terminalForeground returns the foreground process group of detour's
// controlling terminal; ok is false when there is none (CI, a service).
func terminalForeground() (pgrp int, ok bool) {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return 0, false
	}
	defer tty.Close()
	// tcgetpgrp(3) is this ioctl; the standard library has no wrapper, and
	// golang.org/x/sys is not worth a direct dependency for one call.
	var fg int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, tty.Fd(), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&fg))); errno != 0 {
		return 0, false
	}
	return int(fg), true
}

// terminate asks the child to stop, the way a supervisor does.
func terminate(p *os.Process) { _ = p.Signal(syscall.SIGTERM) }

// exitCode is the child's status as a shell reports it: 128+N when signal N
// killed it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalNumber returns sig's number, for a 128+N exit status.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return int(syscall.SIGINT)
}
