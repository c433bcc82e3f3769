package testsupport

import "syscall"

// redisSysProcAttr makes the kernel kill a test's redis-server when the
// test process dies without its cleanup (a crash, a timeout's panic), so
// that no server outlives the test binary.
func redisSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
