package policy

import (
	"bufio"
	"bytes"
	"fmt"
	"net/textproto"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
)

// This file compiles the telemetry section: where detour sends its
// OpenTelemetry traces (one span per request, one per attempt). The same
// settings can come from the standard OTEL_EXPORTER_OTLP_* variables, so
// that a pod already wired for a collector needs no policy change; a field
// the policy sets wins over its variable.

// Telemetry protocols: the two OTLP transports detour's exporter speaks.
const (
	ProtocolHTTPProtobuf = "http/protobuf"
	ProtocolGRPC         = "grpc"
)

// DefaultTelemetryProtocol is telemetry.otlp.protocol's default (the
// OpenTelemetry specification's default too).
const DefaultTelemetryProtocol = ProtocolHTTPProtobuf

// DefaultSampleRatio is telemetry.otlp.sample_ratio's default: every
// request is traced.
const DefaultSampleRatio = 1.0

// OTLPTracesPath is the path an OTLP/HTTP collector takes traces on; it is
// added to an endpoint that names no path.
const OTLPTracesPath = "/v1/traces"

// TelemetryFile is the telemetry section of policy.json.
type TelemetryFile struct {
	// OTLP sends traces to an OpenTelemetry collector. Absent: the
	// OTEL_EXPORTER_OTLP_* variables decide; with neither, tracing is off.
	OTLP *OTLPFile `json:"otlp,omitempty"`
}

// OTLPFile configures the OTLP trace exporter. Each field the policy leaves
// out is taken from its standard OpenTelemetry variable when that is set.
type OTLPFile struct {
	// Endpoint is the collector's URL, http:// or https://, e.g.
	// "http://otel-collector:4318" (http/protobuf) or
	// "http://otel-collector:4317" (grpc). For http/protobuf a URL without
	// a path gets /v1/traces; a path given is used as it is. For grpc only
	// the host and port are used, and the scheme says whether TLS is used.
	// Default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as it is), else
	// OTEL_EXPORTER_OTLP_ENDPOINT (with /v1/traces added for
	// http/protobuf); neither: tracing is off.
	Endpoint string `json:"endpoint,omitempty"`
	// Protocol is "http/protobuf" or "grpc". Default
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
	// else DefaultTelemetryProtocol.
	Protocol string `json:"protocol,omitempty"`
	// HeadersFile names a file of headers sent with every export (a
	// collector's or vendor's API key), one "Name: value" per line; blank
	// lines and lines starting with # are skipped. Relative paths are
	// resolved against the policy file's directory; the file is read at
	// every policy load. Default: OTEL_EXPORTER_OTLP_TRACES_HEADERS, else
	// OTEL_EXPORTER_OTLP_HEADERS ("k1=v1,k2=v2"); neither: no headers.
	HeadersFile string `json:"headers_file,omitempty"`
	// SampleRatio is the share of requests traced, from 0 to 1, decided
	// per trace id. A request whose app sent a sampled traceparent is
	// always traced and one whose traceparent says not sampled never is
	// (the app's decision is kept). 0 traces only what the app asks for.
	// Default: OTEL_TRACES_SAMPLER_ARG when OTEL_TRACES_SAMPLER is
	// traceidratio or parentbased_traceidratio, else DefaultSampleRatio.
	SampleRatio *float64 `json:"sample_ratio,omitempty"`
}

// TelemetryPolicy is the compiled telemetry section, the variables folded
// in. The zero value is tracing off.
type TelemetryPolicy struct {
	// Endpoint is the collector URL (for http/protobuf with its path);
	// "" when tracing is off.
	Endpoint string
	// Protocol is ProtocolHTTPProtobuf or ProtocolGRPC.
	Protocol string
	// Headers are sent with every export; nil when none.
	Headers map[string]Secret
	// SampleRatio is the share of requests traced that come without a
	// traceparent.
	SampleRatio float64
	// From says where the endpoint came from: "policy" or the name of the
	// variable, for the start-up log.
	From string
	// key identifies the settings: equal keys, same exporter and sampler.
	key string
}

// Enabled reports whether detour exports traces.
func (t TelemetryPolicy) Enabled() bool { return t.Endpoint != "" }

// Key identifies the settings, headers included: two policies with the same
// key need no new exporter.
func (t TelemetryPolicy) Key() string { return t.key }

// Secure reports whether the endpoint is https (TLS); grpc uses it to
// choose its transport credentials.
func (t TelemetryPolicy) Secure() bool { return strings.HasPrefix(t.Endpoint, "https://") }

