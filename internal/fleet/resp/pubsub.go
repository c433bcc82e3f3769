package resp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Defaults of SubscribeOptions.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
	// DefaultSubscribeTimeout bounds a subscription's connect, its
	// confirmations and the answer to its PING. No request waits on a
	// subscription, so the bound only has to tell a server that is gone
	// from one that is slow (or a machine that is busy): unlike a command's
	// timeout, it is not the policy's.
	DefaultSubscribeTimeout = 10 * time.Second
	// DefaultPingEvery: a subscription that has received nothing for this
	// long sends PING, and reconnects when no answer comes within its
	// Timeout. Without it a connection that died without a FIN or
	// RST (a node gone, a NAT that forgot it) would wait for messages
	// forever, and every event published meanwhile would be lost.
	DefaultPingEvery = 30 * time.Second
	// DefaultBuffer is how many messages wait for a slow reader before
	// the subscription stops reading the connection.
	DefaultBuffer = 256
)

// SubscribeOptions configure a subscription.
type SubscribeOptions struct {
	// Channels are SUBSCRIBEd to on every connection.
	Channels []string
	// Notify, when set, is called by the subscription's goroutine at each
	// change: with nil once every channel is subscribed (the first time
	// and after each reconnect), with the error when connecting or
	// subscribing failed or the connection was lost. It must not block.
	Notify func(err error)
	// MinBackoff and MaxBackoff bound the wait before a reconnect, which
	// doubles from MinBackoff after each failure (with jitter) and starts
	// over once a subscription is confirmed. Defaults DefaultMinBackoff
	// and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// PingEvery: DefaultPingEvery when 0.
	PingEvery time.Duration
	// Timeout: DefaultSubscribeTimeout when 0.
	Timeout time.Duration
	// Buffer: DefaultBuffer when 0.
	Buffer int
}

// Message is one published message.
type Message struct {
	Channel string
	Payload string
}

// PubSub is a subscription on a connection of its own (not the pool's),
// kept up by one goroutine: when the connection drops it reconnects, with
// backoff, and subscribes again. Messages published while it was not
// subscribed are not delivered (Redis keeps none); a caller that must not
// miss state reads it back after each Notify(nil).
type PubSub struct {
	c    *Client
	opts SubscribeOptions
	msgs chan Message

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	nc net.Conn // the current connection, closed by Close
}

// Subscribe starts a subscription to opts.Channels.
func (c *Client) Subscribe(opts SubscribeOptions) *PubSub {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.PingEvery <= 0 {
		opts.PingEvery = DefaultPingEvery
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultSubscribeTimeout
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	ps := &PubSub{c: c, opts: opts, msgs: make(chan Message, opts.Buffer), done: make(chan struct{})}
	ps.ctx, ps.cancel = context.WithCancel(context.Background())
	go ps.run()
	return ps
}

// Messages delivers the messages in the order received; it is closed
// after Close.
func (ps *PubSub) Messages() <-chan Message { return ps.msgs }

// Close ends the subscription and its connection, and waits for its
// goroutine.
func (ps *PubSub) Close() error {
	ps.cancel()
	ps.mu.Lock()
	if ps.nc != nil {
		ps.nc.Close()
	}
	ps.mu.Unlock()
	<-ps.done
	return nil
}

func (ps *PubSub) run() {
	defer close(ps.done)
	defer close(ps.msgs)
	backoff := ps.opts.MinBackoff
	for {
		subscribed, err := ps.session()
		if ps.ctx.Err() != nil {
			return
		}
		if ps.opts.Notify != nil {
			ps.opts.Notify(err)
		}
		if subscribed {
			backoff = ps.opts.MinBackoff
		}
		// Full jitter over the upper half, so that a fleet that lost its
		// Redis at once does not come back in lockstep.
		wait := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ps.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, ps.opts.MaxBackoff)
	}
}

var errNoPong = errors.New("resp: subscription: no answer to PING")

