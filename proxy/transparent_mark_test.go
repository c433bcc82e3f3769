//go:build linux

package proxy

import (
	"net"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// markSocket sets transparent.mark as SO_MARK on a socket before it
// connects, which is what --exclude-mark matches.
func TestMarkSocketSetsTheMark(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("skipped: setting SO_MARK needs CAP_NET_ADMIN (CI runs as root)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error { return markSocket(rc, 0x1e7) }}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, _ := c.(*net.TCPConn).SyscallConn()
	var mark int
	var gerr error
	_ = rc.Control(func(fd uintptr) { mark, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK) })
	if gerr != nil || mark != 0x1e7 {
		t.Errorf("SO_MARK = %#x, %v; want 0x1e7", mark, gerr)
	}
}
