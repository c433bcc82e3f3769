package policy

import (
	"strings"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// Defaults and bounds of upstreams.NAME.probe.
const (
	// DefaultProbeInterval is the gap between two probes of an upstream
	// (jittered by ±ProbeJitter so that a fleet's probes do not arrive
	// together).
	DefaultProbeInterval = 30 * time.Second
	// MinProbeInterval keeps probes from becoming load: a vendor's model
	// list is cheap, not free, and counts against the key's rate limit.
	MinProbeInterval = time.Second
	// DefaultProbeTimeout bounds one probe, from sending it to its whole
	// answer.
	DefaultProbeTimeout = 5 * time.Second
	// ProbeJitter is the share of the interval a probe may come early or
	// late.
	ProbeJitter = 0.1
)

// ProbeRequest is what a probe asks its upstream.
type ProbeRequest string

// The requests a probe can send.
const (
	// ProbeModels lists the vendor's models (GET /v1/models, Gemini's GET
	// /v1beta/models): it spends no tokens, and checks that the upstream
	// answers and accepts the credential, not that it can complete.
	ProbeModels ProbeRequest = "models"
	// ProbeCompletion asks for a one-token completion in the upstream's
	// shape, of the probe's model: the same path an app's request takes,
	// at the price of a token per probe.
	ProbeCompletion ProbeRequest = "completion"
)

// ProbeFile is upstreams.NAME.probe. The section's presence turns probes on
// for the upstream; every field may be left out.
type ProbeFile struct {
	// Interval is the gap between probes, jittered by ±10 %. Default
	// DefaultProbeInterval; at least MinProbeInterval.
	Interval Duration `json:"interval,omitempty"`
	// Timeout bounds one probe, answer included; a probe that runs out of
	// it is a timeout, as an attempt's would be. Default
	// DefaultProbeTimeout; shorter than Interval.
	Timeout Duration `json:"timeout,omitempty"`
	// Request is "models" (the vendor's model list; default) or
	// "completion" (a one-token completion).
	Request string `json:"request,omitempty"`
	// Model is the model a completion probe asks for. Default: the target
	// of the upstream's first models entry; a completion probe of an
	// upstream without models needs it. Refused for a models probe.
	Model string `json:"model,omitempty"`
}

// Probe is a compiled upstreams.NAME.probe. The zero value is no probe.
type Probe struct {
	// Interval is the mean gap between probes; 0: the upstream is not
	// probed.
	Interval time.Duration
	// Timeout bounds one probe.
	Timeout time.Duration
	// Request is what the probe sends.
	Request ProbeRequest
	// Model is the completion probe's model; "" for a models probe.
	Model string
}

// Enabled reports whether the upstream is probed.
func (p Probe) Enabled() bool { return p.Interval > 0 }

// probes compiles every upstream's probe section, after the upstreams and
// the breaker: a probe acts only through the breaker, and never with the
// app's own key.
func (k *compiler) probes(ups map[string]UpstreamFile) {
	for _, name := range sortedKeys(ups) {
		pf := ups[name].Probe
		if pf == nil {
			continue
		}
		p := "upstreams." + name + ".probe"
		u := k.c.Upstreams[name]
		if u == nil {
			continue // refused already; its own errors say why
		}
		if pr, ok := k.probe(p, pf, u); ok {
			u.Probe = pr
		}
	}
}

func (k *compiler) probe(p string, pf *ProbeFile, u *Upstream) (Probe, bool) {
	ok := true
	refuse := func(field, format string, args ...any) {
		k.errorf(p+field, format, args...)
		ok = false
	}
	switch {
	case u.Static:
		refuse("", "a static upstream sends nothing, so there is nothing to probe")
	case u.Auth == AuthClient:
		// The probe runs on its own, with no app request to take a key
		// from; borrowing one an app sent earlier would spend the app's
		// quota (and bill) on detour's checks.
		refuse("", `probes never use the app's own key, and this upstream only forwards it (auth.from "client"): give it a key of its own (auth.env or auth.file), or remove the probe`)
	case u.Cloud != nil && pf.Request != string(ProbeCompletion):
		// A cloud's model list is not where detour sends requests: Bedrock's
		// and Vertex's are control-plane APIs with their own permissions, so
		// a passing list would not say that inference works. A one-token
		// completion goes the attempts' way, signed as they are.
		refuse(".request", `azure-openai, bedrock and vertex upstreams are probed with a one-token completion: set "request": "completion" (and "model", or the upstream's models)`)
	case !k.c.Breaker.Enabled:
		refuse("", "a probe acts through the circuit breaker, and breaker.enabled is false: turn the breaker on or remove the probe")
	}
	pr := Probe{
		Interval: k.duration(p+".interval", pf.Interval, DefaultProbeInterval),
		Timeout:  k.duration(p+".timeout", pf.Timeout, DefaultProbeTimeout),
		Request:  ProbeRequest(pf.Request),
	}
	switch {
	case pr.Interval < MinProbeInterval:
		refuse(".interval", "must be at least %s; got %s", MinProbeInterval, pr.Interval)
	case pr.Timeout <= 0:
		refuse(".timeout", "must be positive; got %s", pr.Timeout)
	case pr.Timeout >= pr.Interval:
		refuse(".timeout", "%s is not shorter than interval (%s): probes would overlap", pr.Timeout, pr.Interval)
	}
	switch pr.Request {
	case "":
		pr.Request = ProbeModels
		fallthrough
	case ProbeModels:
		if pf.Model != "" {
			refuse(".model", `only a "completion" probe asks for a model; a "models" probe lists them`)
		}
	case ProbeCompletion:
		pr.Model = strings.TrimSpace(pf.Model)
		if pr.Model == "" && len(u.Models) > 0 {
			pr.Model = u.Models[0].Model
		}
		if pr.Model == "" {
			refuse(".model", "a completion probe needs a model: set probe.model, or models on the upstream (the first entry's model is used)")
		}
	default:
		refuse(".request", `must be "models" or "completion"; got %q`, pf.Request)
	}
	switch u.Shape {
	case rewrite.OpenAI, rewrite.Anthropic, rewrite.Gemini, rewrite.Bedrock:
	default:
		if !u.Static {
			refuse("", "probes speak openai, anthropic, gemini and bedrock; this upstream's shape is %q", u.Shape)
		}
	}
	return pr, ok
}