// session connects, subscribes and delivers messages until the connection
// fails; subscribed says whether it got that far.
func (ps *PubSub) session() (subscribed bool, err error) {
	o := ps.c.opts
	dctx, cancel := context.WithTimeout(ps.ctx, ps.opts.Timeout)
	cn, err := dialConn(dctx, o)
	cancel()
	if err != nil {
		return false, fmt.Errorf("resp: %s: %w", o.Addr, err)
	}
	ps.mu.Lock()
	if ps.ctx.Err() != nil {
		ps.mu.Unlock()
		cn.nc.Close()
		return false, ps.ctx.Err()
	}
	ps.nc = cn.nc
	ps.mu.Unlock()
	defer func() {
		ps.mu.Lock()
		ps.nc = nil
		ps.mu.Unlock()
		cn.nc.Close()
	}()

	args := make([]any, 0, 1+len(ps.opts.Channels))
	args = append(args, "SUBSCRIBE")
	for _, ch := range ps.opts.Channels {
		args = append(args, ch)
	}
	if err := ps.send(cn, args...); err != nil {
		return false, err
	}
	want := map[string]bool{}
	for _, ch := range ps.opts.Channels {
		want[ch] = true
	}
	for len(want) > 0 {
		_ = cn.nc.SetReadDeadline(time.Now().Add(ps.opts.Timeout))
		v, err := cn.r.Read()
		if err != nil {
			return false, fmt.Errorf("resp: %s: subscribing: %w", o.Addr, err)
		}
		if v.Kind == KindError {
			return false, fmt.Errorf("resp: SUBSCRIBE: %w", v.Err())
		}
		switch kind, ch, ok := push(v); {
		case ok && kind == "subscribe":
			delete(want, ch)
		case ok && kind == "message" && len(v.Elems) == 3:
			// Published on a channel confirmed before the others were.
			if !ps.deliver(Message{Channel: ch, Payload: v.Elems[2].Str}) {
				return false, ps.ctx.Err()
			}
		}
	}
	if ps.opts.Notify != nil {
		ps.opts.Notify(nil)
	}

	pinged := false
	for {
		// Wait for the first byte of a reply with the idle bound; once one
		// has started, all of it must come within the subscription's Timeout.
		idle := ps.opts.PingEvery
		if pinged {
			idle = ps.opts.Timeout
		}
		_ = cn.nc.SetReadDeadline(time.Now().Add(idle))
		if err := cn.r.wait(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged && ps.ctx.Err() == nil {
				if err := ps.send(cn, "PING"); err != nil {
					return true, err
				}
				pinged = true
				continue
			}
			if pinged && errors.As(err, &ne) && ne.Timeout() {
				err = errNoPong
			}
			return true, fmt.Errorf("resp: %s: subscription: %w", o.Addr, err)
		}
		_ = cn.nc.SetReadDeadline(time.Now().Add(ps.opts.Timeout))
		v, err := cn.r.Read()
		if err != nil {
			return true, fmt.Errorf("resp: %s: subscription: %w", o.Addr, err)
		}
		pinged = false // anything received shows the connection is alive
		kind, ch, ok := push(v)
		if !ok || kind != "message" || len(v.Elems) != 3 {
			continue // pong, a confirmation, anything else
		}
		if !ps.deliver(Message{Channel: ch, Payload: v.Elems[2].Str}) {
			return true, ps.ctx.Err()
		}
	}
}

// deliver hands m to the reader; false once the subscription is closed.
func (ps *PubSub) deliver(m Message) bool {
	select {
	case ps.msgs <- m:
		return true
	case <-ps.ctx.Done():
		return false
	}
}

// send writes one command on a subscription's connection.
func (ps *PubSub) send(cn *conn, args ...any) error {
	cn.buf, _ = AppendCommand(cn.buf[:0], args...)
	_ = cn.nc.SetWriteDeadline(time.Now().Add(ps.opts.Timeout))
	if _, err := cn.nc.Write(cn.buf); err != nil {
		return fmt.Errorf("resp: %s: %w", ps.c.opts.Addr, err)
	}
	return nil
}

// push reads a subscription's reply: an array whose first two elements
// are its kind (message, subscribe, pong, ...) and a channel.
func push(v Value) (kind, channel string, ok bool) {
	if v.Kind != KindArray || len(v.Elems) < 2 {
		return "", "", false
	}
	return v.Elems[0].Str, v.Elems[1].Str, true
}
