package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The sidecar's binary carries what it runs and no more: the vendor SDKs
// are for tests, the Kubernetes types are detour-webhook's (which `detour
// inject` execs), and test packages never reach a binary. The README's
// "Footprint" figures depend on it.
func TestBinariesLeaveOutWhatTheyDoNotRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	sdks := []string{"github.com/openai/openai-go", "github.com/anthropics/anthropic-sdk-go", "google.golang.org/genai"}
	tests := []string{"net/http/httptest", "testing"}
	k8s := []string{"k8s.io", "sigs.k8s.io"}
	// The OTLP exporter is detour's own (internal/telemetry/client.go):
	// grpc-go would add some 5 MB to the sidecar. So is its encoding
	// (otlp.go): the generated OTLP messages are for tests.
	grpc := []string{"google.golang.org/grpc", "go.opentelemetry.io/proto"}
	// The cloud credentials are detour's own (internal/cloud, internal/sigv4,
	// internal/eventstream): the SDKs they replace are for tests.
	clouds := []string{"github.com/aws", "golang.org/x/oauth2", "cloud.google.com/go"}
	// /metrics is detour's own (internal/metrics): the Prometheus client
	// brought its data model, procfs and the protobuf runtime along, which
	// nothing else in the sidecar needs.
	prom := []string{"github.com/prometheus", "google.golang.org/protobuf"}
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{".", append(append(append(append(append(append([]string(nil), sdks...), tests...), k8s...), grpc...), clouds...), prom...)},
		{".", []string{"github.com/redis"}}, // the Redis client is detour's own (internal/fleet/resp): go-redis cost some 2 MB
		{"./cmd/detour-webhook", append(append([]string(nil), sdks...), tests...)},
	} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tc.pkg)
		// GOGC=off: a go list of a second or less spends some 40 % of its
		// CPU collecting garbage the exit gives back anyway; the list is
		// the same.
		cmd.Env = append(os.Environ(), "GOGC=off")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range tc.forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s imports %s", tc.pkg, dep)
				}
			}
		}
	}
}
