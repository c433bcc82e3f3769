package detourtest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
)

// ChainRunner serves one chain.Runner for a host on a plain HTTP test
// server: no goproxy, no TLS interception — the chain on its own. It is the
// harness of internal/chain's tests and of internal/sdkcheck's tests of the
// chain's own answers, kept here once so that both run the chain alike.
type ChainRunner struct {
	// Srv serves Handler; nil from BuildChainRunner.
	Srv *httptest.Server
	// Handler is Runner.Serve with the bookkeeping that Record and Settled
	// read.
	Handler http.Handler
	// Health is the Runner's registry: breakers, cooldowns, limits, spend.
	Health *health.Registry

	mu      sync.Mutex
	records []*chain.Record
	// lastID is the request id of the request that started last, once
	// every started request has ended (running counts those that have
	// not): see Record.
	lastID  string
	started int
	running int
	// changed is closed (and replaced) whenever records, lastID or running
	// change, so that Record and Settled wait on events, not on a poll.
	changed chan struct{}
}

// bump announces a change of the runner's state; r.mu is held.
func (r *ChainRunner) bump() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// await waits until cond (called with r.mu held) holds, for at most 5 s.
func (r *ChainRunner) await(cond func() bool) bool {
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		ok, ch := cond(), r.changed
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-timeout.C:
			return false
		}
	}
}

// StartChainRunner serves the chain of policyJSON for host, with a hook
// that adjusts the Runner before it serves (a virtual clock, a log writer,
// a transport override); tune may be nil.
func StartChainRunner(t *testing.T, host, policyJSON string, tune func(*chain.Runner)) *ChainRunner {
	t.Helper()
	r := BuildChainRunner(t, host, policyJSON, tune)
	r.Srv = httptest.NewServer(r.Handler)
	t.Cleanup(r.Srv.Close)
	return r
}

// BuildChainRunner is StartChainRunner without the server: r.Handler
// serves the chain, r.Srv is nil.
func BuildChainRunner(t *testing.T, host, policyJSON string, tune func(*chain.Runner)) *ChainRunner {
	t.Helper()
	pol, err := policy.Compile("policy.json", []byte(policyJSON), policy.Options{BaseDir: t.TempDir(), DefaultCADir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r := &ChainRunner{Health: health.New(), changed: make(chan struct{})}
	cr := &chain.Runner{
		Policy:     func() *policy.Compiled { return pol },
		Health:     r.Health,
		Transports: &chain.Transports{},
		Log:        zerolog.New(io.Discard),
		OnRecord: func(rec *chain.Record) {
			r.mu.Lock()
			r.records = append(r.records, rec)
			r.bump()
			r.mu.Unlock()
		},
	}
	if tune != nil {
		tune(cr)
	}
	r.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.started++
		seq := r.started
		r.running++
		r.bump()
		r.mu.Unlock()
		cr.Serve(w, req, chain.Target{Host: host, Mode: "base_url"})
		r.mu.Lock()
		if seq == r.started {
			r.lastID = w.Header().Get(chain.HeaderRequestID)
		}
		r.running--
		r.bump()
		r.mu.Unlock()
	})
	return r
}

// Record returns the record of the request the test sent last, once every
// request has ended. Not simply the last record: the app reads a stream's
// last event before the chain writes its record, so the app's next request
// can end, and be recorded, before the previous one is.
func (r *ChainRunner) Record(t *testing.T) *chain.Record {
	t.Helper()
	var last *chain.Record
	found := r.await(func() bool {
		if r.running != 0 || r.lastID == "" {
			return false
		}
		// From the end: the last request's record is at most a few from
		// it, and a test of a thousand requests would otherwise scan them
		// all after each one.
		for i := len(r.records) - 1; i >= 0; i-- {
			if rec := r.records[i]; rec.ID == r.lastID {
				last = rec
				return true
			}
		}
		return false
	})
	if !found {
		t.Fatal("no record of the last request after 5s")
	}
	return last
}

// Settled returns every record once no request is running.
func (r *ChainRunner) Settled(t *testing.T) []*chain.Record {
	t.Helper()
	var rs []*chain.Record
	if !r.await(func() bool {
		rs = append([]*chain.Record(nil), r.records...)
		return r.running == 0
	}) {
		t.Fatal("requests still running after 5s")
	}
	return rs
}

// CooldownSeconds is what is left at now of upstream name's cooldown, as a
// retry-after value; the test fails when name is not cooling down.
func (r *ChainRunner) CooldownSeconds(t *testing.T, now time.Time, name string) string {
	t.Helper()
	cd, ok := r.Health.CoolingDown(name, now)
	if !ok {
		t.Fatalf("%s is not cooling down", name)
	}
	return strconv.FormatInt(rewrite.RetryAfterSeconds(cd.Until.Sub(now)), 10)
}

// UpstreamJSON is the policy entry of an upstream named name at fake vendor
// v, with the client's own credentials; extra (`, "key": …`) is appended
// inside the entry.
func UpstreamJSON(name string, v *Vendor, extra string) string {
	return fmt.Sprintf(`%q: {"shape": %q, "base_url": %q, "ca_file": %q, "auth": {"from": "client"}%s}`,
		name, v.Shape(), v.BaseURL(), v.CAFile, extra)
}

// OpenAIChatPolicy is a policy of the upstreams ups (UpstreamJSON entries)
// with one route, api.openai.com's chat completions, along chainNames (a
// JSON array); extra (`, "key": …`) is appended at the top level.
func OpenAIChatPolicy(ups []string, chainNames string, extra string) string {
	return fmt.Sprintf(`{"upstreams": {%s},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": %s}]%s}`,
		strings.Join(ups, ","), chainNames, extra)
}

// CheckPassthroughHeaders fails the test unless h is the headers of an
// answer detour wrote itself for a passthrough request nobody answered:
// JSON, with detour's request id and answered-by "none".
func CheckPassthroughHeaders(t *testing.T, h http.Header) {
	t.Helper()
	if h.Get("Content-Type") != "application/json" || h.Get(chain.HeaderRequestID) == "" || h.Get(chain.HeaderAnsweredBy) != "none" {
		t.Errorf("headers %v; want JSON and detour's headers", h)
	}
}

// CheckPassthroughRecord fails the test unless the last request's record
// is a failed passthrough answered with status.
func (r *ChainRunner) CheckPassthroughRecord(t *testing.T, status int) {
	t.Helper()
	rec := r.Record(t)
	if rec.Status != status || !strings.HasPrefix(rec.Error, "passthrough: ") || rec.AnsweredBy != "passthrough" {
		t.Errorf("record status %d error %q answered by %q", rec.Status, rec.Error, rec.AnsweredBy)
	}
}
