package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/detour-proxy/detour/internal/testsupport"
)

func ptr[T any](v T) *T { return &v }

// testConfig is what the chart renders for a release named detour on a
// cluster with native sidecars.
var testConfig = Config{
	Image:          "ghcr.io/detour-proxy/detour:0.1.0",
	NativeSidecars: ptr(true),
}

// review posts the AdmissionReview in testdata/name.json to a Handler and
// returns the response.
func review(t *testing.T, cfg Config, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	srv := httptest.NewServer(&Handler{Config: cfg, Log: zerolog.Nop()})
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	var ar admissionv1.AdmissionReview
	if err := strictUnmarshal(out, &ar); err != nil {
		t.Fatalf("response is not an AdmissionReview: %v\n%s", err, out)
	}
	if ar.APIVersion != "admission.k8s.io/v1" || ar.Kind != "AdmissionReview" || ar.Response == nil {
		t.Fatalf("response is not an admission.k8s.io/v1 AdmissionReview with a response: %s", out)
	}
	return ar.Response
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func readReview(t *testing.T, name string) (body []byte, req *admissionv1.AdmissionRequest) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var ar admissionv1.AdmissionReview
	if err := strictUnmarshal(body, &ar); err != nil {
		t.Fatalf("testdata/%s.json is not a strict AdmissionReview: %v", name, err)
	}
	return body, ar.Request
}

// TestInjectReviews runs every AdmissionReview in testdata through the
// webhook, compares the patch with its golden file, applies it, and checks
// that the result is a valid pod with detour wired as promised, and that a
// second review of that pod changes nothing.
func TestInjectReviews(t *testing.T) {
	fileMode := testConfig
	fileMode.KeysSecret, fileMode.KeysMode, fileMode.NoProxy = "llm-keys", KeysModeFile, []string{"corp.internal"}
	for _, tc := range []struct {
		name   string
		cfg    Config
		inject bool
		native bool
	}{
		{"labelled", testConfig, true, true},
		{"namespace-opt-in", testConfig, true, true},
		{"existing-env", testConfig, true, true},
		{"init-containers-volumes", testConfig, true, true},
		{"several-containers", testConfig, true, false},
		{"selected-containers", fileMode, true, true},
		{"opted-out", testConfig, false, false},
		{"already-injected", testConfig, false, false},
		{"manual-sidecar", testConfig, false, false},
		{"host-network", testConfig, false, false},
		{"update", testConfig, false, false},
		{"transparent", transparentConfig, true, true},
		{"interception-annotation", testConfig, true, true},
		{"interception-proxy-env", transparentConfig, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, req := readReview(t, tc.name)
			resp := review(t, tc.cfg, body)
			if resp.UID != req.UID || !resp.Allowed {
				t.Fatalf("uid %q allowed %v; want uid %q allowed", resp.UID, resp.Allowed, req.UID)
			}
			if !tc.inject {
				if resp.Patch != nil || resp.PatchType != nil {
					t.Fatalf("patched a pod that must be left alone: %s", resp.Patch)
				}
				return
			}
			if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("patchType %v; want JSONPatch", resp.PatchType)
			}
			golden(t, filepath.Join("testdata", tc.name+".patch.json"), resp.Patch)

			patched, err := applyPatch(req.Object.Raw, resp.Patch)
			if err != nil {
				t.Fatalf("applying the patch: %v", err)
			}
			var before, after corev1.Pod
			if err := json.Unmarshal(req.Object.Raw, &before); err != nil {
				t.Fatal(err)
			}
			if err := strictUnmarshal(patched, &after); err != nil {
				t.Fatalf("patched pod does not decode strictly into corev1.Pod: %v", err)
			}
			if errs := validatePod(&after); len(errs) > 0 {
				t.Fatalf("patched pod is invalid:\n%s", strings.Join(errs, "\n"))
			}
			checkInjected(t, tc.cfg, &before, &after, tc.native)

			// Idempotence: the webhook may be called again on its own output.
			again := strings.Replace(string(body), string(req.Object.Raw), string(patched), 1)
			if again == string(body) {
				again = rewriteObject(t, body, patched)
			}
			if resp := review(t, tc.cfg, []byte(again)); resp.Patch != nil || !resp.Allowed {
				t.Fatalf("second review of the injected pod: allowed %v patch %s; want no patch", resp.Allowed, resp.Patch)
			}
		})
	}
}

