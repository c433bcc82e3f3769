package inject

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mutatedRedirectArgs injects cfg into a one-container pod with the given
// annotations and returns detour-redirect's arguments and the decision.
func mutatedRedirectArgs(t *testing.T, cfg Config, ann map[string]string) ([]string, Decision) {
	t.Helper()
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	pod.Annotations = ann
	after, d := mutated(t, cfg, pod)
	if errs := validatePod(after); len(errs) > 0 {
		t.Fatalf("invalid pod: %q", errs)
	}
	r := findContainer(after.Spec.InitContainers, RedirectContainerName)
	if r == nil {
		return nil, d
	}
	return r.Args, d
}

// TestExcludeCIDRsReachTheRedirectRules: the config's ranges, then the
// pod's annotation's, become detour-redirect's --exclude-cidr flags, and
// one pod's annotation never changes what the next pod gets.
func TestExcludeCIDRsReachTheRedirectRules(t *testing.T) {
	t.Parallel()
	cfg := transparentConfig
	cfg.ExcludeCIDRs = make([]string, 1, 4) // room to append into: the pods must not share it
	cfg.ExcludeCIDRs[0] = "10.96.0.0/12"
	base := []string{"redirect", "install", "--to-port", "15001", "--ports", "443,80", "--exclude-uid", "65531"}

	args, d := mutatedRedirectArgs(t, cfg, map[string]string{AnnotationExcludeCIDRs: " 10.0.0.0/8, fd00::/8,192.168.1.7 "})
	if want := append(slices.Clone(base), "--exclude-cidr", "10.96.0.0/12", "--exclude-cidr", "10.0.0.0/8",
		"--exclude-cidr", "fd00::/8", "--exclude-cidr", "192.168.1.7"); !slices.Equal(args, want) {
		t.Errorf("detour-redirect args %q; want %q", args, want)
	}
	if len(d.Warnings) != 0 {
		t.Errorf("warnings %q; want none", d.Warnings)
	}
	args, _ = mutatedRedirectArgs(t, cfg, nil)
	if want := append(slices.Clone(base), "--exclude-cidr", "10.96.0.0/12"); !slices.Equal(args, want) {
		t.Errorf("the next pod, without the annotation: args %q; want %q", args, want)
	}
	// Two pods resolved one after the other (the webhook serves them
	// concurrently): the second's ranges must not overwrite the first's.
	withAnn := func(v string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationExcludeCIDRs: v}}}
	}
	first, err := cfg.withDefaults().resolve(withAnn("10.0.0.0/8"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.withDefaults().resolve(withAnn("172.16.0.0/12")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.96.0.0/12", "10.0.0.0/8"}; !slices.Equal(first.ExcludeCIDRs, want) {
		t.Errorf("first pod's ranges %q after a second pod's; want %q", first.ExcludeCIDRs, want)
	}
}

// TestExcludeCIDRsAnnotationUnderProxyEnvWarns: on a pod that reaches
// detour through proxy variables the annotation does nothing, and the
// pod's creator is told so rather than left to believe it works.
func TestExcludeCIDRsAnnotationUnderProxyEnvWarns(t *testing.T) {
	t.Parallel()
	args, d := mutatedRedirectArgs(t, testConfig, map[string]string{AnnotationExcludeCIDRs: "10.0.0.0/8"})
	if args != nil {
		t.Fatalf("proxy-env pod got detour-redirect %q", args)
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "detour.io/exclude-cidrs has no effect") || !strings.Contains(d.Warnings[0], "NO_PROXY") {
		t.Errorf("warnings %q; want one saying the annotation has no effect, naming NO_PROXY", d.Warnings)
	}
}

// TestExcludeCIDRsRefusals: a range `detour redirect install` would refuse
// is refused where it is written — at admission for an annotation, at start
// for the config — each naming its source and the range.
func TestExcludeCIDRsRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ value, want string }{
		{"10.0.0.0/33", `annotation detour.io/exclude-cidrs: "10.0.0.0/33" is not a CIDR such as 10.0.0.0/8 or an address`},
		{"10.0.0.1/8", `annotation detour.io/exclude-cidrs: "10.0.0.1/8" has bits set past its /8: did you mean 10.0.0.0/8?`},
		{"10.0.0.0/8,cluster", `"cluster" is not a CIDR`},
		{" , ", `annotation detour.io/exclude-cidrs " , ": want CIDRs separated by commas`},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		pod.Annotations = map[string]string{AnnotationExcludeCIDRs: tc.value}
		if _, err := transparentConfig.Mutate(pod); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("annotation %q: %v; want an error containing %q", tc.value, err, tc.want)
		}
	}
	_, err := ParseConfig("config.json", []byte(`{"excludeCIDRs": ["10.0.0.0/8", "fd00::1/8"]}`))
	if want := `excludeCIDRs: "fd00::1/8" has bits set past its /8: did you mean fd00::/8?`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("config: %v; want an error containing %q", err, want)
	}
}
