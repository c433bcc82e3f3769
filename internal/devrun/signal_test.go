//go:build linux || darwin

package devrun

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// A keyboard signal the terminal already delivered to the child is not sent
// again; every other signal is.
func TestForwarderSkipsWhatTheTerminalDelivered(t *testing.T) {
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	var asked []os.Signal
	fw := &forwarder{child: child.Process, delivered: func(sig os.Signal, pid int) bool {
		if pid != child.Process.Pid {
			t.Errorf("asked about pid %d; want the child's %d", pid, child.Process.Pid)
		}
		asked = append(asked, sig)
		return sig == syscall.SIGINT
	}}
	if fw.forward(syscall.SIGINT) {
		t.Error("SIGINT the terminal delivered was sent again")
	}
	if !fw.forward(syscall.SIGUSR1) {
		// sleep dies of SIGUSR1: proof that it was sent.
		t.Error("SIGUSR1 was not sent")
	}
	st, _ := child.Process.Wait()
	if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGUSR1 {
		t.Errorf("child ended with %v; want killed by SIGUSR1", st)
	}
	if len(asked) != 2 {
		t.Errorf("delivered was asked %d times; want 2", len(asked))
	}
}

// keyboardDelivered only ever claims SIGINT and SIGQUIT, and never for a
// child outside detour's process group.
func TestKeyboardDeliveredOnlyForKeyboardSignalsInOurGroup(t *testing.T) {
	own := exec.Command("sleep", "30")
	own.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Process.Kill(); _ = own.Wait() })
	if keyboardDelivered(syscall.SIGINT, own.Process.Pid) {
		t.Error("SIGINT counted as delivered to a child in a process group of its own")
	}
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2} {
		if keyboardDelivered(sig, os.Getpid()) {
			t.Errorf("%v counted as delivered by the terminal", sig)
		}
	}
}