func rewriteObject(t *testing.T, body, object []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	var obj any
	if err := json.Unmarshal(object, &obj); err != nil {
		t.Fatal(err)
	}
	m["request"].(map[string]any)["object"] = obj
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// golden compares got, indented, with the file; -update rewrites it.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	testsupport.Golden(t, path, buf.Bytes())
}

// validatePod checks what the API server's validation would refuse in what
// the injector adds: duplicate container, volume or port names, mounts of
// missing volumes, two mounts on one path, restartPolicy on a regular
// container, probes missing a handler.
func validatePod(p *corev1.Pod) []string {
	var errs []string
	names := map[string]bool{}
	all := append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...)
	for _, c := range all {
		if c.Name == "" || c.Image == "" {
			errs = append(errs, fmt.Sprintf("container %q: name and image are required", c.Name))
		}
		if names[c.Name] {
			errs = append(errs, fmt.Sprintf("container name %q is not unique", c.Name))
		}
		names[c.Name] = true
	}
	vols := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		if vols[v.Name] {
			errs = append(errs, fmt.Sprintf("volume name %q is not unique", v.Name))
		}
		vols[v.Name] = true
	}
	for _, c := range all {
		paths := map[string]bool{}
		for _, m := range c.VolumeMounts {
			if !vols[m.Name] {
				errs = append(errs, fmt.Sprintf("container %q mounts %q, which is not a volume", c.Name, m.Name))
			}
			if paths[m.MountPath] {
				errs = append(errs, fmt.Sprintf("container %q mounts two volumes on %s", c.Name, m.MountPath))
			}
			paths[m.MountPath] = true
		}
		envs := map[string]bool{}
		for _, e := range c.Env {
			if envs[e.Name] {
				errs = append(errs, fmt.Sprintf("container %q sets %s twice", c.Name, e.Name))
			}
			envs[e.Name] = true
		}
		for _, pr := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
			if pr != nil && pr.HTTPGet == nil && pr.Exec == nil && pr.TCPSocket == nil && pr.GRPC == nil {
				errs = append(errs, fmt.Sprintf("container %q has a probe without a handler", c.Name))
			}
		}
		if lim, req := c.Resources.Limits, c.Resources.Requests; lim != nil {
			for n, q := range req {
				if l, ok := lim[n]; ok && q.Cmp(l) > 0 {
					errs = append(errs, fmt.Sprintf("container %q: %s request above limit", c.Name, n))
				}
			}
		}
	}
	for _, c := range p.Spec.Containers {
		if c.RestartPolicy != nil {
			errs = append(errs, fmt.Sprintf("regular container %q may not set restartPolicy", c.Name))
		}
	}
	return errs
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func envOf(c *corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// checkInjected checks the promises of the injection on one pod.
func checkInjected(t *testing.T, cfg Config, before, after *corev1.Pod, native bool) {
	t.Helper()
	s, err := cfg.resolve(before)
	if err != nil {
		t.Fatal(err)
	}
	if after.Annotations[AnnotationStatus] != StatusInjected {
		t.Errorf("annotation %s = %q; want %q", AnnotationStatus, after.Annotations[AnnotationStatus], StatusInjected)
	}
	for k, v := range before.Annotations {
		if after.Annotations[k] != v {
			t.Errorf("annotation %s changed from %q to %q", k, v, after.Annotations[k])
		}
	}

	// detour: where the mode says, probed, non-root, and the only holder of the CA key.
	var d *corev1.Container
	if native {
		d = findContainer(after.Spec.InitContainers, ContainerName)
		if d == nil || d.RestartPolicy == nil || *d.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Fatalf("native mode: want detour as an init container with restartPolicy Always; got %+v", d)
		}
		if last := after.Spec.InitContainers[len(after.Spec.InitContainers)-1]; last.Name != ContainerName {
			t.Errorf("detour is not the last init container (%q is)", last.Name)
		}
		if findContainer(after.Spec.Containers, ContainerName) != nil {
			t.Error("native mode: detour is also a regular container")
		}
	} else {
		if after.Spec.Containers[0].Name != ContainerName {
			t.Fatalf("container mode: first container is %q; want detour", after.Spec.Containers[0].Name)
		}
		d = &after.Spec.Containers[0]
		if want := before.Spec.Containers[0].Name; after.Annotations[defaultContainerAnnotation] != want &&
			before.Annotations[defaultContainerAnnotation] == "" {
			t.Errorf("kubectl default container = %q; want %q", after.Annotations[defaultContainerAnnotation], want)
		}
	}
	if d.StartupProbe == nil || d.StartupProbe.HTTPGet == nil || d.StartupProbe.HTTPGet.Path != "/readyz" ||
		d.StartupProbe.HTTPGet.Port.IntValue() != int(s.AdminPort) {
		t.Errorf("detour startupProbe %+v; want GET /readyz on %d", d.StartupProbe, s.AdminPort)
	}
	if d.LivenessProbe == nil || d.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("detour livenessProbe %+v; want GET /healthz", d.LivenessProbe)
	}
	sc := d.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("detour securityContext %+v; want non-root, read-only root, no privilege escalation", sc)
	}
	if d.Resources.Requests.Cpu().IsZero() || d.Resources.Requests.Memory().IsZero() || d.Resources.Limits.Memory().IsZero() {
		t.Errorf("detour resources %+v; want cpu and memory requests and a memory limit", d.Resources)
	}
	wantArgs := []string{"serve", "--policy", PolicyFile}
	if s.transparent() {
		wantArgs = append(wantArgs, "--transparent", fmt.Sprintf("127.0.0.1:%d", s.TransparentPort))
	}
	if d.Image != s.Image || !slices.Equal(d.Args, wantArgs) {
		t.Errorf("detour image %q args %q", d.Image, d.Args)
	}
	checkInterception(t, s, after, d)

	vol := map[string]corev1.Volume{}
	for _, v := range after.Spec.Volumes {
		vol[v.Name] = v
	}
	if cm := vol[volPolicy].ConfigMap; cm == nil || cm.Name != s.PolicyConfigMap {
		t.Errorf("policy volume %+v; want ConfigMap %q", vol[volPolicy], s.PolicyConfigMap)
	}
	holdsKey := func(c corev1.Container) bool {
		for _, m := range c.VolumeMounts {
			sec := vol[m.Name].Secret
			if sec == nil || sec.SecretName != s.CASecret {
				continue
			}
			if len(sec.Items) == 0 || slices.ContainsFunc(sec.Items, func(k corev1.KeyToPath) bool { return k.Key == CAKeyKey }) {
				return true
			}
		}
		return false
	}
	for _, c := range append(append([]corev1.Container(nil), after.Spec.InitContainers...), after.Spec.Containers...) {
		if got := holdsKey(c); got != (c.Name == ContainerName) {
			t.Errorf("container %q mounts the CA key: %v; only detour may", c.Name, got)
		}
	}
	// The admin token, like the CA key, is detour's alone: an app holding
	// it could roll the policy back from anywhere in the cluster.
	for _, c := range append(append([]corev1.Container(nil), after.Spec.InitContainers...), after.Spec.Containers...) {
		mounts := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			sec := vol[m.Name].Secret
			return sec != nil && sec.SecretName == s.AdminTokenSecret
		})
		if mounts != (c.Name == ContainerName) {
			t.Errorf("container %q mounts the admin token Secret %q: %v; only detour may", c.Name, s.AdminTokenSecret, mounts)
		}
	}
	// On the directory, never by subPath: a subPath mount is never updated,
	// and a rotated token would not reach detour.
	tokenMount := func(m corev1.VolumeMount) bool {
		return m.Name == volAdmin && m.MountPath == AdminTokenDir && m.SubPath == ""
	}
	if !slices.ContainsFunc(d.VolumeMounts, tokenMount) || vol[volAdmin].Secret == nil || vol[volAdmin].Secret.SecretName != s.AdminTokenSecret {
		t.Errorf("detour does not mount the admin token Secret %q on %s: %+v", s.AdminTokenSecret, AdminTokenDir, d.VolumeMounts)
	}
	if !slices.ContainsFunc(d.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volPolicy && m.MountPath == policyDir }) {
		t.Errorf("detour does not mount the policy directory: %+v", d.VolumeMounts)
	}
	if tr := findContainer(after.Spec.InitContainers, TrustContainerName); tr == nil {
		t.Error("no detour-trust init container")
	} else if i, j := slices.IndexFunc(after.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == TrustContainerName }),
		slices.IndexFunc(after.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == ContainerName }); native && i > j {
		t.Error("detour-trust runs after detour")
	}

	// The original containers keep everything; the targets gain the
	// variables the user did not set, and the bundle.
	for _, b := range before.Spec.Containers {
		a := findContainer(after.Spec.Containers, b.Name)
		if a == nil {
			t.Fatalf("container %q disappeared", b.Name)
		}
		for i, e := range b.Env {
			got := a.Env[i]
			if e.Name == "NO_PROXY" || e.Name == "no_proxy" {
				if e.ValueFrom == nil && !strings.HasPrefix(got.Value, e.Value) {
					t.Errorf("%s/%s = %q lost the pod's own %q", b.Name, e.Name, got.Value, e.Value)
				}
				continue
			}
			if got.Name != e.Name || got.Value != e.Value || (e.ValueFrom == nil) != (got.ValueFrom == nil) {
				t.Errorf("%s/%s changed from %+v to %+v", b.Name, e.Name, e, got)
			}
		}
		if !reflect.DeepEqual(b.VolumeMounts, a.VolumeMounts[:len(b.VolumeMounts)]) {
			t.Errorf("%s: existing mounts changed", b.Name)
		}
		if !s.targets[b.Name] {
			if len(a.Env) != len(b.Env) || len(a.VolumeMounts) != len(b.VolumeMounts) {
				t.Errorf("container %q is not a target but was changed", b.Name)
			}
			continue
		}
		userSet := func(names ...string) bool {
			return slices.ContainsFunc(b.Env, func(e corev1.EnvVar) bool { return slices.Contains(names, e.Name) })
		}
		if s.transparent() {
			// No proxy variable at all; the bundle's variables and mount
			// are checked below as in proxy-env.
			for _, n := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY"} {
				if _, ok := envOf(a, n); ok && !userSet(n) {
					t.Errorf("%s: transparent interception added %s", b.Name, n)
				}
			}
		}
		for _, pair := range [][]string{{"HTTPS_PROXY", "https_proxy"}, {"HTTP_PROXY", "http_proxy"}} {
			if s.transparent() {
				break
			}
			for _, n := range pair {
				e, ok := envOf(a, n)
				if userSet(pair...) {
					if ok && !userSet(n) {
						t.Errorf("%s: added %s although the pod sets its pair", b.Name, n)
					}
				} else if !ok || e.Value != s.proxyURL() {
					t.Errorf("%s: %s = %q; want %s", b.Name, n, e.Value, s.proxyURL())
				}
			}
		}
		for _, n := range []string{"NO_PROXY", "no_proxy"} {
			if s.transparent() {
				break
			}
			e, _ := envOf(a, n)
			for _, want := range append(append([]string(nil), builtinNoProxy...), s.NoProxy...) {
				if !slices.Contains(strings.Split(e.Value, ","), want) {
					t.Errorf("%s: %s = %q lacks %s", b.Name, n, e.Value, want)
				}
			}
		}
		for _, n := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"} {
			if e, _ := envOf(a, n); !userSet(n) && e.Value != BundleFile {
				t.Errorf("%s: %s = %q; want %s", b.Name, n, e.Value, BundleFile)
			}
		}
		if e, _ := envOf(a, "NODE_USE_ENV_PROXY"); e.Value != "1" && !s.transparent() {
			t.Errorf("%s: NODE_USE_ENV_PROXY = %q; want 1", b.Name, e.Value)
		}
		if !slices.ContainsFunc(a.VolumeMounts, func(m corev1.VolumeMount) bool { return reflect.DeepEqual(m, appMount()) }) {
			t.Errorf("%s: no read-only mount of the bundle at %s", b.Name, TrustDir)
		}
	}
}

