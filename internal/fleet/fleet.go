// Package fleet shares a detour's health state with the other members of
// its deployment through Redis: it is the health.Fleet of state.backend
// "redis". Each member keeps answering from its own health.Registry; this
// package writes what the member decides into Redis (asynchronously, or in
// one round trip where a fleet-wide answer is needed) and applies what the
// others decided, which arrives by pub/sub, to the member's Registry. A
// request to a healthy upstream therefore makes no Redis command at all.
//
// Redis failing is never an outage: a command slower than the policy's
// timeout, or a Redis that is down, marks the store down (logged once per
// transition, the gauge detour_state_backend_up); while down the member
// decides alone without waiting on Redis, and when Redis answers again the
// member writes back the state it started and reads the fleet's (a Redis
// restarted empty is noticed by a marker key that is gone).
//
// The client is detour's own, internal/fleet/resp: the RESP2 commands this
// package sends, a bounded pool, scripts by SHA with a fallback to EVAL,
// pipelines, TLS for rediss://, and a subscription that reconnects and
// subscribes again by itself. go-redis did the same for some 2 MB of the
// sidecar's binary and 1 MiB of its idle memory. rueidis's client-side
// caching was another alternative, but its cache is dropped while the
// connection is down, which would put Redis back on the read path exactly
// when Redis is failing; the Registry itself is the local view here.
//
// fleet imports policy and internal/health; it must not import proxy or
// internal/chain.
package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/fleet/resp"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// Defaults of Options.
const (
	// DefaultCheckInterval is how often a member checks that Redis is up
	// and still holds the fleet's state (one GET), and, while it is down,
	// how often it tries again.
	DefaultCheckInterval = time.Second
	// DefaultFlushInterval is how often shared counters are sent and read
	// back: how far behind the fleet's total a member's view can be.
	DefaultFlushInterval = time.Second
	// SlotHold is the longest a fleet concurrency slot is held without
	// being released, so that a member that dies mid-request does not keep
	// its slots forever.
	SlotHold = 10 * time.Minute
	// probeTTL keeps a half-open period's probe counters for this long.
	probeTTL = 10 * time.Minute
	// leaseFor is how long rpm tokens taken from the fleet in advance stay
	// usable: a lease unused by then is dropped, never given back, so the
	// fleet's rate can only be under-used by leases, never exceeded.
	leaseFor = time.Second
	// queueSize bounds the notifications waiting to be written.
	queueSize = 4096
	// resyncEvery is how many checks apart a member reads the fleet's
	// state again even when nothing seemed to happen: an event that did
	// not arrive (published while the subscription's connection was dying
	// unnoticed, before it resubscribed) is not lost for longer than that.
	resyncEvery = 10
)

// Options configure a Store.
type Options struct {
	// Redis is the policy's state.redis section.
	Redis policy.RedisPolicy
	// Registry is the member's own state; required.
	Registry *health.Registry
	// Log receives one line per transition of the store (down, up,
	// resynchronised). Default: discarded.
	Log zerolog.Logger
	// Now is the member's clock. Default time.Now.
	Now func() time.Time
	// Member names this process in the events it publishes (so that it
	// ignores its own). Default: host name, pid and a random suffix.
	Member string
	// CheckInterval: DefaultCheckInterval when 0.
	CheckInterval time.Duration
	// FlushInterval: DefaultFlushInterval when 0.
	FlushInterval time.Duration
}

// Store is a health.Fleet on Redis. Safe for concurrent use.
type Store struct {
	opts   Options
	rdb    *resp.Client
	reg    *health.Registry
	prefix string
	events string // the pub/sub channel

	up        atomic.Bool
	fallbacks atomic.Uint64
	// stateMu serializes transitions, so each is logged once.
	stateMu sync.Mutex

	queue  chan func(context.Context) error
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	leases sync.Map // upstream name → *lease

	counterMu sync.Mutex
	counters  map[string]*counter

	slotSeq atomic.Uint64

	// resubscribed wakes the monitor when the subscription came back
	// after losing its connection: it checks at once and reads the
	// fleet's state again, for the events published while it was away.
	resubscribed chan struct{}

	// subscribed is closed once the subscription to the events channel
	// is in place: the first resync waits for it, so that no event falls
	// between the state it reads and the events it then receives.
	subscribed chan struct{}
}

