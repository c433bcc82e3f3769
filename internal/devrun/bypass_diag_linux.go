//go:build linux

package devrun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sockDiagByFamily is SOCK_DIAG_BY_FAMILY (linux/sock_diag.h).
const sockDiagByFamily = 20

// inetDiagMsgLen is the size of struct inet_diag_msg (linux/inet_diag.h).
const inetDiagMsgLen = 72

// tcpConn is one TCP socket's state and ends, as a scan needs them.
type tcpConn struct {
	state         string // as /proc/net/tcp prints it: tcpEstablished, tcpSynSent, tcpListen
	local, remote netip.AddrPort
}

// diagTCP asks the kernel, over a NETLINK_INET_DIAG socket, for every TCP
// socket of detour's own network namespace that is opening, open or
// listening, by inode. The kernel filters by state, and the answer is binary: on a large
// machine this costs a fraction of reading /proc/net/tcp and tcp6, whose
// text the kernel writes for every socket.
func diagTCP() (map[string]tcpConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_INET_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	// Bounded: a kernel that never answers must not stall the watcher.
	tv := unix.NsecToTimeval(time.Second.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	conns := map[string]tcpConn{}
	buf := make([]byte, 64<<10)
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		// struct nlmsghdr, then struct inet_diag_req_v2: family,
		// protocol, ext, pad, states (a bit per state), and an id that
		// is all zero (every socket).
		req := make([]byte, unix.NLMSG_HDRLEN+56)
		binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
		binary.NativeEndian.PutUint16(req[4:], sockDiagByFamily)
		binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
		req[16], req[17] = family, unix.IPPROTO_TCP
		binary.NativeEndian.PutUint32(req[20:], 1<<unix.BPF_TCP_ESTABLISHED|1<<unix.BPF_TCP_SYN_SENT|1<<unix.BPF_TCP_LISTEN)
		if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		if err := readDiag(fd, buf, conns); err != nil {
			return nil, err
		}
	}
	return conns, nil
}

// readDiag reads one dump's answers into conns.
func readDiag(fd int, buf []byte, conns map[string]tcpConn) error {
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("sock_diag: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					return fmt.Errorf("sock_diag: %w", syscall.Errno(-int32(binary.NativeEndian.Uint32(m.Data))))
				}
				return errors.New("sock_diag: error")
			}
			if len(m.Data) < inetDiagMsgLen {
				continue
			}
			d := m.Data
			// struct inet_diag_sockid: sport, dport (big-endian), src,
			// dst (16 bytes each, an IPv4 address in the first 4).
			addr := func(b []byte) netip.Addr {
				if d[0] == unix.AF_INET {
					return netip.AddrFrom4([4]byte(b[:4]))
				}
				return netip.AddrFrom16([16]byte(b[:16])).Unmap()
			}
			state := tcpEstablished
			switch d[1] {
			case unix.BPF_TCP_SYN_SENT:
				state = tcpSynSent
			case unix.BPF_TCP_LISTEN:
				state = tcpListen
			}
			inode := strconv.FormatUint(uint64(binary.NativeEndian.Uint32(d[68:72])), 10)
			conns[inode] = tcpConn{
				state:  state,
				local:  netip.AddrPortFrom(addr(d[8:24]), binary.BigEndian.Uint16(d[4:6])),
				remote: netip.AddrPortFrom(addr(d[24:40]), binary.BigEndian.Uint16(d[6:8])),
			}
		}
	}
}
