package inject

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// transparentConfig is what the chart renders with
// sidecar.interception=transparent and the other values at their defaults.
var transparentConfig = Config{
	Image:          "ghcr.io/detour-proxy/detour:0.1.0",
	NativeSidecars: ptr(true),
	Interception:   InterceptionTransparent,
}

// checkInterception checks, on an injected pod, what the interception
// promises: with transparent, detour-redirect between detour-trust and
// detour, redirecting to the port detour listens on transparently and
// excluding the uid detour runs as; with proxy-env, no detour-redirect and
// detour as before.
func checkInterception(t *testing.T, s settings, pod *corev1.Pod, d *corev1.Container) {
	t.Helper()
	r := findContainer(pod.Spec.InitContainers, RedirectContainerName)
	if !s.transparent() {
		if r != nil || findContainer(pod.Spec.Containers, RedirectContainerName) != nil {
			t.Error("proxy-env interception added detour-redirect")
		}
		if *d.SecurityContext.RunAsUser != RunAsUser {
			t.Errorf("proxy-env: detour runs as uid %d; want %d", *d.SecurityContext.RunAsUser, RunAsUser)
		}
		return
	}
	if r == nil {
		t.Fatal("transparent interception: no detour-redirect init container")
	}
	names := make([]string, 0, len(pod.Spec.InitContainers))
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	iTrust, iRedirect := slices.Index(names, TrustContainerName), slices.Index(names, RedirectContainerName)
	iDetour := slices.Index(names, ContainerName)
	if iRedirect != iTrust+1 || (s.native && iDetour != iRedirect+1) || iRedirect != len(names)-1-btoi(s.native) {
		t.Errorf("init containers %q: want the pod's own, then detour-trust, detour-redirect%s", names, map[bool]string{true: ", detour", false: ""}[s.native])
	}
	if r.Image != s.Image || r.ImagePullPolicy != s.ImagePullPolicy {
		t.Errorf("detour-redirect image %q %q; want detour's %q %q", r.Image, r.ImagePullPolicy, s.Image, s.ImagePullPolicy)
	}
	arg := func(args []string, flag string) string {
		if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
			return args[i+1]
		}
		return ""
	}
	// The rules send to the port detour listens on, and spare detour's uid.
	if _, port, _ := strings.Cut(arg(d.Args, "--transparent"), ":"); port == "" || port != arg(r.Args, "--to-port") {
		t.Errorf("detour listens transparently on %q but detour-redirect sends to port %q", arg(d.Args, "--transparent"), arg(r.Args, "--to-port"))
	}
	if uid := d.SecurityContext.RunAsUser; uid == nil || arg(r.Args, "--exclude-uid") != itoa64(*uid) {
		t.Errorf("detour runs as uid %v but detour-redirect excludes %q", ptrString(uid), arg(r.Args, "--exclude-uid"))
	}
	sc := r.SecurityContext
	if sc == nil || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Fatalf("detour-redirect capabilities %+v; want add exactly NET_ADMIN, NET_RAW and drop ALL", sc)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Privileged != nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("detour-redirect securityContext %+v; want read-only root, no privilege escalation, not privileged, RuntimeDefault seccomp", sc)
	}
	// uid 0 because added capabilities reach no other uid's effective set;
	// runAsNonRoot false explicitly, or a pod-level runAsNonRoot would stop it.
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.RunAsNonRoot == nil || *sc.RunAsNonRoot {
		t.Errorf("detour-redirect runAsUser %v runAsNonRoot %v; want 0 and false", ptrString(sc.RunAsUser), ptrString(sc.RunAsNonRoot))
	}
	if len(r.VolumeMounts) != 0 || len(r.Env) != 0 || len(r.EnvFrom) != 0 {
		t.Errorf("detour-redirect mounts %+v env %+v: it needs none, and must see no Secret", r.VolumeMounts, r.Env)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func itoa64(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTransparentInjection: the pod of testdata/transparent.json (a Node
// app with an init container of its own, running as uid 1000) injected
// with transparent interception, decoded into corev1.Pod, against literal
// values: what a user reads in `kubectl get pod -o yaml`.
func TestTransparentInjection(t *testing.T) {
	pod := patchedPod(t, transparentConfig, "transparent")
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	if want := []string{"migrate", "detour-trust", "detour-redirect", "detour"}; !slices.Equal(names, want) {
		t.Fatalf("init containers %q; want %q", names, want)
	}
	r := findContainer(pod.Spec.InitContainers, "detour-redirect")
	if r.Image != "ghcr.io/detour-proxy/detour:0.1.0" {
		t.Errorf("detour-redirect image %q", r.Image)
	}
	if want := []string{"redirect", "install", "--to-port", "15001", "--ports", "443,80", "--exclude-uid", "65531"}; !slices.Equal(r.Args, want) {
		t.Errorf("detour-redirect args %q; want %q", r.Args, want)
	}
	if r.RestartPolicy != nil {
		t.Errorf("detour-redirect restartPolicy %v: it must run to completion before the apps", *r.RestartPolicy)
	}
	d := findContainer(pod.Spec.InitContainers, "detour")
	if want := []string{"serve", "--policy", "/etc/detour/policy/policy.json", "--transparent", "127.0.0.1:15001"}; !slices.Equal(d.Args, want) {
		t.Errorf("detour args %q; want %q", d.Args, want)
	}
	if sc := d.SecurityContext; *sc.RunAsUser != 65531 || *sc.RunAsGroup != 65531 || !*sc.RunAsNonRoot || len(sc.Capabilities.Add) != 0 {
		t.Errorf("detour securityContext %+v; want uid/gid 65531, non-root, no capabilities", sc)
	}
	app := findContainer(pod.Spec.Containers, "chat")
	var env []string
	for _, e := range app.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	bundle := "/var/run/detour/trust/ca-bundle.pem"
	if want := []string{"NODE_ENV=production", "SSL_CERT_FILE=" + bundle, "REQUESTS_CA_BUNDLE=" + bundle,
		"CURL_CA_BUNDLE=" + bundle, "NODE_EXTRA_CA_CERTS=" + bundle}; !slices.Equal(env, want) {
		t.Errorf("app env %q; want %q (no proxy variable)", env, want)
	}
	if !slices.ContainsFunc(app.VolumeMounts, func(m corev1.VolumeMount) bool {
		return reflect.DeepEqual(m, corev1.VolumeMount{Name: "detour-trust", MountPath: "/var/run/detour/trust", ReadOnly: true})
	}) {
		t.Errorf("app mounts %+v; want the bundle, read-only", app.VolumeMounts)
	}
	if m := findContainer(pod.Spec.InitContainers, "migrate"); len(m.Env) != 0 || len(m.VolumeMounts) != 1 {
		t.Errorf("the pod's own init container was changed: %+v", m)
	}
}

// TestInterceptionAnnotationOverridesConfig: detour.io/interception picks
// the interception for one pod, either way; proxy-env by annotation under
// a transparent default injects exactly what a proxy-env config does.
func TestInterceptionAnnotationOverridesConfig(t *testing.T) {
	pod := patchedPod(t, testConfig, "interception-annotation")
	if findContainer(pod.Spec.InitContainers, RedirectContainerName) == nil {
		t.Error("annotation transparent under a proxy-env config: no detour-redirect")
	}
	if _, ok := envOf(&pod.Spec.Containers[0], "HTTPS_PROXY"); ok {
		t.Error("annotation transparent under a proxy-env config: HTTPS_PROXY set")
	}

	_, req := readReview(t, "interception-proxy-env")
	var p corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &p); err != nil {
		t.Fatal(err)
	}
	got, err := transparentConfig.Mutate(&p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := testConfig.Mutate(&p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got.Patch)
		wj, _ := json.Marshal(want.Patch)
		t.Errorf("annotation proxy-env under a transparent config:\n%s\nwant what a proxy-env config injects:\n%s", gj, wj)
	}
}

// TestInterceptionRefusals: a bad annotation value, and an app container
// running as detour's transparent uid (its connections would pass the
// rules unredirected), refuse the pod with a message saying what to do.
func TestInterceptionRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		want    []string
		notWant string
	}{
		{"bad-interception", []string{`annotation detour.io/interception "iptables": want "proxy-env" or "transparent"`}, ""},
		// chat inherits the pod's runAsUser 65531; worker sets its own 1001.
		{"uid-clash", []string{`container "chat" runs as uid 65531, detour's own in transparent interception`,
			"sidecar.transparent.uid", "detour.io/interception: proxy-env"}, `"worker"`},
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
			if tc.notWant != "" && strings.Contains(resp.Result.Message, tc.notWant) {
				t.Errorf("message %q names %s, which runs as another uid", resp.Result.Message, tc.notWant)
			}
		})
	}
	// The same pod under proxy-env has no clash: detour's uid is excluded
	// from nothing there.
	_, req := readReview(t, "uid-clash")
	var p corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &p); err != nil {
		t.Fatal(err)
	}
	p.Annotations[AnnotationInterception] = InterceptionProxyEnv
	if d, err := testConfig.Mutate(&p); err != nil || d.Reason != ReasonInjected {
		t.Errorf("uid 65531 under proxy-env: %v %v; want injected", d.Reason, err)
	}
}

