package main

import (
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
	// grpc-go would add some 5 MB to the sidecar.
	grpc := []string{"google.golang.org/grpc"}
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{".", append(append(append(append([]string(nil), sdks...), tests...), k8s...), grpc...)},
		{".", []string{"github.com/redis"}}, // the Redis client is detour's own (internal/fleet/resp): go-redis cost some 2 MB
		{"./cmd/detour-webhook", append(append([]string(nil), sdks...), tests...)},
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tc.pkg).Output()
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
