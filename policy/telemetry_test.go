package policy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// compileTelemetry compiles the base policy plus top with env as the
// process environment.
func compileTelemetry(t *testing.T, top string, env map[string]string) (*Compiled, error) {
	t.Helper()
	o := testOptions()
	o.BaseDir = t.TempDir()
	// auth.env's lookup answers for every name, as a caller's stub
	// may: the OTEL_* variables have a lookup of their own.
	o.Getenv = func(string) (string, bool) { return "sk-backup", true }
	o.TelemetryEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := os.WriteFile(filepath.Join(o.BaseDir, "otlp-headers"), []byte("# the collector's key\nAuthorization: Bearer s3cret\n\nx-team:  core \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Compile("policy.json", []byte(policyParts{top: top}.String()), o)
}

func TestTelemetrySettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		top  string
		env  map[string]string
		want TelemetryPolicy // key not compared
	}{
		{"off by default", "", nil, TelemetryPolicy{}},
		{"policy endpoint gets the traces path", `"telemetry": {"otlp": {"endpoint": "http://otel-collector:4318"}}`, nil,
			TelemetryPolicy{Endpoint: "http://otel-collector:4318/v1/traces", Protocol: ProtocolHTTPProtobuf, SampleRatio: 1, From: "policy"}},
		{"policy endpoint with a path is kept", `"telemetry": {"otlp": {"endpoint": "https://gw.example.com/otlp/traces", "sample_ratio": 0.25}}`, nil,
			TelemetryPolicy{Endpoint: "https://gw.example.com/otlp/traces", Protocol: ProtocolHTTPProtobuf, SampleRatio: 0.25, From: "policy"}},
		{"grpc keeps host and port", `"telemetry": {"otlp": {"endpoint": "http://otel-collector:4317/", "protocol": "grpc", "sample_ratio": 0}}`, nil,
			TelemetryPolicy{Endpoint: "http://otel-collector:4317", Protocol: ProtocolGRPC, SampleRatio: 0, From: "policy"}},
		{"headers file", `"telemetry": {"otlp": {"endpoint": "http://c:4318", "headers_file": "otlp-headers"}}`, nil,
			TelemetryPolicy{Endpoint: "http://c:4318/v1/traces", Protocol: ProtocolHTTPProtobuf, SampleRatio: 1, From: "policy",
				Headers: map[string]Secret{"Authorization": "Bearer s3cret", "X-Team": "core"}}},
		{"base endpoint from the environment", "", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/base/", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x-team=core",
			"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"},
			TelemetryPolicy{Endpoint: "http://collector:4318/base/v1/traces", Protocol: ProtocolHTTPProtobuf, SampleRatio: 0.5,
				From: "OTEL_EXPORTER_OTLP_ENDPOINT", Headers: map[string]Secret{"Api-Key": "a b", "X-Team": "core"}}},
		{"traces endpoint from the environment is used as it is", "", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/custom",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
			TelemetryPolicy{Endpoint: "http://collector:4318/custom", Protocol: ProtocolHTTPProtobuf, SampleRatio: 1, From: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}},
		{"the policy wins over the environment", `"telemetry": {"otlp": {"endpoint": "http://policy:4317", "protocol": "grpc", "headers_file": "otlp-headers", "sample_ratio": 0.1}}`,
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
				"OTEL_EXPORTER_OTLP_HEADERS": "k=v", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1"},
			TelemetryPolicy{Endpoint: "http://policy:4317", Protocol: ProtocolGRPC, SampleRatio: 0.1, From: "policy",
				Headers: map[string]Secret{"Authorization": "Bearer s3cret", "X-Team": "core"}}},
		{"a field the policy leaves out comes from the environment", `"telemetry": {"otlp": {"endpoint": "http://policy:4317"}}`,
			map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_HEADERS": "k=v"},
			TelemetryPolicy{Endpoint: "http://policy:4317", Protocol: ProtocolGRPC, SampleRatio: 1, From: "policy", Headers: map[string]Secret{"K": "v"}}},
		{"OTEL_SDK_DISABLED turns the environment's tracing off", "", map[string]string{
			"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, TelemetryPolicy{}},
	}
	for _, tt := range tests {
		c, err := compileTelemetry(t, tt.top, tt.env)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		got := c.Telemetry
		got.key = ""
		if got.Endpoint != tt.want.Endpoint || got.Protocol != tt.want.Protocol || got.SampleRatio != tt.want.SampleRatio ||
			got.From != tt.want.From || !mapsEqual(got.Headers, tt.want.Headers) {
			t.Errorf("%s: Telemetry = %+v\nwant %+v", tt.name, got, tt.want)
		}
		if got.Enabled() != (tt.want.Endpoint != "") {
			t.Errorf("%s: Enabled = %v", tt.name, got.Enabled())
		}
	}
}

func mapsEqual(a, b map[string]Secret) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestTelemetryKeyChangesWithEverySetting(t *testing.T) {
	t.Parallel()
	keys := map[string]string{}
	for _, top := range []string{
		`"telemetry": {"otlp": {"endpoint": "http://c:4318"}}`,
		`"telemetry": {"otlp": {"endpoint": "http://d:4318"}}`,
		`"telemetry": {"otlp": {"endpoint": "http://c:4318", "protocol": "grpc"}}`,
		`"telemetry": {"otlp": {"endpoint": "http://c:4318", "sample_ratio": 0.5}}`,
		`"telemetry": {"otlp": {"endpoint": "http://c:4318", "headers_file": "otlp-headers"}}`,
	} {
		c, err := compileTelemetry(t, top, nil)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := keys[c.Telemetry.Key()]; dup {
			t.Errorf("%s and %s have the same key", prev, top)
		}
		keys[c.Telemetry.Key()] = top
	}
	// The same settings twice: the same key, so a reload keeps the exporter.
	a, _ := compileTelemetry(t, `"telemetry": {"otlp": {"endpoint": "http://c:4318"}}`, nil)
	b, _ := compileTelemetry(t, `"version": "other", "telemetry": {"otlp": {"endpoint": "http://c:4318"}}`, nil)
	if a.Telemetry.Key() != b.Telemetry.Key() {
		t.Errorf("equal settings, keys %q and %q", a.Telemetry.Key(), b.Telemetry.Key())
	}
}

func TestTelemetryRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		top  string
		env  map[string]string
		want []fieldErr
	}{
		{"no endpoint", `"telemetry": {"otlp": {"protocol": "grpc"}}`, nil,
			[]fieldErr{{"telemetry.otlp.endpoint", `is required when telemetry.otlp is present (or set OTEL_EXPORTER_OTLP_ENDPOINT), e.g. "http://otel-collector:4318"`}}},
		{"bad protocol", `"telemetry": {"otlp": {"endpoint": "http://c:4318", "protocol": "http/json"}}`, nil,
			[]fieldErr{{"telemetry.otlp.protocol", `must be "http/protobuf" or "grpc"; got "http/json"`}}},
		{"bad protocol from the environment", `"telemetry": {"otlp": {"endpoint": "http://c:4318"}}`, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"},
			[]fieldErr{{"telemetry.otlp.protocol", `OTEL_EXPORTER_OTLP_PROTOCOL: must be "http/protobuf" or "grpc"; got "thrift"`}}},
		{"not a URL scheme", `"telemetry": {"otlp": {"endpoint": "otel-collector:4318"}}`, nil,
			[]fieldErr{{"telemetry.otlp.endpoint", `must start with http:// or https://, e.g. "http://otel-collector:4318"; got "otel-collector:4318"`}}},
		{"credentials in the URL", `"telemetry": {"otlp": {"endpoint": "https://u:p@c:4318"}}`, nil,
			[]fieldErr{{"telemetry.otlp.endpoint", `must not carry credentials in the URL; put them in headers_file`}}},
		{"bad endpoint from the environment", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector"},
			[]fieldErr{{"telemetry.otlp.endpoint", `OTEL_EXPORTER_OTLP_ENDPOINT: must start with http:// or https://, e.g. "http://otel-collector:4318"; got "collector"`}}},
		{"ratio above 1", `"telemetry": {"otlp": {"endpoint": "http://c:4318", "sample_ratio": 1.5}}`, nil,
			[]fieldErr{{"telemetry.otlp.sample_ratio", "must be from 0 to 1, e.g. 0.1 for one request in ten; got 1.5"}}},
		{"bad ratio from the environment", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"},
			[]fieldErr{{"telemetry.otlp.sample_ratio", `OTEL_TRACES_SAMPLER_ARG: must be a ratio from 0 to 1; got "half"`}}},
		{"bad headers from the environment", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key"},
			[]fieldErr{{"telemetry.otlp.headers_file", `OTEL_EXPORTER_OTLP_HEADERS: want k1=v1,k2=v2; "api-key" has no =`}}},
	}
	for _, tt := range tests {
		_, err := compileTelemetry(t, tt.top, tt.env)
		var es Errors
		if !errors.As(err, &es) {
			t.Errorf("%s: err = %v; want Errors", tt.name, err)
			continue
		}
		var got []fieldErr
		for _, e := range es {
			if e.Line == 0 || e.File != "policy.json" {
				t.Errorf("%s: error without file and line: %+v", tt.name, e)
			}
			got = append(got, fieldErr{e.Field, e.Msg})
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: errors\n%v\nwant\n%v", tt.name, got, tt.want)
		}
	}
}

func TestTelemetryHeadersFileRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("Authorization: Bearer x\nno colon here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{bad, bad + `: line 2: want "Name: value"`},
		{filepath.Join(dir, "missing"), "cannot read " + filepath.Join(dir, "missing") + ": open " + filepath.Join(dir, "missing") + ": no such file or directory"},
	} {
		_, err := compileTelemetry(t, `"telemetry": {"otlp": {"endpoint": "http://c:4318", "headers_file": "`+tc.file+`"}}`, nil)
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 || es[0].Field != "telemetry.otlp.headers_file" || es[0].Msg != tc.want || es[0].Line == 0 {
			t.Errorf("headers_file %s: err = %v; want telemetry.otlp.headers_file: %s", tc.file, err, tc.want)
		}
	}
}