// TestTransparentSettings: the port, uid and redirected ports of the
// config reach detour and detour-redirect; regular-container mode keeps
// detour-redirect an init container, before detour starts.
func TestTransparentSettings(t *testing.T) {
	cfg := transparentConfig
	cfg.NativeSidecars = ptr(false)
	cfg.TransparentPort, cfg.TransparentUID, cfg.RedirectPorts = 16001, 2000, []int32{443}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	after, _ := mutated(t, cfg, pod)
	if errs := validatePod(after); len(errs) > 0 {
		t.Fatalf("invalid pod: %q", errs)
	}
	r := findContainer(after.Spec.InitContainers, RedirectContainerName)
	if r == nil || after.Spec.Containers[0].Name != ContainerName {
		t.Fatalf("init containers %+v, first container %q", after.Spec.InitContainers, after.Spec.Containers[0].Name)
	}
	if want := []string{"redirect", "install", "--to-port", "16001", "--ports", "443", "--exclude-uid", "2000"}; !slices.Equal(r.Args, want) {
		t.Errorf("detour-redirect args %q; want %q", r.Args, want)
	}
	s, _ := cfg.resolve(pod)
	checkInterception(t, s, after, &after.Spec.Containers[0])
}

// TestInterceptionConfigErrors: the config's interception fields are
// checked at start, each problem named.
func TestInterceptionConfigErrors(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`{"interception": "iptables"}`, `interception "iptables": want "proxy-env" or "transparent"`},
		{`{"transparentPort": 8787}`, "transparentPort 8787 is also proxyPort or adminPort"},
		{`{"transparentPort": 70000}`, "transparentPort 70000: want 1-65535"},
		{`{"transparentUID": -1}`, "transparentUID -1: want 1-65535"},
		{`{"redirectPorts": [443, 15001]}`, "redirectPorts: 15001 is transparentPort"},
		{`{"redirectPorts": [0]}`, "redirectPorts: 0 is not a TCP port"},
	} {
		if _, err := ParseConfig("config.json", []byte(tc.config)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.config, err, tc.want)
		}
	}
	c, err := ParseConfig("config.json", []byte(`{"interception": "transparent", "transparentPort": 16001, "transparentUID": 2000, "redirectPorts": [443]}`))
	if err != nil || c.withDefaults().TransparentPort != 16001 {
		t.Errorf("a valid transparent config: %+v %v", c, err)
	}
}

