package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// Defaults of Options.
const (
	// DefaultTimeout bounds a command's write and read when
	// Options.Timeout is 0.
	DefaultTimeout = 3 * time.Second
	// DefaultMaxIdleTime: an idle connection older than this is closed
	// rather than reused (a load balancer or NAT in between may have
	// forgotten it without a word).
	DefaultMaxIdleTime = 30 * time.Minute
)

// Options configure a Client.
type Options struct {
	// Addr is host:port.
	Addr string
	// TLS, when set, wraps every connection (rediss://). ParseURL fills
	// it with the system roots and the URL's host as ServerName.
	TLS *tls.Config
	// Username and Password are sent with AUTH on every new connection
	// (AUTH user pass with a Username, AUTH pass without); no AUTH when
	// Password is empty.
	Username, Password string
	// DB is SELECTed on every new connection when not 0.
	DB int
	// Timeout bounds each command's write and its reply's read (and each
	// handshake command's); a context's earlier deadline wins. Default
	// DefaultTimeout.
	Timeout time.Duration
	// DialTimeout bounds a new connection's TCP connect, TLS handshake
	// and AUTH/SELECT. Default Timeout.
	DialTimeout time.Duration
	// PoolSize bounds the connections open at once for commands (a
	// subscription has its own); a command waits for one to be free, as
	// long as its context lets it. Default 10 per GOMAXPROCS.
	PoolSize int
	// MaxIdleTime: DefaultMaxIdleTime when 0.
	MaxIdleTime time.Duration
	// MaxReply is a reply's byte budget: a larger one fails the command
	// (ErrReplyTooLarge) and closes its connection. Default
	// DefaultMaxReply.
	MaxReply int
}

// ParseURL reads redis://[[user][:password]@]host[:port][/db] and rediss://
// (the same over TLS, verified with the system roots against host). The
// port defaults to 6379, the host to localhost, the database to 0.
func ParseURL(raw string) (Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Options{}, err
	}
	var o Options
	switch u.Scheme {
	case "redis":
	case "rediss":
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	default:
		return Options{}, fmt.Errorf("scheme %q: want redis:// or rediss://", u.Scheme)
	}
	if u.Opaque != "" {
		return Options{}, fmt.Errorf("%q is not a redis URL", raw)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "6379"
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return Options{}, fmt.Errorf("invalid port %q", port)
	}
	o.Addr = net.JoinHostPort(host, port)
	if o.TLS != nil {
		o.TLS.ServerName = host
	}
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	if p := u.Path; p != "" && p != "/" {
		db, err := strconv.Atoi(p[1:])
		if err != nil || db < 0 || strconv.Itoa(db) != p[1:] {
			return Options{}, fmt.Errorf("path %q: want a database number", p)
		}
		o.DB = db
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return Options{}, fmt.Errorf("%q: no query or fragment is understood", raw)
	}
	return o, nil
}

// ErrClosed is what a command on a closed Client returns.
var ErrClosed = errors.New("resp: client closed")

// Client sends commands to one Redis server over a bounded pool of
// connections. Safe for concurrent use.
type Client struct {
	opts Options
	// sem holds a token per connection in use or being dialed, so that
	// at most PoolSize are open; waiting for one is waiting for the pool.
	sem chan struct{}

	mu     sync.Mutex
	idle   []*conn // most recently used last
	closed bool
}

// conn is one connection and its buffers.
type conn struct {
	nc        net.Conn
	r         *Reader
	live      *liveness
	interrupt func() // ends a blocked read or write at once; made once
	buf       []byte // the commands of a round trip, written at once; reused
	idleSince time.Time
}

// New returns a Client; it connects on the first command.
func New(opts Options) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = opts.Timeout
	}
	if opts.PoolSize <= 0 {
		opts.PoolSize = 10 * runtime.GOMAXPROCS(0)
	}
	if opts.MaxIdleTime <= 0 {
		opts.MaxIdleTime = DefaultMaxIdleTime
	}
	if opts.MaxReply <= 0 {
		opts.MaxReply = DefaultMaxReply
	}
	return &Client{opts: opts, sem: make(chan struct{}, opts.PoolSize)}
}

// Close closes the idle connections; one in use is closed when its
// command ends. Commands after Close return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	idle := c.idle
	c.idle, c.closed = nil, true
	c.mu.Unlock()
	for _, cn := range idle {
		cn.nc.Close()
	}
	return nil
}

// Do sends one command and reads its reply. An error reply is returned as
// an *Error (errors.Is it with ErrNoScript and the others); any other error
// means no reply was read (the connection is then discarded). A null reply
// is a value (IsNull), not an error.
func (c *Client) Do(ctx context.Context, args ...any) (Value, error) {
	var v [1]Value
	if err := c.roundTrip(ctx, [][]any{args}, v[:]); err != nil {
		return Value{}, err
	}
	if v[0].Kind == KindError {
		return Value{}, v[0].Err()
	}
	return v[0], nil
}

// Pipeline sends cmds in one write and reads their replies in one round
// trip. The error is for the round trip (no reply, or not all of them,
// could be read); an error reply to one command is that command's
// KindError value (Value.Err).
func (c *Client) Pipeline(ctx context.Context, cmds ...[]any) ([]Value, error) {
	vs := make([]Value, len(cmds))
	if err := c.roundTrip(ctx, cmds, vs); err != nil {
		return nil, err
	}
	return vs, nil
}

