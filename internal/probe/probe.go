// Package probe runs detour's active health probes (upstreams.NAME.probe): a
// cheap request to each probed upstream on a jittered timer — its model
// list, or a one-token completion — with a credential of the policy's own,
// never an app's. A probe is classified like an attempt
// (policy.Compiled.ClassifyFor) and acts on the upstream's circuit breaker
// (health.Registry.ProbeFailed, ProbePassed), so that a failing upstream is
// taken out of chains before an app's request meets it, and an open breaker
// is closed by probes without an app's request having to find out first.
//
// A Manager follows the policy: on every policy it finds (it looks at each
// Options.Resync, and when Sync is called) it starts the probes a new
// upstream asks for, stops those of an upstream that lost its probe or
// left the policy, and restarts one whose probe settings changed; any other
// change to the upstream (its key, base URL, headers) is picked up by the
// next probe, which always reads the policy in effect. Run returns only
// when every probe goroutine has stopped.
//
// probe imports policy, rewrite, internal/health and internal/chain (for
// Transports: a probe dials as attempts do, with the upstream's ca_file and
// detour's guard against dialling itself); it must not import proxy or
// internal/admin, which wire it.
package probe

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
)

// DefaultResync is how often a Manager looks for a new policy when nobody
// calls Sync: a reload's probe changes take effect within it.
const DefaultResync = time.Second

// maxBody bounds how much of a probe's answer is read: a model list is a few
// kilobytes, and an error body is what classification needs.
const maxBody = 1 << 20

// ResultOK is Result.Label of a probe the upstream answered.
const ResultOK = "ok"

// Options configure a Manager.
type Options struct {
	// Policy returns the policy in effect (policy.Store.Load). Required.
	Policy func() *policy.Compiled
	// Health holds the breakers probes act on: the chain's registry.
	// Required.
	Health *health.Registry
	// Transports carry the probes, as they carry attempts. Required.
	Transports *chain.Transports
	// Log receives one line when an upstream's probe starts to fail or
	// passes again, not one per probe.
	Log zerolog.Logger
	// Now is the clock of breaker decisions and results; nil means
	// time.Now. The waits between probes use the runtime's timers (a test
	// runs them in a testing/synctest bubble).
	Now func() time.Time
	// OnResult, if set, is called after every probe (metrics).
	OnResult func(Result)
	// Resync is how often Run looks for a new policy. Default DefaultResync.
	Resync time.Duration
}

// Result is one probe's outcome.
type Result struct {
	Upstream string
	Request  policy.ProbeRequest
	// At is when the probe was sent; Latency how long its answer took.
	At      time.Time
	Latency time.Duration
	// Status is the HTTP status; 0 when none arrived.
	Status int
	// Class is the failure class; policy.ClassNone when the upstream
	// answered.
	Class  policy.Class
	Reason string
	// Breaker is how the probe counted for the breaker: BreakerSuccess,
	// BreakerHard or BreakerSoft act on it; BreakerNeutral (a class that
	// says nothing about the upstream's health, such as a refused key or a
	// rate limit) does not.
	Breaker health.BreakerResult
}

// Label is the result label of detour_probe_total: "ok" or the class.
func (r Result) Label() string {
	if r.Class == policy.ClassNone {
		return ResultOK
	}
	return string(r.Class)
}

// Status is what /status shows of one upstream's probes.
type Status struct {
	Request  policy.ProbeRequest
	Interval time.Duration
	// Last is the latest probe's result; zero before the first.
	Last Result
	// Passed and Failed count the probes since this upstream's probes
	// started (a neutral result is neither). ConsecutiveFailures is the
	// current run of failed probes.
	Passed, Failed      uint64
	ConsecutiveFailures int
}

// Manager runs the probes of the policy in effect. Start it with Run.
type Manager struct {
	opts  Options
	nudge chan struct{}

	mu      sync.Mutex
	probers map[string]*prober
	status  map[string]*Status
	wg      sync.WaitGroup
}

// prober is one upstream's probe loop.
type prober struct {
	name   string
	cfg    policy.Probe
	cancel context.CancelFunc
}

// New returns a Manager; nothing runs until Run.
func New(opts Options) *Manager {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	return &Manager{opts: opts, nudge: make(chan struct{}, 1), probers: map[string]*prober{}, status: map[string]*Status{}}
}

// Sync makes Run look at the policy now rather than at its next resync.
func (m *Manager) Sync() {
	select {
	case m.nudge <- struct{}{}:
	default:
	}
}

// Run probes until ctx ends, following the policy, and returns once every
// probe has stopped.
func (m *Manager) Run(ctx context.Context) {
	defer m.stopAll()
	t := time.NewTicker(m.opts.Resync)
	defer t.Stop()
	for {
		m.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.nudge:
		}
	}
}

// Running returns how many upstreams are being probed.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.probers)
}

// Status returns each probed upstream's probe status, by name.
func (m *Manager) Status() map[string]Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Status, len(m.status))
	for name, s := range m.status {
		out[name] = *s
	}
	return out
}

// sync starts, stops and restarts probers to match the policy in effect.
func (m *Manager) sync(ctx context.Context) {
	pol := m.opts.Policy()
	if pol == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, p := range m.probers {
		if u := pol.Upstreams[name]; u == nil || u.Probe != p.cfg {
			p.cancel()
			delete(m.probers, name)
			delete(m.status, name)
		}
	}
	for name, u := range pol.Upstreams {
		if !u.Probe.Enabled() || m.probers[name] != nil {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		p := &prober{name: name, cfg: u.Probe, cancel: cancel}
		m.probers[name] = p
		m.status[name] = &Status{Request: u.Probe.Request, Interval: u.Probe.Interval}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.loop(pctx, p)
		}()
	}
}

