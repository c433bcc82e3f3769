package policy

import (
	"strings"
	"testing"
	"time"
)

// probePolicy is a policy whose upstream "u" has the given fields (after
// shape) and whose top level has extra.
func probePolicy(upstream, extra string) string {
	return `{"upstreams": {"u": {"shape": "openai", "base_url": "https://gw.example.com/v1"` + upstream + `}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com"}, "chain": ["u"]}]` + extra + `}`
}

func TestProbeDefaultsAndModel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, upstream string
		want           Probe
	}{
		{"absent", `, "auth": {"env": "BACKUP_KEY"}`, Probe{}},
		{"empty section", `, "auth": {"env": "BACKUP_KEY"}, "probe": {}`,
			Probe{Interval: DefaultProbeInterval, Timeout: DefaultProbeTimeout, Request: ProbeModels}},
		{"auth none", `, "auth": {"none": true}, "probe": {"interval": "10s", "timeout": "2s"}`,
			Probe{Interval: 10 * time.Second, Timeout: 2 * time.Second, Request: ProbeModels}},
		{"completion, model from models", `, "auth": {"env": "BACKUP_KEY"}, "models": {"gpt-4o*": "big", "*": "small"}, "probe": {"request": "completion"}`,
			Probe{Interval: DefaultProbeInterval, Timeout: DefaultProbeTimeout, Request: ProbeCompletion, Model: "big"}},
		{"completion, own model", `, "auth": {"env": "BACKUP_KEY"}, "models": {"*": "small"}, "probe": {"request": "completion", "model": "tiny"}`,
			Probe{Interval: DefaultProbeInterval, Timeout: DefaultProbeTimeout, Request: ProbeCompletion, Model: "tiny"}},
	} {
		c, err := Compile("policy.json", []byte(probePolicy(tc.upstream, "")), testOptions())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := c.Upstreams["u"].Probe; got != tc.want {
			t.Errorf("%s: probe = %+v; want %+v", tc.name, got, tc.want)
		}
		if got := c.Upstreams["u"].Probe.Enabled(); got != (tc.want != Probe{}) {
			t.Errorf("%s: Enabled() = %t", tc.name, got)
		}
	}
}

// A probe that would need the app's key, or that could not act, is refused
// when the policy loads, with the field and the way out.
func TestProbeRefusals(t *testing.T) {
	t.Parallel()
	key := `, "auth": {"env": "BACKUP_KEY"}`
	for _, tc := range []struct {
		name, upstream, extra, want string
	}{
		{"app's key", `, "auth": {"from": "client"}, "probe": {}`, "", `upstreams.u.probe: probes never use the app's own key`},
		{"breaker off", key + `, "probe": {}`, `, "breaker": {"enabled": false}`, "breaker.enabled is false"},
		{"interval too short", key + `, "probe": {"interval": "100ms", "timeout": "50ms"}`, "", "upstreams.u.probe.interval: must be at least 1s"},
		{"timeout not shorter", key + `, "probe": {"interval": "5s", "timeout": "5s"}`, "", "upstreams.u.probe.timeout: 5s is not shorter than interval"},
		{"unknown request", key + `, "probe": {"request": "ping"}`, "", `upstreams.u.probe.request: must be "models" or "completion"`},
		{"completion without model", key + `, "probe": {"request": "completion"}`, "", "a completion probe needs a model"},
		{"model on models probe", key + `, "probe": {"model": "gpt-4o"}`, "", `only a "completion" probe asks for a model`},
	} {
		_, err := Compile("policy.json", []byte(probePolicy(tc.upstream, tc.extra)), testOptions())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one containing %q", tc.name, err, tc.want)
		}
	}
	static := `{"upstreams": {"s": {"shape": "static", "text": "busy", "probe": {}}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com"}, "chain": ["s"]}]}`
	if _, err := Compile("policy.json", []byte(static), testOptions()); err == nil || !strings.Contains(err.Error(), "nothing to probe") {
		t.Errorf("static upstream with a probe: error %v; want it refused", err)
	}
	bedrock := `{"upstreams": {"b": {"shape": "bedrock", "bedrock": {"region": "eu-west-1"}, "models": {"*": "m"}, "probe": {}}},
  "routes": [{"name": "chat", "match": {"host": "api.anthropic.com"}, "chain": ["b"]}]}`
	if _, err := Compile("policy.json", []byte(bedrock), testOptions()); err == nil || !strings.Contains(err.Error(), `upstreams.b.probe.request: azure-openai, bedrock and vertex upstreams are probed with a one-token completion: set "request": "completion"`) {
		t.Errorf("bedrock upstream with a models probe: error %v; want it refused", err)
	}
	completion := strings.Replace(bedrock, `"probe": {}`, `"probe": {"request": "completion"}`, 1)
	c, err := Compile("policy.json", []byte(completion), testOptions())
	if err != nil {
		t.Fatalf("bedrock upstream with a completion probe: %v", err)
	}
	if p := c.Upstreams["b"].Probe; p.Request != ProbeCompletion || p.Model != "m" {
		t.Errorf("bedrock probe %+v; want a completion probe of the models entry's model", p)
	}
}
