package resp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// subscription subscribes c to channels and gives what Notify reported.
func subscription(t *testing.T, c *Client, o SubscribeOptions) (*PubSub, <-chan error) {
	t.Helper()
	notes := make(chan error, 256)
	o.Notify = func(err error) {
		select {
		case notes <- err:
		default: // a test that stopped listening must not block the subscription
		}
	}
	if o.MinBackoff == 0 {
		o.MinBackoff, o.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	}
	ps := c.Subscribe(o)
	t.Cleanup(func() { ps.Close() })
	return ps, notes
}

// waitSubscribed waits for a Notify(nil), skipping the failures before it,
// and returns the first failure seen.
func waitSubscribed(t *testing.T, notes <-chan error) (failure error) {
	t.Helper()
	for {
		err := recv(t, notes, "subscription")
		if err == nil {
			return failure
		}
		if failure == nil {
			failure = err
		}
	}
}

func publish(t *testing.T, c *Client, ch, msg string) {
	t.Helper()
	if n, err := mustDo(t, c, "PUBLISH", ch, msg).Int64(); n != 1 || err != nil {
		t.Fatalf("PUBLISH %s: %d receivers, %v; want 1", ch, n, err)
	}
}

func expect(t *testing.T, ps *PubSub, ch, payload string) {
	t.Helper()
	if m := recv(t, ps.Messages(), "message on "+ch); m.Channel != ch || m.Payload != payload {
		t.Errorf("received %+v; want %q on %s", m, payload, ch)
	}
}

// TestPubSubResubscribes: a subscription whose connection is killed
// (CLIENT KILL TYPE pubsub) or whose server restarts says so, connects
// again and subscribes to every channel again.
func TestPubSubResubscribes(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	c := newClient(t, redisOptions(t, r))
	ps, notes := subscription(t, c, SubscribeOptions{Channels: []string{"events", "other"}})
	if err := waitSubscribed(t, notes); err != nil {
		t.Errorf("first subscription reported %v", err)
	}
	publish(t, c, "events", "one")
	expect(t, ps, "events", "one")

	if n, err := r.Do("CLIENT", "KILL", "TYPE", "pubsub"); err != nil || n != "1" {
		t.Fatalf("CLIENT KILL TYPE pubsub: %q, %v; want 1 killed", n, err)
	}
	if err := waitSubscribed(t, notes); err == nil {
		t.Error("the killed connection was not reported")
	}
	publish(t, c, "other", "two")
	expect(t, ps, "other", "two")
	publish(t, c, "events", "three")
	expect(t, ps, "events", "three")

	r.Kill()
	if err := recv(t, notes, "the server's loss reported"); err == nil {
		t.Error("a Notify(nil) with the server gone")
	}
	r.Restart()
	waitSubscribed(t, notes)
	publish(t, c, "events", "after the restart")
	expect(t, ps, "events", "after the restart")
}

// TestPubSubCloseWhileDown: a subscription that cannot connect keeps
// trying, and Close ends it (and its Messages channel) at once.
func TestPubSubCloseWhileDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, Options{Addr: addr, Timeout: time.Second})
	ps, notes := subscription(t, c, SubscribeOptions{Channels: []string{"events"}})
	for range 3 {
		if err := recv(t, notes, "failed attempt"); err == nil {
			t.Fatal("subscribed to a closed port")
		}
	}
	closed := make(chan struct{})
	go func() { ps.Close(); close(closed) }()
	recv(t, closed, "Close to return")
	if _, ok := <-ps.Messages(); ok {
		t.Error("a message after Close")
	}
}

// freezer is a TCP proxy to target whose connections can all be made to
// go silent at once, without closing: the peer that vanished.
type freezer struct {
	addr string
	mu   sync.Mutex
	live []*atomic.Bool
}

func startFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{addr: ln.Addr().String()}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			frozen := &atomic.Bool{}
			f.mu.Lock()
			f.live = append(f.live, frozen)
			f.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				defer conns.Done()
				buf := make([]byte, 4096)
				for {
					n, err := src.Read(buf)
					if err != nil {
						dst.Close()
						src.Close()
						return
					}
					if !frozen.Load() {
						_, _ = dst.Write(buf[:n])
					}
				}
			}
			conns.Add(2)
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	return f
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.live {
		b.Store(true)
	}
}

// TestPubSubPingFindsASilentConnection: a subscription that receives
// nothing for PingEvery sends PING; with no answer within its Timeout it
// gives the connection up and subscribes on a new one. The Timeout is
// long enough that a busy machine does not look like a silent peer.
func TestPubSubPingFindsASilentConnection(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	f := startFreezer(t, r.Addr())
	c := newClient(t, Options{Addr: f.addr, Timeout: 5 * time.Second})
	direct := newClient(t, redisOptions(t, r))
	before, err := r.Commands()
	if err != nil {
		t.Fatal(err)
	}
	ps, notes := subscription(t, c, SubscribeOptions{Channels: []string{"events"}, PingEvery: 20 * time.Millisecond, Timeout: 2 * time.Second})
	waitSubscribed(t, notes)
	publish(t, direct, "events", "one")
	expect(t, ps, "events", "one")
	// Idle and answered: PINGs keep the subscription as it is.
	testsupport.Eventually(t, 10*time.Second, "three PINGs at the server", func() bool {
		cmds, err := r.Commands()
		return err == nil && cmds["ping"] >= before["ping"]+3
	})
	select {
	case err := <-notes:
		t.Fatalf("an idle, healthy subscription reported %v", err)
	default:
	}
	f.freeze()
	if err := waitSubscribed(t, notes); !errors.Is(err, errNoPong) {
		t.Errorf("the silent connection was given up with %v; want %v", err, errNoPong)
	}
	// The frozen connection still counts as a subscriber for Redis until
	// it notices; the message reaches the new one either way.
	if _, err := direct.Do(context.Background(), "PUBLISH", "events", "two"); err != nil {
		t.Fatal(err)
	}
	expect(t, ps, "events", "two")
}

// tlsProxy terminates TLS with a certificate for 127.0.0.1 and redis.test
// (self-signed: it is its own root) in front of target.
func tlsProxy(t *testing.T, target string) (addr string, root *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"redis.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	root = x509.NewCertPool()
	root.AddCert(cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{})
				go func() { copyConn(u, c); close(done) }()
				copyConn(c, u)
				<-done
			}()
		}
	}()
	return ln.Addr().String(), root
}

func copyConn(dst, src net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
}

// TestTLS: rediss:// verifies the server against the system roots and the
// URL's host; with the server's root trusted, commands and a subscription
// run over TLS.
func TestTLS(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	addr, root := tlsProxy(t, r.Addr())
	_, port, _ := net.SplitHostPort(addr)

	o, err := ParseURL("rediss://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	o.Timeout = 5 * time.Second
	var unknown x509.UnknownAuthorityError
	if _, err := newClient(t, o).Do(context.Background(), "PING"); !errors.As(err, &unknown) {
		t.Errorf("PING over TLS to a server the system roots do not know: %v; want an unknown authority", err)
	}
	o.TLS.RootCAs = root
	c := newClient(t, o)
	if v, err := c.Do(context.Background(), "PING"); err != nil || v.Str != "PONG" {
		t.Errorf("PING over TLS: %+v, %v", v, err)
	}
	ps, notes := subscription(t, c, SubscribeOptions{Channels: []string{"events"}})
	waitSubscribed(t, notes)
	publish(t, c, "events", "over tls")
	expect(t, ps, "events", "over tls")

	// The host the URL names is the one verified.
	o, _ = ParseURL("rediss://localhost:" + port)
	o.TLS.RootCAs, o.Timeout = root, 5*time.Second
	var wrongHost x509.HostnameError
	if _, err := newClient(t, o).Do(context.Background(), "PING"); !errors.As(err, &wrongHost) {
		t.Errorf("PING to localhost with a certificate for 127.0.0.1 and redis.test: %v; want a host name mismatch", err)
	}
}