// checkTransparentExample checks the chart's example Deployment, written
// with the named templates, for transparent interception: detour-redirect
// with exactly wantArgs and its capabilities, detour on the port and uid
// the rules name, and an app container with the bundle and no proxy
// variable. (checkExample has compared it with the webhook's output.)
func checkTransparentExample(t *testing.T, m *manifests, cfg Config, wantArgs []string) {
	t.Helper()
	d := m.deployment("detour-example")
	if d == nil {
		t.Fatal("no example Deployment")
	}
	pod := &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
	s, err := cfg.resolve(pod)
	if err != nil {
		t.Fatal(err)
	}
	detour := findContainer(pod.Spec.InitContainers, ContainerName)
	if detour == nil {
		detour = findContainer(pod.Spec.Containers, ContainerName)
	}
	if detour == nil {
		t.Fatal("no detour container in the example")
	}
	checkInterception(t, s, pod, detour)
	if r := findContainer(pod.Spec.InitContainers, RedirectContainerName); r != nil && !slices.Equal(r.Args, wantArgs) {
		t.Errorf("detour-redirect args %q; want %q", r.Args, wantArgs)
	}
	app := findContainer(pod.Spec.Containers, "app")
	for _, e := range app.Env {
		if strings.Contains(strings.ToLower(e.Name), "proxy") {
			t.Errorf("app container sets %s with transparent interception", e.Name)
		}
	}
	if e, ok := envOf(app, "SSL_CERT_FILE"); !ok || e.Value != BundleFile {
		t.Errorf("app SSL_CERT_FILE %q; want %s", e.Value, BundleFile)
	}
	// The example's pod says runAsNonRoot: detour-redirect, root, must
	// override it for itself, or the kubelet would refuse to start it.
	if pod.Spec.SecurityContext == nil || pod.Spec.SecurityContext.RunAsNonRoot == nil || !*pod.Spec.SecurityContext.RunAsNonRoot {
		t.Error("the example pod no longer says runAsNonRoot: this check proves nothing")
	}
}