func (k *compiler) telemetry(tf *TelemetryFile) {
	var o OTLPFile
	if tf != nil && tf.OTLP != nil {
		o = *tf.OTLP
	}
	lookup := k.opts.TelemetryEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env := func(names ...string) (string, string) {
		for _, n := range names {
			if v, ok := lookup(n); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v), n
			}
		}
		return "", ""
	}
	if v, _ := env("OTEL_SDK_DISABLED"); strings.EqualFold(v, "true") && o.Endpoint == "" {
		return
	}
	t := TelemetryPolicy{Protocol: o.Protocol, SampleRatio: DefaultSampleRatio, From: "policy"}
	// An error in a variable's value names the variable.
	protoFrom := ""
	if t.Protocol == "" {
		var from string
		t.Protocol, from = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
		if from != "" {
			protoFrom = from + ": "
		} else {
			t.Protocol = DefaultTelemetryProtocol
		}
	}
	switch t.Protocol {
	case ProtocolHTTPProtobuf, ProtocolGRPC:
	default:
		k.errorf("telemetry.otlp.protocol", "%smust be %q or %q; got %q", protoFrom, ProtocolHTTPProtobuf, ProtocolGRPC, t.Protocol)
		return
	}

	raw, asIs := o.Endpoint, false
	if raw == "" {
		if v, from := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); from != "" {
			raw, asIs, t.From = v, true, from
		} else if v, from := env("OTEL_EXPORTER_OTLP_ENDPOINT"); from != "" {
			raw, t.From = v, from
		}
	} else if k.present("telemetry.otlp.endpoint") && strings.TrimSpace(raw) == "" {
		k.errorf("telemetry.otlp.endpoint", "must be the collector's URL, e.g. %q, or be left out", "http://otel-collector:4318")
		return
	}
	if raw == "" {
		if tf != nil && tf.OTLP != nil {
			k.errorf("telemetry.otlp.endpoint", "is required when telemetry.otlp is present (or set OTEL_EXPORTER_OTLP_ENDPOINT), e.g. %q", "http://otel-collector:4318")
		}
		return
	}
	ep, err := otlpEndpoint(raw, t.Protocol, asIs || o.Endpoint != "")
	if err != nil {
		if t.From != "policy" {
			err = fmt.Errorf("%s: %w", t.From, err)
		}
		k.errorf("telemetry.otlp.endpoint", "%v", err)
		return
	}
	t.Endpoint = ep

	if o.HeadersFile != "" {
		path := k.resolve(o.HeadersFile)
		b, err := k.readRef(path)
		if err != nil {
			k.errorf("telemetry.otlp.headers_file", "cannot read %s: %v", path, err)
			return
		}
		h, err := parseHeaderLines(b)
		if err != nil {
			k.errorf("telemetry.otlp.headers_file", "%s: %v", path, err)
			return
		}
		t.Headers = h
	} else if v, from := env("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"); from != "" {
		h, err := parseHeaderList(v)
		if err != nil {
			k.errorf("telemetry.otlp.headers_file", "%s: %v", from, err)
			return
		}
		t.Headers = h
	}

	switch {
	case o.SampleRatio != nil:
		if r := *o.SampleRatio; r < 0 || r > 1 {
			k.errorf("telemetry.otlp.sample_ratio", "must be from 0 to 1, e.g. 0.1 for one request in ten; got %g", r)
			return
		}
		t.SampleRatio = *o.SampleRatio
	default:
		s, _ := env("OTEL_TRACES_SAMPLER")
		arg, from := env("OTEL_TRACES_SAMPLER_ARG")
		if (s == "traceidratio" || s == "parentbased_traceidratio") && from != "" {
			r, err := strconv.ParseFloat(arg, 64)
			if err != nil || r < 0 || r > 1 {
				k.errorf("telemetry.otlp.sample_ratio", "%s: must be a ratio from 0 to 1; got %q", from, arg)
				return
			}
			t.SampleRatio = r
		}
	}
	t.key = t.keyOf()
	k.fp.Write([]byte("telemetry:" + t.key))
	k.c.Telemetry = t
}

// keyOf is every setting in one string (headers sorted).
func (t TelemetryPolicy) keyOf() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%g", t.Protocol, t.Endpoint, t.SampleRatio)
	names := make([]string, 0, len(t.Headers))
	for n := range t.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b.WriteString("|" + n + "=" + string(t.Headers[n]))
	}
	return b.String()
}

// otlpEndpoint checks a collector URL and, for http/protobuf, adds the
// traces path when asIs is false (OTEL_EXPORTER_OTLP_ENDPOINT is a base
// URL by the specification) or when a policy endpoint names no path.
func otlpEndpoint(raw, protocol string, asIs bool) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("must start with http:// or https://, e.g. %q; got %q", "http://otel-collector:4318", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("names no host: %q", raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("must not carry credentials in the URL; put them in headers_file")
	}
	if protocol == ProtocolGRPC {
		// gRPC dials host:port; a path means nothing to it.
		return u.Scheme + "://" + u.Host, nil
	}
	switch {
	case u.Path == "" || u.Path == "/":
		u.Path = OTLPTracesPath
	case !asIs:
		u.Path = strings.TrimSuffix(u.Path, "/") + OTLPTracesPath
	}
	return u.String(), nil
}

// parseHeaderLines reads "Name: value" lines.
func parseHeaderLines(b []byte) (map[string]Secret, error) {
	h := map[string]Secret{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: want \"Name: value\"", n)
		}
		if err := addHeader(h, name, value); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return h, nil
}

// parseHeaderList reads the variables' "k1=v1,k2=v2" form, values
// percent-encoded (the OpenTelemetry specification's format).
func parseHeaderList(s string) (map[string]Secret, error) {
	h := map[string]Secret{}
	for item := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("want k1=v1,k2=v2; %q has no =", strings.TrimSpace(name))
		}
		v, err := url.PathUnescape(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("header %s: %v", strings.TrimSpace(name), err)
		}
		if err := addHeader(h, name, v); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func addHeader(h map[string]Secret, name, value string) error {
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("%q is not a header name", name)
	}
	if value == "" {
		return fmt.Errorf("header %s has no value", name)
	}
	h[textproto.CanonicalMIMEHeaderKey(name)] = Secret(value)
	return nil
}
