//go:build !linux

package testsupport

import "syscall"

// redisSysProcAttr: elsewhere a test's cleanup is the only stop.
func redisSysProcAttr() *syscall.SysProcAttr { return nil }