// roundTrip writes cmds on one pooled connection and reads len(cmds)
// replies into out, within the command timeout (per round trip) and ctx.
func (c *Client) roundTrip(ctx context.Context, cmds [][]any, out []Value) (err error) {
	cn, err := c.get(ctx)
	if err != nil {
		return err
	}
	broken := true
	defer func() { c.put(cn, broken) }()
	cn.buf = cn.buf[:0]
	for _, args := range cmds {
		if cn.buf, err = AppendCommand(cn.buf, args...); err != nil {
			broken = false // nothing was sent
			return err
		}
	}
	stop := c.bound(ctx, cn)
	err = exchange(cn, cmds, out)
	interrupted := !stop()
	switch {
	case err != nil && ended(ctx) != nil:
		return fmt.Errorf("resp: %s: %w (%v)", c.opts.Addr, ended(ctx), err)
	case err != nil:
		return fmt.Errorf("resp: %s: %w", c.opts.Addr, err)
	}
	// A context that ended after the reply was read moved (or is about
	// to move) the connection's deadline: closed rather than reused, so
	// that the move cannot land on the next command.
	broken = interrupted
	return nil
}

func exchange(cn *conn, cmds [][]any, out []Value) error {
	if _, err := cn.nc.Write(cn.buf); err != nil {
		return err
	}
	for i := range cmds {
		v, err := cn.r.Read()
		if err != nil {
			return err
		}
		out[i] = v
	}
	return nil
}

// ended is ctx's error, or DeadlineExceeded once its deadline has passed
// even if its timer has not fired yet: the connection's deadline, set to
// the same instant, can end a read first.
func ended(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// aLongTimeAgo is a deadline that makes a blocked read or write return at
// once.
var aLongTimeAgo = time.Unix(1, 0)

// bound sets cn's deadline to the command timeout or ctx's deadline,
// whichever is first, and makes ctx's end interrupt cn. stop reports
// whether ctx did not interrupt; no goroutine runs unless ctx ends.
func (c *Client) bound(ctx context.Context, cn *conn) (stop func() bool) {
	deadline := time.Now().Add(c.opts.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = cn.nc.SetDeadline(deadline)
	if ctx.Done() == nil {
		return never
	}
	return context.AfterFunc(ctx, cn.interrupt)
}

// never is the stop of a context that cannot end.
func never() bool { return true }

// get takes an idle connection that is still open, or dials one, once the
// pool has room.
func (c *Client) get(ctx context.Context) (*conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("resp: %w", context.Cause(ctx))
	}
	select {
	case c.sem <- struct{}{}:
	default:
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("resp: waiting for a pooled connection: %w", context.Cause(ctx))
		}
	}
	now := time.Now()
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			<-c.sem
			return nil, ErrClosed
		}
		n := len(c.idle)
		if n == 0 {
			c.mu.Unlock()
			break
		}
		cn := c.idle[n-1]
		c.idle[n-1] = nil
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		// A connection the server closed while it was idle (a restart, a
		// CLIENT KILL, the server's idle timeout) is found here rather
		// than by failing the command sent on it. The last command's
		// deadline has likely passed, and a read past its deadline fails
		// before it looks at the socket: cleared first.
		_ = cn.nc.SetReadDeadline(time.Time{})
		if now.Sub(cn.idleSince) < c.opts.MaxIdleTime && cn.r.Buffered() == 0 && cn.live.alive() {
			return cn, nil
		}
		cn.nc.Close()
	}
	cn, err := c.dial(ctx)
	if err != nil {
		<-c.sem
		return nil, err
	}
	return cn, nil
}

// put gives a connection back: to the idle list, or closed when broken or
// the client is closed.
func (c *Client) put(cn *conn, broken bool) {
	if !broken {
		cn.idleSince = time.Now()
		c.mu.Lock()
		if !c.closed {
			c.idle = append(c.idle, cn)
			c.mu.Unlock()
			<-c.sem
			return
		}
		c.mu.Unlock()
	}
	cn.nc.Close()
	<-c.sem
}

// dial opens a connection: TCP, TLS, AUTH and SELECT, all within
// DialTimeout and ctx.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	cn, err := dialConn(ctx, c.opts)
	if err != nil {
		return nil, fmt.Errorf("resp: %s: %w", c.opts.Addr, err)
	}
	return cn, nil
}

// dialConn connects and authenticates; ctx bounds it all.
func dialConn(ctx context.Context, o Options) (*conn, error) {
	d := net.Dialer{KeepAlive: 15 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", o.Addr)
	if err != nil {
		return nil, err
	}
	if o.TLS != nil {
		tc := tls.Client(nc, o.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	cn := &conn{nc: nc, r: NewReader(nc, o.MaxReply), live: newLiveness(nc)}
	cn.interrupt = func() { _ = nc.SetDeadline(aLongTimeAgo) }
	var handshake [][]any
	switch {
	case o.Password != "" && o.Username != "":
		handshake = append(handshake, []any{"AUTH", o.Username, o.Password})
	case o.Password != "":
		handshake = append(handshake, []any{"AUTH", o.Password})
	}
	if o.DB != 0 {
		handshake = append(handshake, []any{"SELECT", o.DB})
	}
	if len(handshake) == 0 {
		return cn, nil
	}
	for _, args := range handshake {
		cn.buf, _ = AppendCommand(cn.buf, args...)
	}
	deadline, _ := ctx.Deadline()
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
	out := make([]Value, len(handshake))
	err = exchange(cn, handshake, out)
	stop()
	if err == nil {
		for i, v := range out {
			if v.Kind == KindError {
				err = fmt.Errorf("%s: %w", handshake[i][0], v.Err())
				break
			}
		}
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return cn, nil
}
