package inject

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels and annotations the injector reads or writes. Pod annotations
// override the Config for one pod; an invalid one makes the webhook refuse
// the pod with a message naming it (a typo must be seen, not silently
// replaced by a default).
const (
	// LabelInject opts in: "true" on a pod, or on its namespace (then every
	// pod without the label is injected). "false" on a pod opts it out even
	// in an opted-in namespace. Read by the webhook configuration's
	// selectors; the webhook itself only honours "false".
	LabelInject = "detour.io/inject"
	// LabelComponent marks detour's own pods (the injector): the webhook
	// configuration's objectSelector excludes every pod that has it.
	LabelComponent = "detour.io/component"

	// AnnotationStatus is set to StatusInjected on every injected pod; a pod
	// that has it, or that has a container named detour (added by hand with
	// the chart's named templates), is left alone.
	AnnotationStatus = "detour.io/status"
	// AnnotationImage overrides Config.Image.
	AnnotationImage = "detour.io/image"
	// AnnotationMode overrides Config.NativeSidecars: ModeNative or ModeContainer.
	AnnotationMode = "detour.io/mode"
	// AnnotationPolicy overrides Config.PolicyConfigMap: the name of a
	// ConfigMap in the pod's namespace whose key policy.json is the policy.
	AnnotationPolicy = "detour.io/policy"
	// AnnotationKeysSecret overrides Config.KeysSecret.
	AnnotationKeysSecret = "detour.io/keys-secret"
	// AnnotationContainers lists, comma-separated, the containers that get
	// the proxy variables and the CA bundle. Default: every container except
	// other meshes' proxies (istio-proxy, linkerd-proxy). Empty: none.
	AnnotationContainers = "detour.io/containers"
	// AnnotationCPU, AnnotationMemory, AnnotationCPULimit and
	// AnnotationMemoryLimit override the detour container's requests and
	// limits (Kubernetes quantities: "100m", "128Mi").
	AnnotationCPU         = "detour.io/resources-cpu"
	AnnotationMemory      = "detour.io/resources-memory"
	AnnotationCPULimit    = "detour.io/resources-cpu-limit"
	AnnotationMemoryLimit = "detour.io/resources-memory-limit"

	// StatusInjected is the value of AnnotationStatus.
	StatusInjected = "injected"
	// ModeNative adds detour as a native sidecar (Kubernetes ≥ 1.29).
	ModeNative = "native"
	// ModeContainer adds detour as the first regular container.
	ModeContainer = "container"

	// defaultContainerAnnotation tells kubectl which container logs and exec
	// use when none is named; set in container mode so that detour, now
	// first, does not become it.
	defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"
)

// otherProxies are containers of other meshes' injectors. They get no proxy
// variables unless the pod lists them in AnnotationContainers: their own
// control-plane traffic must not go through detour.
var otherProxies = []string{"istio-proxy", "linkerd-proxy"}

// settings are what is injected into one pod: the Config with its defaults,
// overridden by the pod's annotations.
type settings struct {
	Config
	native bool
	// targets are the names of the app containers that get the variables
	// and the bundle mount.
	targets map[string]bool
}

// resolve applies the pod's annotations to c (defaults applied). The error
// names every invalid annotation.
func (c Config) resolve(pod *corev1.Pod) (settings, error) {
	s := settings{Config: c.withDefaults()}
	s.native = *s.NativeSidecars
	res := s.Resources.DeepCopy()
	s.Resources = res
	ann := pod.Annotations
	var errs []error

	if v, ok := ann[AnnotationImage]; ok {
		if v == "" || strings.TrimSpace(v) != v {
			errs = append(errs, fmt.Errorf("annotation %s %q: want an image reference", AnnotationImage, v))
		}
		s.Image = v
	}
	if v, ok := ann[AnnotationMode]; ok {
		switch v {
		case ModeNative:
			s.native = true
		case ModeContainer:
			s.native = false
		default:
			errs = append(errs, fmt.Errorf("annotation %s %q: want %q or %q", AnnotationMode, v, ModeNative, ModeContainer))
		}
	}
	if v, ok := ann[AnnotationInterception]; ok {
		switch v {
		case InterceptionProxyEnv, InterceptionTransparent:
			s.Interception = v
		default:
			errs = append(errs, fmt.Errorf("annotation %s %q: want %q or %q", AnnotationInterception, v, InterceptionProxyEnv, InterceptionTransparent))
		}
	}
	if v, ok := ann[AnnotationExcludeCIDRs]; ok {
		list, bad := excludeCIDRsAnnotation(v)
		errs = append(errs, bad...)
		// A copy: s.ExcludeCIDRs shares its array with the Config.
		s.ExcludeCIDRs = append(slices.Clip(s.ExcludeCIDRs), list...)
	}
	for _, n := range []struct {
		key string
		to  *string
	}{{AnnotationPolicy, &s.PolicyConfigMap}, {AnnotationKeysSecret, &s.KeysSecret}} {
		v, ok := ann[n.key]
		if !ok {
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("annotation %s %q: %s", n.key, v, strings.Join(msgs, "; ")))
		}
		*n.to = v
	}
	for _, q := range []struct {
		key  string
		list *corev1.ResourceList
		name corev1.ResourceName
	}{
		{AnnotationCPU, &res.Requests, corev1.ResourceCPU},
		{AnnotationMemory, &res.Requests, corev1.ResourceMemory},
		{AnnotationCPULimit, &res.Limits, corev1.ResourceCPU},
		{AnnotationMemoryLimit, &res.Limits, corev1.ResourceMemory},
	} {
		v, ok := ann[q.key]
		if !ok {
			continue
		}
		qty, err := resource.ParseQuantity(v)
		if err != nil || qty.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("annotation %s %q: want a positive quantity such as 100m or 128Mi", q.key, v))
			continue
		}
		if *q.list == nil {
			*q.list = corev1.ResourceList{}
		}
		(*q.list)[q.name] = qty
	}
	if len(errs) == 0 {
		if err := checkResources(*res); err != nil {
			errs = append(errs, fmt.Errorf("detour's resources after the %s annotations: %w (set the matching -limit annotation too)",
				"detour.io/resources-*", err))
		}
	}

	s.targets = map[string]bool{}
	if v, ok := ann[AnnotationContainers]; ok {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if !slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name }) {
				errs = append(errs, fmt.Errorf("annotation %s names container %q, which the pod does not have", AnnotationContainers, name))
			}
			s.targets[name] = true
		}
	} else {
		for _, c := range pod.Spec.Containers {
			if !slices.Contains(otherProxies, c.Name) {
				s.targets[c.Name] = true
			}
		}
	}
	return s, errors.Join(errs...)
}
