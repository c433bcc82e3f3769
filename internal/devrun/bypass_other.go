//go:build !linux

package devrun

// watchBypasses has nothing to watch with outside Linux: finding a process
// tree's sockets needs /proc. The summary says the check was not made.
func watchBypasses(int, bypassTargets, func(Bypass)) (stop func() []Bypass, unchecked string) {
	return func() []Bypass { return nil }, "the check needs Linux's /proc"
}