// stopAll stops every prober and waits for them.
func (m *Manager) stopAll() {
	m.mu.Lock()
	for name, p := range m.probers {
		p.cancel()
		delete(m.probers, name)
		delete(m.status, name)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// loop probes once at once — a dead upstream is best found before the
// first app request — and then every interval, jittered.
func (m *Manager) loop(ctx context.Context, p *prober) {
	for {
		m.probeOnce(ctx, p)
		t := time.NewTimer(jittered(p.cfg.Interval))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// jittered is d moved by up to ±policy.ProbeJitter of itself, so that the
// probes of many upstreams (and of a fleet of detours) spread out.
func jittered(d time.Duration) time.Duration {
	f := 1 + policy.ProbeJitter*(2*rand.Float64()-1)
	return time.Duration(float64(d) * f)
}

// probeOnce sends one probe with the policy in effect, classifies it and
// tells the breaker.
func (m *Manager) probeOnce(ctx context.Context, p *prober) {
	pol := m.opts.Policy()
	u := pol.Upstreams[p.name]
	if u == nil || u.Probe != p.cfg {
		return // a reload changed it; sync restarts or stops this prober
	}
	res, ok := m.send(ctx, pol, u)
	if !ok {
		return // stopped mid-probe: no verdict on the upstream
	}
	now := m.opts.Now()
	switch res.Breaker {
	case health.BreakerSuccess:
		m.opts.Health.ProbePassed(u.Name, pol.Breaker, now)
	case health.BreakerHard, health.BreakerSoft:
		m.opts.Health.ProbeFailed(u.Name, pol.Breaker, now, res.Reason)
	}
	m.record(p, res)
	if m.opts.OnResult != nil {
		m.opts.OnResult(res)
	}
}

// send makes the request and classifies what came back. ok is false when
// ctx ended first: shutting down is no verdict on the upstream.
func (m *Manager) send(ctx context.Context, pol *policy.Compiled, u *policy.Upstream) (Result, bool) {
	res := Result{Upstream: u.Name, Request: u.Probe.Request, At: m.opts.Now()}
	pctx, cancel := context.WithTimeout(ctx, u.Probe.Timeout)
	defer cancel()
	o := policy.Outcome{Shape: u.Shape}
	req, err := newRequest(pctx, u)
	if err != nil {
		o.Err = err
	} else {
		var resp *http.Response
		resp, err = m.opts.Transports.ForUpstream(u).RoundTrip(req)
		if err == nil {
			o.Status, o.Header = resp.StatusCode, resp.Header
			o.Body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
			resp.Body.Close()
			o.Err = err
		} else {
			o.Err = err
		}
	}
	res.Latency = m.opts.Now().Sub(res.At)
	if ctx.Err() != nil {
		return res, false
	}
	if err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
		// The probe's own bound, as an attempt's timer: a timeout whatever
		// the transport made of it.
		o.Timeout = "probe"
	}
	v := pol.ClassifyFor(u.Name, o, m.opts.Now())
	res.Status, res.Class, res.Reason = o.Status, v.Class, v.Reason
	res.Breaker = breakerResult(v.Class)
	return res, true
}

// breakerResult is how a probe of class c counts for the breaker: as an
// attempt of that class would (internal/chain resilience.go breakerResult).
func breakerResult(c policy.Class) health.BreakerResult {
	switch c {
	case policy.ClassNone:
		return health.BreakerSuccess
	case policy.ClassTimeout:
		return health.BreakerSoft
	case policy.ClassServerError, policy.ClassOverloaded, policy.ClassUnreachable, policy.ClassBadResponse:
		return health.BreakerHard
	}
	return health.BreakerNeutral
}

// record keeps res in the upstream's status and logs a change between
// passing and failing.
func (m *Manager) record(p *prober, res Result) {
	m.mu.Lock()
	s := m.status[p.name]
	if s == nil || m.probers[p.name] != p {
		m.mu.Unlock()
		return // stopped while probing
	}
	first := s.Last.At.IsZero()
	wasFailing := s.ConsecutiveFailures > 0
	s.Last = res
	switch res.Breaker {
	case health.BreakerSuccess:
		s.Passed++
		s.ConsecutiveFailures = 0
	case health.BreakerHard, health.BreakerSoft:
		s.Failed++
		s.ConsecutiveFailures++
	}
	failing := s.ConsecutiveFailures > 0
	m.mu.Unlock()
	switch {
	case failing && !wasFailing:
		m.opts.Log.Warn().Str("component", "probe").Str("upstream", res.Upstream).Str("request", string(res.Request)).
			Int("status", res.Status).Str("class", string(res.Class)).Str("reason", res.Reason).
			Msg("probe failed; the upstream's breaker is open")
	case !failing && wasFailing && res.Breaker == health.BreakerSuccess:
		m.opts.Log.Info().Str("component", "probe").Str("upstream", res.Upstream).Str("request", string(res.Request)).
			Msg("probe passed again")
	case first && res.Breaker == health.BreakerNeutral:
		// Says nothing about the upstream, but probably that the probe
		// is wrong (a key without access to the model list, a model the
		// upstream does not serve): worth one line.
		m.opts.Log.Warn().Str("component", "probe").Str("upstream", res.Upstream).Str("request", string(res.Request)).
			Int("status", res.Status).Str("class", string(res.Class)).Str("reason", res.Reason).
			Msg("probe answered with a class that does not count for the breaker; probes of this upstream decide nothing")
	}
}