// counter is one shared counter as this member sees it.
type counter struct {
	total   float64 // the fleet's, as of the last flush
	pending float64 // added here since
	ttl     time.Duration
}

// lease holds rpm tokens taken from the fleet in advance.
type lease struct {
	mu      sync.Mutex
	tokens  int
	expires time.Time
}

// event is what members publish to each other, and what cooldown and
// breaker keys hold.
type event struct {
	Type   string `json:"t"` // cool, uncool, open, close, reset
	Member string `json:"m"`
	Name   string `json:"u"`
	Since  int64  `json:"since,omitempty"`
	Until  int64  `json:"until,omitempty"` // ms; for close, the period
	Class  string `json:"class,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Start connects to Redis and attaches the Store to opts.Registry. It
// never fails because Redis is down: the Store starts down, the member
// serves with local state, and the Store resynchronises when Redis comes.
// Close stops it.
func Start(opts Options) (*Store, error) {
	if opts.Registry == nil {
		return nil, errors.New("fleet: no registry")
	}
	ro, err := resp.ParseURL(opts.Redis.URL)
	if err != nil {
		return nil, fmt.Errorf("state.redis.url: %w", err)
	}
	if opts.Redis.Password != "" {
		ro.Password = string(opts.Redis.Password)
	}
	t := opts.Redis.Timeout
	if t <= 0 {
		t = policy.DefaultRedisTimeout
	}
	opts.Redis.Timeout = t
	// A new connection's TCP and TLS handshakes and AUTH get at least
	// 100 ms even under a tighter command timeout. The client never
	// retries: a command that failed falls back, and retrying would only
	// add its timeout again.
	ro.Timeout, ro.DialTimeout = t, max(t, 100*time.Millisecond)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.Member == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		opts.Member = host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	}
	prefix := opts.Redis.KeyPrefix
	if prefix == "" {
		prefix = policy.DefaultRedisKeyPrefix
	}
	s := &Store{
		opts: opts, rdb: resp.New(ro), reg: opts.Registry,
		prefix: prefix, events: prefix + "events",
		queue:        make(chan func(context.Context) error, queueSize),
		counters:     map[string]*counter{},
		subscribed:   make(chan struct{}),
		resubscribed: make(chan struct{}, 1),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	opts.Registry.SetFleet(s)
	s.wg.Add(4)
	go s.writer()
	go s.subscriber()
	go s.monitor()
	go s.flusher()
	return s, nil
}

// Close stops the Store's goroutines and closes its connections. The
// Registry keeps its state and goes on alone.
func (s *Store) Close() error {
	s.cancel()
	s.wg.Wait()
	s.reg.SetFleet(nil)
	return s.rdb.Close()
}

// Status implements health.Fleet.
func (s *Store) Status() health.FleetStatus {
	return health.FleetStatus{Backend: policy.StateRedis, Up: s.up.Load(), Fallbacks: s.fallbacks.Load()}
}

// Member is the name this Store publishes under.
func (s *Store) Member() string { return s.opts.Member }

func (s *Store) key(kind, name string) string { return s.prefix + kind + ":" + name }

// call runs one round trip bounded by the policy's timeout. While the
// store is down it does not try (ErrFleetDown); an error marks it down.
func (s *Store) call(f func(ctx context.Context) error) error {
	if !s.up.Load() {
		s.fallbacks.Add(1)
		return health.ErrFleetDown
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.Redis.Timeout)
	defer cancel()
	if err := f(ctx); err != nil {
		s.fallbacks.Add(1)
		s.markDown(err)
		return err
	}
	return nil
}

// async queues a write for the writer goroutine; a full queue or a store
// that is down drops it (the resynchronisation writes back what matters).
func (s *Store) async(f func(ctx context.Context) error) {
	if !s.up.Load() {
		s.fallbacks.Add(1)
		return
	}
	select {
	case s.queue <- f:
	default:
		s.fallbacks.Add(1)
	}
}

func (s *Store) writer() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case f := <-s.queue:
			_ = s.call(f)
		}
	}
}

// markDown notes that Redis did not answer; logged once per transition.
func (s *Store) markDown(err error) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if s.ctx.Err() != nil || !s.up.Swap(false) {
		return
	}
	s.opts.Log.Warn().Str("component", "state").Str("backend", "redis").Err(err).
		Msg("state backend unreachable: going on with this process's own state until it answers")
}

// monitor checks Redis every CheckInterval: a GET of the marker key that
// the last resynchronisation wrote. Down → up, or a marker that is gone (a
// Redis restarted empty), resynchronises.
func (s *Store) monitor() {
	defer s.wg.Done()
	marker := s.prefix + "marker"
	select {
	case <-s.subscribed:
	case <-s.ctx.Done():
		return
	}
	t := time.NewTicker(s.opts.CheckInterval)
	defer t.Stop()
	resubscribed := false
	for checks := 1; ; checks++ {
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.Redis.Timeout)
		n, err := s.int(ctx, "EXISTS", marker)
		cancel()
		switch {
		case s.ctx.Err() != nil:
			return
		case err != nil:
			s.markDown(err)
		case resubscribed || !s.up.Load() || n == 0 || checks%resyncEvery == 0:
			if err := s.resync(marker); err != nil {
				s.markDown(err)
			}
		}
		resubscribed = false
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.resubscribed:
			resubscribed = true
		}
	}
}

// resync writes back the cooldowns and open breakers this member started
// (Redis may have lost them), reads every cooldown and breaker the fleet
// holds, writes the marker, and marks the store up.
func (s *Store) resync(marker string) error {
	ctx, cancel := context.WithTimeout(s.ctx, 10*s.opts.Redis.Timeout+time.Second)
	defer cancel()
	now := s.opts.Now()
	for name, c := range s.reg.LocalCooldowns(now) {
		if err := s.writeCooldown(ctx, name, c, now); err != nil {
			return err
		}
	}
	for name, b := range s.reg.LocalOpenBreakers(now) {
		if _, err := s.writeOpen(ctx, name, b.Since, b.Until, b.Reason, now); err != nil {
			return err
		}
	}
	n := 0
	for _, pattern := range []string{s.prefix + "cool:*", s.prefix + "brk:*"} {
		for cursor := "0"; ; {
			v, err := s.rdb.Do(ctx, "SCAN", cursor, "MATCH", pattern, "COUNT", 256)
			if err != nil {
				return err
			}
			if v.Kind != resp.KindArray || len(v.Elems) != 2 || v.Elems[1].Kind != resp.KindArray {
				return fmt.Errorf("SCAN: unexpected reply %v", v)
			}
			for _, k := range v.Elems[1].Elems {
				got, err := s.rdb.Do(ctx, "GET", k.Str)
				if err != nil {
					return err
				}
				if got.IsNull() { // expired since the SCAN
					continue
				}
				var ev event
				if json.Unmarshal([]byte(got.Str), &ev) == nil && ev.Member != s.opts.Member {
					s.apply(ev)
					n++
				}
			}
			if cursor = v.Elems[0].Str; cursor == "0" {
				break
			}
		}
	}
	if _, err := s.rdb.Do(ctx, "SET", marker, s.opts.Member); err != nil {
		return err
	}
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if !s.up.Swap(true) {
		s.opts.Log.Info().Str("component", "state").Str("backend", "redis").Int("fleet_entries", n).
			Msg("state backend reachable: fleet state resynchronised")
	}
	return nil
}

// subscriber applies the other members' events. The subscription
// reconnects and subscribes again by itself; what was published while it
// was away is read back by the resync that each resubscription asks for.
func (s *Store) subscriber() {
	defer s.wg.Done()
	subscribed, logged := false, false
	ps := s.rdb.Subscribe(resp.SubscribeOptions{
		Channels: []string{s.events},
		// Redis may be down at start, or go away: try again within
		// CheckInterval, the store staying down meanwhile.
		MinBackoff: min(s.opts.CheckInterval, resp.DefaultMinBackoff),
		MaxBackoff: s.opts.CheckInterval,
		// Called by the subscription's own goroutine, one call at a time.
		Notify: func(err error) {
			switch {
			case err == nil && !subscribed:
				subscribed = true
				close(s.subscribed)
			case err == nil:
				select {
				case s.resubscribed <- struct{}{}:
				default: // a resync is already due
				}
			case !subscribed && !logged && s.ctx.Err() == nil:
				logged = true
				s.opts.Log.Warn().Str("component", "state").Str("backend", "redis").Err(err).
					Msg("state backend unreachable at start: going on with this process's own state until it answers")
			}
		},
	})
	defer ps.Close()
	for {
		select {
		case <-s.ctx.Done():
			return
		case m, ok := <-ps.Messages():
			if !ok {
				return
			}
			var ev event
			if json.Unmarshal([]byte(m.Payload), &ev) != nil || ev.Member == s.opts.Member {
				continue
			}
			s.apply(ev)
		}
	}
}

// apply gives the Registry another member's event.
func (s *Store) apply(ev event) {
	now := s.opts.Now()
	switch ev.Type {
	case "cool":
		s.reg.ApplyCooldown(ev.Name, health.Cooldown{Until: time.UnixMilli(ev.Until), Reason: ev.Reason, Class: ev.Class}, now)
	case "uncool":
		s.reg.ApplyCooldownCleared(ev.Name)
	case "open":
		s.reg.ApplyBreakerOpen(ev.Name, time.UnixMilli(ev.Since), time.UnixMilli(ev.Until), ev.Reason, now)
	case "close":
		s.reg.ApplyBreakerClosed(ev.Name, time.UnixMilli(ev.Until), now)
	case "reset":
		s.reg.ApplyBreakerReset(ev.Name)
	}
}

func (s *Store) publish(ctx context.Context, ev event) error {
	ev.Member = s.opts.Member
	b, _ := json.Marshal(ev)
	_, err := s.rdb.Do(ctx, "PUBLISH", s.events, b)
	return err
}

func (s *Store) writeCooldown(ctx context.Context, name string, c health.Cooldown, now time.Time) error {
	ev := event{Type: "cool", Member: s.opts.Member, Name: name, Until: c.Until.UnixMilli(), Class: c.Class, Reason: c.Reason}
	b, _ := json.Marshal(ev)
	_, err := cooldownScript.Run(ctx, s.rdb, []string{s.key("cool", name)}, ev.Until, now.UnixMilli(), b, s.events)
	return err
}

// writeOpen stores and publishes an open period unless one is running in
// the fleet; then it returns that one.
func (s *Store) writeOpen(ctx context.Context, name string, since, until time.Time, reason string, now time.Time) (*event, error) {
	ev := event{Type: "open", Member: s.opts.Member, Name: name, Since: since.UnixMilli(), Until: until.UnixMilli(), Reason: reason}
	b, _ := json.Marshal(ev)
	cur, err := breakerOpenScript.Run(ctx, s.rdb, []string{s.key("brk", name)}, ev.Until, now.UnixMilli(), b, s.events)
	if err != nil {
		return nil, err
	}
	if cur.IsNull() { // false: no period was running, this one is stored
		return nil, nil
	}
	var running event
	if json.Unmarshal([]byte(cur.Str), &running) != nil {
		return nil, nil
	}
	return &running, nil
}

// CooldownStarted implements health.Fleet.
func (s *Store) CooldownStarted(name string, c health.Cooldown) {
	s.async(func(ctx context.Context) error { return s.writeCooldown(ctx, name, c, s.opts.Now()) })
}

// CooldownCleared implements health.Fleet.
func (s *Store) CooldownCleared(name string) {
	s.async(func(ctx context.Context) error {
		if _, err := s.rdb.Do(ctx, "DEL", s.key("cool", name)); err != nil {
			return err
		}
		return s.publish(ctx, event{Type: "uncool", Name: name})
	})
}

// BreakerOpened implements health.Fleet. When another member's open period
// is already running, this member adopts it.
func (s *Store) BreakerOpened(name string, since, until time.Time, reason string) {
	s.async(func(ctx context.Context) error {
		now := s.opts.Now()
		running, err := s.writeOpen(ctx, name, since, until, reason, now)
		if err == nil && running != nil && running.Member != s.opts.Member {
			s.reg.ApplyBreakerOpen(name, time.UnixMilli(running.Since), time.UnixMilli(running.Until), running.Reason, now)
		}
		return err
	})
}

// BreakerReset implements health.Fleet.
func (s *Store) BreakerReset(name string) {
	s.async(func(ctx context.Context) error {
		if _, err := s.rdb.Do(ctx, "DEL", s.key("brk", name)); err != nil {
			return err
		}
		return s.publish(ctx, event{Type: "reset", Name: name})
	})
}

func (s *Store) periodKey(kind, name string, period time.Time) string {
	return s.prefix + kind + ":" + name + ":" + strconv.FormatInt(period.UnixMilli(), 10)
}

// ClaimProbe implements health.Fleet: one round trip.
func (s *Store) ClaimProbe(name string, period time.Time, k int) (bool, error) {
	var granted bool
	err := s.call(func(ctx context.Context) error {
		n, err := s.script(ctx, probeClaimScript, []string{s.periodKey("probe", name, period)}, k, probeTTL.Milliseconds())
		granted = n == 1
		return err
	})
	return granted, err
}

// ProbeDone implements health.Fleet.
func (s *Store) ProbeDone(name string, period time.Time, res health.BreakerResult, k int) {
	switch res {
	case health.BreakerNeutral:
		s.async(func(ctx context.Context) error {
			_, err := s.rdb.Do(ctx, "DECR", s.periodKey("probe", name, period))
			return err
		})
	case health.BreakerSuccess:
		s.async(func(ctx context.Context) error {
			b, _ := json.Marshal(event{Type: "close", Member: s.opts.Member, Name: name, Until: period.UnixMilli()})
			n, err := s.script(ctx, probeSuccessScript, []string{s.periodKey("probeok", name, period), s.key("brk", name)},
				k, probeTTL.Milliseconds(), b, s.events)
			if err == nil && n == int64(k) {
				// The close is published to the others; this member
				// ignores its own events, so it closes here.
				s.reg.ApplyBreakerClosed(name, period, s.opts.Now())
			}
			return err
		})
	}
	// A failed probe opens the breaker again here, which BreakerOpened
	// tells the fleet.
}

// leaseSize is how many rpm tokens a member takes per round trip: a tenth
// of a second's worth of the fleet's rate, at least 1 and at most the
// burst. At 600 rpm that is one token (a round trip per request); at
// 60,000 rpm, 100 (a round trip per 100 requests).
func leaseSize(l health.Limits) int {
	return max(1, min(l.Burst, l.RPM/600))
}

// TakeRPM implements health.Fleet: from the member's lease when it holds
// tokens, else one round trip that takes leaseSize of them.
func (s *Store) TakeRPM(name string, l health.Limits, now time.Time) (bool, error) {
	v, _ := s.leases.LoadOrStore(name, &lease{})
	ls := v.(*lease)
	ls.mu.Lock()
	if ls.tokens > 0 && now.Before(ls.expires) {
		ls.tokens--
		ls.mu.Unlock()
		return true, nil
	}
	ls.mu.Unlock()
	var got int
	err := s.call(func(ctx context.Context) error {
		n, err := s.script(ctx, rpmScript, []string{s.key("rpm", name)}, l.RPM, max(1, l.Burst), leaseSize(l), now.UnixMicro())
		got = int(n)
		return err
	})
	if err != nil || got == 0 {
		return false, err
	}
	if got > 1 {
		ls.mu.Lock()
		ls.tokens, ls.expires = got-1, now.Add(leaseFor)
		ls.mu.Unlock()
	}
	return true, nil
}

// AcquireSlot implements health.Fleet: one round trip to take, and an
// asynchronous one to release.
func (s *Store) AcquireSlot(name string, limit int, now time.Time) (func(), bool, error) {
	id := s.opts.Member + ":" + strconv.FormatUint(s.slotSeq.Add(1), 10)
	key := s.key("conc", name)
	var ok bool
	err := s.call(func(ctx context.Context) error {
		n, err := s.script(ctx, slotScript, []string{key}, limit, now.UnixMilli(), now.Add(SlotHold).UnixMilli(), id)
		ok = n == 1
		return err
	})
	if err != nil || !ok {
		return func() {}, false, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.async(func(ctx context.Context) error {
				_, err := s.rdb.Do(ctx, "ZREM", key, id)
				return err
			})
		})
	}, true, nil
}

// AddShared implements health.Fleet: added locally now, sent at the next
// flush.
func (s *Store) AddShared(key string, delta float64, ttl time.Duration) {
	s.counterMu.Lock()
	defer s.counterMu.Unlock()
	c := s.counters[key]
	if c == nil {
		c = &counter{}
		s.counters[key] = c
	}
	c.pending += delta
	c.ttl = ttl
}

// Shared implements health.Fleet. A key never added to here is read from
// the next flush on.
func (s *Store) Shared(key string) float64 {
	s.counterMu.Lock()
	defer s.counterMu.Unlock()
	c := s.counters[key]
	if c == nil {
		s.counters[key] = &counter{}
		return 0
	}
	return c.total + c.pending
}

// flusher sends the shared counters' adds and reads back the fleet's
// totals, in one pipelined round trip per FlushInterval. Adds that could
// not be sent stay pending for the next flush.
func (s *Store) flusher() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.flush()
		}
	}
}

func (s *Store) flush() {
	s.counterMu.Lock()
	keys := make([]string, 0, len(s.counters))
	deltas := make([]float64, 0, len(s.counters))
	ttls := make([]time.Duration, 0, len(s.counters))
	for k, c := range s.counters {
		keys, deltas, ttls = append(keys, k), append(deltas, c.pending), append(ttls, c.ttl)
	}
	s.counterMu.Unlock()
	if len(keys) == 0 || !s.up.Load() {
		return
	}
	cmds := make([][]any, len(keys))
	for i, k := range keys {
		if deltas[i] != 0 {
			// EVAL, not EVALSHA: in a pipeline a NOSCRIPT answer comes
			// back too late to fall back on.
			cmds[i] = counterScript.Eval([]string{s.prefix + "ctr:" + k}, deltas[i], max(ttls[i], time.Second).Milliseconds())
		} else {
			cmds[i] = []any{"GET", s.prefix + "ctr:" + k}
		}
	}
	var replies []resp.Value
	err := s.call(func(ctx context.Context) error {
		var err error
		if replies, err = s.rdb.Pipeline(ctx, cmds...); err != nil {
			return err
		}
		for _, v := range replies {
			if err := v.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return
	}
	s.counterMu.Lock()
	defer s.counterMu.Unlock()
	for i, k := range keys {
		c := s.counters[k]
		total, _ := replies[i].Float64() // a counter not there (yet, or any more) is 0
		c.pending -= deltas[i]
		c.total = total
	}
}

// int runs a command whose reply is an integer.
func (s *Store) int(ctx context.Context, args ...any) (int64, error) {
	v, err := s.rdb.Do(ctx, args...)
	if err != nil {
		return 0, err
	}
	return v.Int64()
}

// script runs a script whose reply is an integer.
func (s *Store) script(ctx context.Context, sc *resp.Script, keys []string, args ...any) (int64, error) {
	v, err := sc.Run(ctx, s.rdb, keys, args...)
	if err != nil {
		return 0, err
	}
	return v.Int64()
}