// TestInjectRefusals: invalid annotations and name clashes refuse the pod
// with a message naming each problem.
func TestInjectRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"bad-annotations", []string{
			`annotation detour.io/mode "sidecar": want "native" or "container"`,
			`annotation detour.io/policy "Chat_Policy"`,
			`annotation detour.io/resources-memory "lots"`,
			`annotation detour.io/containers names container "missing"`,
		}},
		{"clash", []string{`already has a volume named "detour-trust"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, req := readReview(t, tc.name)
			resp := review(t, testConfig, body)
			if resp.Allowed || resp.UID != req.UID || resp.Patch != nil {
				t.Fatalf("allowed %v uid %q patch %s; want a refusal of %q", resp.Allowed, resp.UID, resp.Patch, req.UID)
			}
			if resp.Result == nil || resp.Result.Code != http.StatusBadRequest {
				t.Fatalf("result %+v; want code 400", resp.Result)
			}
			for _, w := range tc.want {
				if !strings.Contains(resp.Result.Message, w) {
					t.Errorf("message %q lacks %q", resp.Result.Message, w)
				}
			}
		})
	}
}

func TestHostNetworkWarns(t *testing.T) {
	body, _ := readReview(t, "host-network")
	resp := review(t, testConfig, body)
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "hostNetwork") {
		t.Errorf("warnings %q; want one about hostNetwork", resp.Warnings)
	}
}

func TestHandlerRejectsMalformedRequests(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&Handler{Config: testConfig, Log: zerolog.Nop()})
	defer srv.Close()
	labelled, _ := os.ReadFile("testdata/labelled.json")
	for _, tc := range []struct {
		name, method, ctype, body string
		want                      int
	}{
		{"GET", http.MethodGet, "", "", http.StatusMethodNotAllowed},
		{"text body", http.MethodPost, "text/plain", string(labelled), http.StatusUnsupportedMediaType},
		{"not JSON", http.MethodPost, "application/json", "{", http.StatusBadRequest},
		{"v1beta1", http.MethodPost, "application/json", strings.Replace(string(labelled), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1), http.StatusBadRequest},
		{"no request", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest},
		{"too large", http.MethodPost, "application/json", `{"x":"` + strings.Repeat("a", MaxReviewBytes) + `"}`, http.StatusRequestEntityTooLarge},
		{"charset", http.MethodPost, "application/json; charset=utf-8", string(labelled), http.StatusOK},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL, strings.NewReader(tc.body))
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d; want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}

// TestNonPodRequestsAllowed: a review of anything but a pod creation is
// allowed unchanged, never refused.
func TestNonPodRequestsAllowed(t *testing.T) {
	body, _ := readReview(t, "labelled")
	for _, edit := range []struct{ from, to string }{
		{`"operation": "CREATE"`, `"operation": "CONNECT"`},
		{`"kind": "Pod"
    }`, `"kind": "Binding"
    }`},
	} {
		b := strings.Replace(string(body), edit.from, edit.to, 1)
		if b == string(body) {
			t.Fatalf("edit %q did not apply", edit.from)
		}
		resp := review(t, testConfig, []byte(b))
		if !resp.Allowed || resp.Patch != nil {
			t.Errorf("%s: allowed %v patch %s; want allowed unchanged", edit.to, resp.Allowed, resp.Patch)
		}
	}
}

// mutated runs cfg.Mutate on pod and returns the pod with the patch applied
// (strictly decoded, so that an unknown field fails) and the decision.
func mutated(t *testing.T, cfg Config, pod *corev1.Pod) (*corev1.Pod, Decision) {
	t.Helper()
	d, err := cfg.Mutate(pod)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(pod)
	ops, _ := json.Marshal(d.Patch)
	patched, err := applyPatch(raw, ops)
	if err != nil {
		t.Fatal(err)
	}
	var after corev1.Pod
	if err := strictUnmarshal(patched, &after); err != nil {
		t.Fatal(err)
	}
	return &after, d
}

// patchedPod runs the review in testdata/name.json and returns the patched pod.
func patchedPod(t *testing.T, cfg Config, name string) *corev1.Pod {
	t.Helper()
	body, req := readReview(t, name)
	resp := review(t, cfg, body)
	patched, err := applyPatch(req.Object.Raw, resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := strictUnmarshal(patched, &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

// TestAnnotationsOverrideConfig: image, mode, policy, keys and resources
// annotations reach the detour container, and another mesh's proxy gets no
// proxy variables.
func TestAnnotationsOverrideConfig(t *testing.T) {
	pod := patchedPod(t, testConfig, "several-containers")
	d := findContainer(pod.Spec.Containers, ContainerName)
	if d == nil || findContainer(pod.Spec.InitContainers, ContainerName) != nil {
		t.Fatal("detour.io/mode: container did not make detour a regular container")
	}
	if d.Image != "registry.example.com/mirror/detour:0.1.0" {
		t.Errorf("image %q; want the annotation's", d.Image)
	}
	for _, c := range []struct{ got, want string }{
		{d.Resources.Requests.Cpu().String(), "100m"},
		{d.Resources.Requests.Memory().String(), "128Mi"},
		{d.Resources.Limits.Memory().String(), "512Mi"},
	} {
		if c.got != c.want {
			t.Errorf("resources: got %s; want %s", c.got, c.want)
		}
	}
	if len(d.EnvFrom) != 1 || d.EnvFrom[0].SecretRef == nil || d.EnvFrom[0].SecretRef.Name != "llm-keys" {
		t.Errorf("envFrom %+v; want the llm-keys Secret", d.EnvFrom)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == volPolicy && v.ConfigMap.Name != "chat-policy" {
			t.Errorf("policy ConfigMap %q; want chat-policy", v.ConfigMap.Name)
		}
	}
	istio := findContainer(pod.Spec.Containers, "istio-proxy")
	if len(istio.Env) != 0 || len(istio.VolumeMounts) != 1 {
		t.Errorf("istio-proxy was changed: env %v mounts %v", istio.Env, istio.VolumeMounts)
	}
	if e, _ := envOf(findContainer(pod.Spec.Containers, "worker"), "HTTPS_PROXY"); e.Value != "http://127.0.0.1:8787" {
		t.Errorf("second app container: HTTPS_PROXY %q", e.Value)
	}
}

// TestKeysAsFilesAndSelectedContainers: keysMode file mounts the Secret into
// detour only; detour.io/containers limits the containers that change.
func TestKeysAsFilesAndSelectedContainers(t *testing.T) {
	cfg := testConfig
	cfg.KeysSecret, cfg.KeysMode, cfg.NoProxy = "llm-keys", KeysModeFile, []string{"corp.internal"}
	pod := patchedPod(t, cfg, "selected-containers")
	d := findContainer(pod.Spec.InitContainers, ContainerName)
	if !slices.ContainsFunc(d.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volKeys && m.MountPath == KeysDir }) {
		t.Errorf("detour mounts %+v; want the keys at %s", d.VolumeMounts, KeysDir)
	}
	if len(d.EnvFrom) != 0 {
		t.Errorf("file mode also set envFrom %+v", d.EnvFrom)
	}
	for _, c := range pod.Spec.Containers {
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volKeys }) {
			t.Errorf("app container %q mounts the keys", c.Name)
		}
	}
	if m := findContainer(pod.Spec.Containers, "metrics"); len(m.Env) != 0 {
		t.Errorf("metrics is not listed in detour.io/containers but got env %v", m.Env)
	}
	if e, _ := envOf(findContainer(pod.Spec.Containers, "notebook"), "NO_PROXY"); !strings.HasSuffix(e.Value, ",corp.internal") {
		t.Errorf("NO_PROXY %q lacks the configured corp.internal", e.Value)
	}
}

// TestMountClashes: a mount above the bundle's directory is fine (mounts
// nest); one on the same path is refused.
func TestMountClashes(t *testing.T) {
	pod := func(path string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "app", VolumeMounts: []corev1.VolumeMount{{Name: "run", MountPath: path}}}},
			Volumes:    []corev1.Volume{{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}}
	}
	if d, err := testConfig.Mutate(pod("/var/run")); err != nil || d.Reason != ReasonInjected {
		t.Errorf("emptyDir on /var/run: %v %v; want injected", d.Reason, err)
	}
	if _, err := testConfig.Mutate(pod(TrustDir + "/")); err == nil || !strings.Contains(err.Error(), "already mounts "+TrustDir) {
		t.Errorf("mount on %s: %v; want a refusal", TrustDir, err)
	}
}
