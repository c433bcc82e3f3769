package testsupport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RedisServerPath is the redis-server the tests start (Debian's package;
// .ci/run installs it).
const RedisServerPath = "/usr/bin/redis-server"

// Redis is a redis-server a test started on a free loopback port, with no
// persistence: a restart comes back empty, like a Redis that lost its data.
type Redis struct {
	tb   testing.TB
	port int
	dir  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// StartRedis starts a redis-server for the test and stops it at cleanup.
// Without the binary the test is skipped, unless CI is set, where that is
// a failure. redis-server cannot be told to pick its own port (--port 0
// turns TCP off), so a free port is found by listening on 127.0.0.1:0 and
// closing; another process can take it in between, so a start that does
// not answer PING is retried on a new port.
func StartRedis(tb testing.TB) *Redis {
	tb.Helper()
	if _, err := os.Stat(RedisServerPath); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is missing (.ci/run installs Debian's redis-server): %v", RedisServerPath, err)
		}
		tb.Skipf("%s is missing (apt-get install redis-server); skipping", RedisServerPath)
	}
	r := &Redis{tb: tb, dir: tb.TempDir()}
	var err error
	for range 5 {
		var l net.Listener
		l, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		r.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		if err = r.start(); err == nil {
			tb.Cleanup(r.Kill)
			return r
		}
	}
	tb.Fatalf("redis-server did not start: %v", err)
	return nil
}

// start runs redis-server on r.port and waits for it to answer PING.
func (r *Redis) start() error {
	cmd := exec.Command(RedisServerPath, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--daemonize", "no", "--loglevel", "warning")
	var out SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = redisSysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	up := Poll(10*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		_, err := r.Do("PING")
		return err == nil
	})
	select {
	case <-exited:
		return fmt.Errorf("redis-server exited: %s", out.String())
	default:
	}
	if !up {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("redis-server on port %d did not answer PING: %s", r.port, out.String())
	}
	r.mu.Lock()
	r.cmd = cmd
	r.mu.Unlock()
	go func() { <-exited; r.mu.Lock(); r.cmd = nil; r.mu.Unlock() }()
	return nil
}

// Addr is host:port.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// URL is redis://host:port.
func (r *Redis) URL() string { return "redis://" + r.Addr() }

// Kill stops the server at once (SIGKILL) and waits for it to be gone.
func (r *Redis) Kill() {
	r.mu.Lock()
	cmd := r.cmd
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	Poll(10*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.cmd == nil
	})
}

// Restart starts the server again on the same port, empty.
func (r *Redis) Restart() {
	r.tb.Helper()
	r.Kill()
	var err error
	// The port was just freed; retry briefly in case the old socket lingers.
	Poll(10*time.Second, func() bool { err = r.start(); return err == nil })
	if err != nil {
		r.tb.Fatalf("redis-server did not restart: %v", err)
	}
}

// Do sends one command and returns its reply: a simple or bulk string as
// is, an integer in decimal, an array's elements joined by newlines.
func (r *Redis) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", r.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

func readReply(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		parts := make([]string, 0, max(n, 0))
		for range n {
			p, err := readReply(br)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// Commands is how many commands the server ran since start or the last
// CONFIG RESETSTAT, by name (lower case), from INFO commandstats; the INFO
// and CONFIG commands the test itself sends are left out.
func (r *Redis) Commands() (map[string]int, error) {
	s, err := r.Do("INFO", "commandstats")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.Atoi(calls)
		if name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		out[name] = n
	}
	return out, nil
}
