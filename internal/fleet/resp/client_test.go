package resp

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// newClient is a client of r, closed at cleanup.
func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	c := New(o)
	t.Cleanup(func() { c.Close() })
	return c
}

func redisOptions(t *testing.T, r *testsupport.Redis) Options {
	t.Helper()
	o, err := ParseURL(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	o.Timeout = 5 * time.Second
	return o
}

// connCounter counts the connections a server accepted, less the ones
// its own INFO commands came on.
type connCounter struct {
	r     *testsupport.Redis
	infos int
}

func (c *connCounter) received(t *testing.T) int {
	t.Helper()
	s, err := c.r.Do("INFO", "stats")
	if err != nil {
		t.Fatal(err)
	}
	c.infos++
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			n, _ := strconv.Atoi(v)
			return n - c.infos
		}
	}
	t.Fatalf("no total_connections_received in INFO stats:\n%s", s)
	return 0
}

// recv waits, boundedly, for what ch delivers.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
		panic("unreachable")
	}
}

func mustDo(t *testing.T, c *Client, args ...any) Value {
	t.Helper()
	v, err := c.Do(context.Background(), args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// TestCommandsAndReplies: each reply type as fleet reads it, from a real
// server.
func TestCommandsAndReplies(t *testing.T) {
	t.Parallel()
	c := newClient(t, redisOptions(t, testsupport.StartRedis(t)))
	if v := mustDo(t, c, "SET", "k", "v"); v.Kind != KindSimple || v.Str != "OK" {
		t.Errorf("SET: %+v; want +OK", v)
	}
	if s, err := mustDo(t, c, "GET", "k").Text(); s != "v" || err != nil {
		t.Errorf("GET: %q, %v; want v", s, err)
	}
	if v := mustDo(t, c, "GET", "missing"); !v.IsNull() {
		t.Errorf("GET of a missing key: %+v; want null", v)
	}
	if _, err := mustDo(t, c, "GET", "missing").Float64(); !errors.Is(err, ErrNil) {
		t.Errorf("Float64 of null: %v; want ErrNil", err)
	}
	if n, err := mustDo(t, c, "EXISTS", "k", "missing").Int64(); n != 1 || err != nil {
		t.Errorf("EXISTS: %d, %v; want 1", n, err)
	}
	if f, err := mustDo(t, c, "INCRBYFLOAT", "f", 0.25).Float64(); f != 0.25 || err != nil {
		t.Errorf("INCRBYFLOAT: %v, %v; want 0.25", f, err)
	}
	mustDo(t, c, "RPUSH", "list", "a", "b", "")
	if v := mustDo(t, c, "LRANGE", "list", 0, -1); v.Kind != KindArray || len(v.Elems) != 3 || v.Elems[2].Str != "" || v.Elems[2].Kind != KindBulk {
		t.Errorf("LRANGE: %+v; want three bulk strings, the last empty", v)
	}
	_, err := c.Do(context.Background(), "INCR", "k")
	if !IsReply(err) || !strings.HasPrefix(err.Error(), "ERR ") {
		t.Errorf("INCR of a string: %v; want the ERR reply", err)
	}
	_, err = c.Do(context.Background(), "LPUSH", "k", "x")
	if !errors.Is(err, ErrWrongType) {
		t.Errorf("LPUSH on a string: %v; want WRONGTYPE", err)
	}
	vs, err := c.Pipeline(context.Background(), []any{"INCR", "n"}, []any{"INCR", "k"}, []any{"GET", "n"})
	if err != nil || len(vs) != 3 || vs[0].Int != 1 || vs[1].Err() == nil || vs[2].Str != "1" {
		t.Errorf("Pipeline: %+v, %v; want 1, an error reply, \"1\"", vs, err)
	}
}

// TestPoolReusesConnections: sequential commands share one connection, an
// error reply keeps it, and concurrent commands open at most PoolSize.
func TestPoolReusesConnections(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	o := redisOptions(t, r)
	o.PoolSize = 3
	c := newClient(t, o)
	conns := &connCounter{r: r}
	before := conns.received(t)
	for range 50 {
		mustDo(t, c, "INCR", "n")
		if _, err := c.Do(context.Background(), "HGET", "n", "f"); !errors.Is(err, ErrWrongType) {
			t.Fatalf("HGET of a string: %v; want WRONGTYPE", err)
		}
	}
	if n := conns.received(t) - before; n != 1 {
		t.Errorf("100 sequential commands, half of them refused, opened %d connections; want 1", n)
	}
	// An idle connection whose last deadline has passed (any that idled
	// longer than Timeout) is reused too.
	for range 3 {
		c.mu.Lock()
		for _, cn := range c.idle {
			_ = cn.nc.SetDeadline(aLongTimeAgo)
		}
		c.mu.Unlock()
		mustDo(t, c, "INCR", "n")
	}
	if n := conns.received(t) - before; n != 1 {
		t.Errorf("commands on a connection past its last deadline opened %d connections in all; want 1", n)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 20 {
				if _, err := c.Do(context.Background(), "INCR", "n"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := conns.received(t) - before; n > o.PoolSize {
		t.Errorf("20 concurrent callers opened %d connections; want at most PoolSize = %d", n, o.PoolSize)
	}
	if got, _ := mustDo(t, c, "GET", "n").Int64(); got != 453 {
		t.Errorf("n = %d; want 453", got)
	}
}

// TestServerRestartMidUse: pooled connections to a Redis that restarted are
// noticed before a command is sent on them, so the first command after the
// restart succeeds.
func TestServerRestartMidUse(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	c := newClient(t, redisOptions(t, r))
	var wg sync.WaitGroup
	for range 3 { // several idle connections
		wg.Go(func() { mustDo(t, c, "SET", "k", "before") })
	}
	wg.Wait()
	r.Restart()
	for i := range 5 {
		if v, err := c.Do(context.Background(), "GET", "k"); err != nil || !v.IsNull() {
			t.Fatalf("command %d after the restart: %+v, %v; want null (the restarted server is empty)", i, v, err)
		}
	}
	// And killed outright: the command fails (a network error, not a
	// reply), and the next one after the restart succeeds.
	r.Kill()
	if _, err := c.Do(context.Background(), "PING"); err == nil || IsReply(err) {
		t.Errorf("PING to a killed server: %v; want a network error", err)
	}
	r.Restart()
	if v := mustDo(t, c, "PING"); v.Str != "PONG" {
		t.Errorf("PING: %+v", v)
	}
}

// stalledListener accepts connections and reads from them, but never
// answers: a Redis that hangs. got receives what each connection read
// first.
func stalledListener(t *testing.T) (addr string, got <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 16)
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				buf := make([]byte, 4096)
				n, _ := c.Read(buf)
				select {
				case ch <- string(buf[:n]):
				default:
				}
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), ch
}

// TestTimeoutOnStalledServer: a server that never answers costs a command
// its timeout, or its context's deadline or cancellation, whichever comes
// first, and the connection is not reused.
func TestTimeoutOnStalledServer(t *testing.T) {
	t.Parallel()
	addr, got := stalledListener(t)
	c := newClient(t, Options{Addr: addr, Timeout: 50 * time.Millisecond, PoolSize: 1})
	_, err := c.Do(context.Background(), "GET", "k")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || IsReply(err) {
		t.Errorf("GET from a stalled server: %v; want a timeout", err)
	}
	if sent := recv(t, got, "command at the server"); sent != "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n" {
		t.Errorf("the server read %q", sent)
	}

	// A context deadline shorter than the timeout wins.
	slow := newClient(t, Options{Addr: addr, Timeout: time.Hour, PoolSize: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = slow.Do(ctx, "GET", "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GET under a context deadline: %v; want context.DeadlineExceeded", err)
	}
	recv(t, got, "command at the server")

	// Cancellation interrupts a command already sent. With PoolSize 1 the
	// next command can only run once the stalled connection is given up.
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := slow.Do(ctx, "GET", "k"); done <- err }()
	recv(t, got, "command at the server")
	cancel()
	if err := recv(t, done, "return from the cancelled command"); !errors.Is(err, context.Canceled) {
		t.Errorf("GET cancelled mid-command: %v; want context.Canceled", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	go func() { _, err := slow.Do(ctx, "GET", "again"); done <- err }()
	if sent := recv(t, got, "next command on a new connection"); !strings.Contains(sent, "again") {
		t.Errorf("the next command reached the server as %q", sent)
	}
	cancel()
	<-done
}

// TestPoolWaitHonoursContext: with every connection busy, a command waits
// for one only as long as its context allows.
func TestPoolWaitHonoursContext(t *testing.T) {
	t.Parallel()
	addr, got := stalledListener(t)
	c := newClient(t, Options{Addr: addr, Timeout: time.Hour, PoolSize: 1})
	hold, release := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _, _ = c.Do(hold, "GET", "k"); close(done) }()
	recv(t, got, "command at the server")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, "PING"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PING with the pool full: %v; want context.DeadlineExceeded", err)
	}
	release()
	<-done
}

// TestBrokenConnectionDiscarded: a connection whose reply did not come in
// time is closed, not reused: the late reply can never be read as another
// command's.
func TestBrokenConnectionDiscarded(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	o := redisOptions(t, r)
	o.Timeout, o.PoolSize = 100*time.Millisecond, 1
	c := newClient(t, o)
	// BLPOP blocks server-side for a second, longer than the timeout.
	_, err := c.Do(context.Background(), "BLPOP", "q", 1)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("BLPOP: %v; want a timeout", err)
	}
	if n, err := mustDo(t, c, "LPUSH", "q", "x").Int64(); n != 1 || err != nil {
		t.Errorf("LPUSH after the timeout: %d, %v; want 1 (a reused connection would read BLPOP's reply)", n, err)
	}
	if n, _ := mustDo(t, c, "LLEN", "q").Int64(); n != 1 {
		t.Errorf("LLEN: %d; want 1: the abandoned BLPOP took the element", n)
	}
}

// TestReplyTooLargeFromServer: a reply over MaxReply fails its command and
// its connection, not the client.
func TestReplyTooLargeFromServer(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	o := redisOptions(t, r)
	o.MaxReply = 1024
	c := newClient(t, o)
	mustDo(t, c, "SET", "big", strings.Repeat("x", 5000))
	if _, err := c.Do(context.Background(), "GET", "big"); !errors.Is(err, ErrReplyTooLarge) {
		t.Errorf("GET of 5,000 bytes with MaxReply 1,024: %v; want ErrReplyTooLarge", err)
	}
	if v := mustDo(t, c, "STRLEN", "big"); v.Int != 5000 {
		t.Errorf("STRLEN after: %+v; want 5000", v)
	}
}

// TestNoScriptFallback: Run sends EVALSHA, falls back to EVAL when the
// server does not have the script (first use, SCRIPT FLUSH), and the EVAL
// caches it for the next EVALSHA.
func TestNoScriptFallback(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	c := newClient(t, redisOptions(t, r))
	sc := NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	run := func(want int64) {
		t.Helper()
		v, err := sc.Run(context.Background(), c, []string{"n"}, 2)
		if err != nil || v.Int != want {
			t.Fatalf("Run: %+v, %v; want %d", v, err, want)
		}
	}
	calls := func() (evalsha, eval int) {
		t.Helper()
		cmds, err := r.Commands()
		if err != nil {
			t.Fatal(err)
		}
		return cmds["evalsha"], cmds["eval"]
	}
	run(2)
	run(4)
	if es, e := calls(); es != 2 || e != 1 {
		t.Errorf("two runs: %d EVALSHA, %d EVAL; want 2 and 1 (the first run finds no script)", es, e)
	}
	if sha, _ := r.Do("SCRIPT", "LOAD", `return redis.call('INCRBY', KEYS[1], ARGV[1])`); sha != sc.SHA() {
		t.Errorf("SHA %s; the server's is %s", sc.SHA(), sha)
	}
	if _, err := r.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	run(6)
	run(8)
	if es, e := calls(); es != 4 || e != 2 {
		t.Errorf("two more runs after SCRIPT FLUSH: %d EVALSHA, %d EVAL in all; want 4 and 2", es, e)
	}
	bad := NewScript(`return redis.call('LPUSH', KEYS[1], 'x')`)
	if _, err := bad.Run(context.Background(), c, []string{"n"}); !errors.Is(err, ErrWrongType) {
		t.Errorf("a script's error reply: %v; want WRONGTYPE", err)
	}
}

// TestAuthAndSelect: the password (with and without a user) and the
// database are sent on every new connection.
func TestAuthAndSelect(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	if _, err := r.Do("ACL", "SETUSER", "detour", "on", ">user-secret", "~*", "&*", "+@all"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do("CONFIG", "SET", "requirepass", "default-secret"); err != nil {
		t.Fatal(err)
	}
	o := redisOptions(t, r)
	if _, err := newClient(t, o).Do(context.Background(), "PING"); !errors.Is(err, ErrNoAuth) {
		t.Errorf("PING without a password: %v; want NOAUTH", err)
	}
	o.Password = "wrong"
	if _, err := newClient(t, o).Do(context.Background(), "PING"); !errors.Is(err, ErrWrongPass) {
		t.Errorf("PING with a wrong password: %v; want WRONGPASS", err)
	}
	o.Password = "default-secret"
	db0 := newClient(t, o)
	mustDo(t, db0, "SET", "k", "db0")

	u, err := ParseURL("redis://detour@" + r.Addr() + "/3")
	if err != nil {
		t.Fatal(err)
	}
	u.Password = "user-secret"
	db3 := newClient(t, u)
	if v := mustDo(t, db3, "GET", "k"); !v.IsNull() {
		t.Errorf("GET in db 3: %+v; want null (k is in db 0)", v)
	}
	mustDo(t, db3, "SET", "k", "db3")
	if who := mustDo(t, db3, "ACL", "WHOAMI"); who.Str != "detour" {
		t.Errorf("ACL WHOAMI: %+v; want detour", who)
	}
	if v := mustDo(t, db0, "GET", "k"); v.Str != "db0" {
		t.Errorf("GET in db 0: %+v; want db0", v)
	}
	// A new connection of the pool authenticates and selects too.
	vs := make(chan string, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { v, _ := db3.Do(context.Background(), "GET", "k"); vs <- v.Str })
	}
	wg.Wait()
	close(vs)
	for v := range vs {
		if v != "db3" {
			t.Errorf("GET on a pooled connection of db 3: %q; want db3", v)
		}
	}
}
