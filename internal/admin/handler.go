// Package admin serves detour's admin listener (admin_listen; docs/architecture.md#admin-listener-and-metrics):
// liveness and readiness probes, Prometheus metrics, a JSON status page, the
// policy history and policy rollback.
//
// The admin listener is on loopback by default, but Kubernetes sets
// admin_listen to 0.0.0.0:8788 so the kubelet can probe it, and then every
// pod that reaches the pod IP reaches it too. So only /healthz, /readyz and
// /metrics answer anyone. Everything else — /status, /policy/history, POST
// /policy/rollback and any endpoint added later — answers a loopback peer,
// or a caller that sends the admin bearer token (admin.token_file); see
// auth.go. Even so, no key, no policy file content, no request content is
// ever served; upstreams appear by name only (not even base_url, which may
// carry userinfo).
//
// admin imports policy, chain and health; it must not import proxy (proxy
// wires it).
package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/internal/probe"
	"github.com/detour-proxy/detour/policy"
)

// maxRollbackBody bounds a rollback request's body: {"hash": "…"} is tiny.
const maxRollbackBody = 4 << 10

// Options configure NewHandler.
type Options struct {
	// Store is the policy store: status, history and rollback. Required.
	Store *policy.Store
	// Health holds cooldowns and per-upstream traffic. Required.
	Health *health.Registry
	// Metrics is served on /metrics; nil serves 404 there.
	Metrics *Metrics
	// Ready says whether detour should receive traffic: nil when ready,
	// else why not. nil Ready means always ready.
	Ready func() error
	// Log receives one line per rollback and per refused request (see
	// guard).
	Log zerolog.Logger
	// Now is the clock of /status and of the admin token's re-reads;
	// default time.Now.
	Now func() time.Time
	// CacheLen reports the response cache's entries for /status; nil: 0.
	CacheLen func() int
	// Probes reports the active probes' status by upstream for /status
	// (probe.Manager.Status); nil: every upstream's probe is null.
	Probes func() map[string]probe.Status
	// Windows are the windows scored selections judge the upstreams by
	// (chain.Runner.Windows), shown per upstream in /status as window;
	// nil: every upstream's window is null.
	Windows *health.Windows
}

// NewHandler returns the admin listener's handler:
//
//	GET  /healthz          200 "ok" while the process runs (liveness)
//	GET  /readyz           200 when ready for traffic, else 503 with a JSON reason
//	GET  /metrics          Prometheus text format
//	GET  /status           JSON: the policy in effect, per-upstream state
//	GET  /policy/history   JSON: the last policy load attempts, newest first
//	POST /policy/rollback  {"hash": "<hash or unique prefix>"}: publish an earlier policy
//
// The first three answer anyone. Every other path is guarded (see guard):
// it answers a peer on the loopback interface, or a request with
// "Authorization: Bearer <token>" where the token is admin.token_file's
// content; a wrong token gets 401. The guard wraps the whole mux, so an
// endpoint registered later is guarded without asking for it.
//
// A rollback stays in effect until the policy file, or a file it references,
// changes; the next successful reload of the changed file replaces it (see
// policy.Store.Rollback). Cross-origin browser requests are refused, and a
// loopback caller without the token must name detour by IP address or
// "localhost" in its Host header, so that neither a web page nor a
// DNS-rebinding one can read the status or roll a developer's policy back
// through the loopback listener.
func NewHandler(opts Options) http.Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &handler{opts: opts}
	mux := http.NewServeMux()
	// Method patterns: a GET of /policy/rollback gets 405 with "Allow: POST"
	// from the mux itself, and GET patterns also answer HEAD.
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	if opts.Metrics != nil {
		mux.Handle("GET /metrics", opts.Metrics.Handler())
	}
	mux.HandleFunc("GET /status", h.status)
	mux.HandleFunc("GET /policy/history", h.history)
	mux.HandleFunc("POST /policy/rollback", h.rollback)
	g := &guard{store: opts.Store, log: opts.Log, now: opts.Now, next: mux}
	return http.NewCrossOriginProtection().Handler(g)
}

type handler struct {
	opts Options
}

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyJSON is /readyz's body.
type readyJSON struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

func (h *handler) readyz(w http.ResponseWriter, _ *http.Request) {
	var err error
	if h.opts.Ready != nil {
		err = h.opts.Ready()
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, readyJSON{Reason: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, readyJSON{Ready: true})
}

// rollbackRequest is POST /policy/rollback's body.
type rollbackRequest struct {
	Hash string `json:"hash"`
}

// errorJSON is the body of every admin error answer.
type errorJSON struct {
	Error string `json:"error"`
}

func (h *handler) rollback(w http.ResponseWriter, r *http.Request) {
	var req rollbackRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRollbackBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorJSON{Error: `body must be {"hash": "<policy hash or a unique prefix of at least 8 hex digits>"}: ` + err.Error()})
		return
	}
	c, err := h.opts.Store.Rollback(req.Hash)
	switch {
	case errors.Is(err, policy.ErrBadHash):
		writeJSON(w, http.StatusBadRequest, errorJSON{Error: err.Error()})
		return
	case errors.Is(err, policy.ErrUnknownPolicy):
		writeJSON(w, http.StatusNotFound, errorJSON{Error: err.Error() + " (GET /policy/history lists them; the last " + itoa(policy.KeptPolicies) + " loaded are kept)"})
		return
	case errors.Is(err, policy.ErrAmbiguousHash):
		writeJSON(w, http.StatusConflict, errorJSON{Error: err.Error()})
		return
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, errorJSON{Error: err.Error()})
		return
	}
	h.opts.Log.Warn().Str("component", "policy").Str("trigger", string(policy.TriggerRollback)).
		Str("version", c.Version).Str("hash", c.Hash[:12]).
		Str("peer", r.RemoteAddr).Str("admitted", string(AdmissionOf(r))).
		Msg("policy rolled back; it stays until the policy file changes")
	writeJSON(w, http.StatusOK, EntryJSON{
		Version: c.Version, Hash: c.Hash, LoadedAt: h.opts.Now().UTC(), Result: policy.ResultOK,
		Trigger: string(policy.TriggerRollback), Active: h.opts.Store.Load() == c,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
