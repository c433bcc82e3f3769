package inject

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Operation is one RFC 6902 JSON Patch operation. The injector emits "add"
// and "replace" only.
type Operation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// Decision is what the webhook does with one pod.
type Decision struct {
	// Patch is empty when the pod is left as it is.
	Patch []Operation
	// Reason says why, for the log: ReasonInjected or one of the skip reasons.
	Reason string
	// Warnings are shown to the client that created the pod.
	Warnings []string
}

// Reasons of a Decision.
const (
	ReasonInjected    = "injected"
	ReasonAlready     = "already injected"
	ReasonOptedOut    = "opted out"
	ReasonHostNetwork = "host network"
)

// Mutate decides what to do with pod and returns the patch that does it. An
// error means the pod asks for something invalid (an annotation, a clash with
// the names detour adds): the webhook refuses the pod with that message.
//
// The webhook configuration has already chosen the pods it sends (opt-in
// labels); Mutate only honours an explicit opt-out, leaves injected pods
// alone (idempotence: the webhook may be called again, and pods may carry
// detour by hand), and skips host-network pods, where detour's loopback
// listener would be the node's.
func (c Config) Mutate(pod *corev1.Pod) (Decision, error) {
	if pod.Labels[LabelInject] == "false" {
		return Decision{Reason: ReasonOptedOut}, nil
	}
	if injected(pod) {
		return Decision{Reason: ReasonAlready}, nil
	}
	if pod.Spec.HostNetwork {
		return Decision{Reason: ReasonHostNetwork, Warnings: []string{
			"detour was not injected: hostNetwork pods share the node's loopback, where detour's fixed ports would clash",
		}}, nil
	}
	s, err := c.resolve(pod)
	if err != nil {
		return Decision{}, err
	}
	if err := errors.Join(s.checkClashes(pod), s.checkUIDClash(pod)); err != nil {
		return Decision{}, err
	}
	return Decision{Patch: s.patch(pod), Reason: ReasonInjected, Warnings: s.warnings(pod)}, nil
}

// warnings are what the pod asks for that injection does not use: said to
// whoever created the pod, since an annotation that does nothing otherwise
// goes unnoticed.
func (s settings) warnings(pod *corev1.Pod) []string {
	if _, ok := pod.Annotations[AnnotationExcludeCIDRs]; ok && !s.transparent() {
		return []string{fmt.Sprintf("annotation %s has no effect: this pod reaches detour through its proxy variables (interception %s), not redirect rules; leave hosts out with NO_PROXY (the injector's noProxy) instead",
			AnnotationExcludeCIDRs, s.Interception)}
	}
	return nil
}

// injected reports whether detour is already in pod, by the webhook or by hand.
func injected(pod *corev1.Pod) bool {
	if _, ok := pod.Annotations[AnnotationStatus]; ok {
		return true
	}
	isDetour := func(c corev1.Container) bool { return c.Name == ContainerName }
	return slices.ContainsFunc(pod.Spec.Containers, isDetour) || slices.ContainsFunc(pod.Spec.InitContainers, isDetour)
}

// checkClashes refuses a pod that already uses a name or path detour adds: a
// patch would make it invalid, and renaming would break the chart's contract.
func (s settings) checkClashes(pod *corev1.Pod) error {
	var errs []error
	ours := map[string]bool{}
	for _, v := range s.volumes() {
		ours[v.Name] = true
	}
	for _, v := range pod.Spec.Volumes {
		if ours[v.Name] {
			errs = append(errs, fmt.Errorf("the pod already has a volume named %q, which detour adds", v.Name))
		}
	}
	all := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		if c.Name == TrustContainerName || c.Name == RedirectContainerName {
			errs = append(errs, fmt.Errorf("the pod already has a container named %q, which detour adds", c.Name))
		}
	}
	for _, c := range pod.Spec.Containers {
		if !s.targets[c.Name] {
			continue
		}
		for _, m := range c.VolumeMounts {
			// A mount above TrustDir (an emptyDir on /var/run, common with a
			// read-only root) is fine: Kubernetes nests mounts.
			if path.Clean(m.MountPath) == TrustDir {
				errs = append(errs, fmt.Errorf("container %q already mounts %s, where detour mounts its CA bundle: "+
					"leave it out with annotation %s", c.Name, TrustDir, AnnotationContainers))
			}
		}
	}
	return errors.Join(errs...)
}

// patch builds the operations. Operations on existing containers come first,
// with their original indexes, before anything is inserted before them.
func (s settings) patch(pod *corev1.Pod) []Operation {
	var ops []Operation
	for i, c := range pod.Spec.Containers {
		if !s.targets[c.Name] {
			continue
		}
		base := "/spec/containers/" + strconv.Itoa(i)
		ch := s.appEnv(c.Env)
		for _, j := range slices.Sorted(maps.Keys(ch.replace)) {
			ops = append(ops, Operation{"replace", base + "/env/" + strconv.Itoa(j) + "/value", ch.replace[j]})
		}
		ops = appendItems(ops, base+"/env", len(c.Env) == 0, ch.add)
		ops = appendItems(ops, base+"/volumeMounts", len(c.VolumeMounts) == 0, []corev1.VolumeMount{appMount()})
	}

	inits := []corev1.Container{s.trustContainer()}
	if s.transparent() {
		inits = append(inits, s.redirectContainer())
	}
	if s.native {
		inits = append(inits, s.sidecarContainer())
	}
	ops = appendItems(ops, "/spec/initContainers", len(pod.Spec.InitContainers) == 0, inits)
	if !s.native {
		// First, so that the kubelet starts it before the apps (it does not
		// wait for it: that needs native sidecars).
		ops = append(ops, Operation{"add", "/spec/containers/0", s.sidecarContainer()})
	}
	ops = appendItems(ops, "/spec/volumes", len(pod.Spec.Volumes) == 0, s.volumes())

	ann := map[string]string{AnnotationStatus: StatusInjected}
	if _, ok := pod.Annotations[defaultContainerAnnotation]; !ok && !s.native && len(pod.Spec.Containers) > 0 {
		ann[defaultContainerAnnotation] = pod.Spec.Containers[0].Name
	}
	if len(pod.Annotations) == 0 {
		ops = append(ops, Operation{"add", "/metadata/annotations", ann})
	} else {
		for _, k := range slices.Sorted(maps.Keys(ann)) {
			ops = append(ops, Operation{"add", "/metadata/annotations/" + escapePointer(k), ann[k]})
		}
	}
	return ops
}

// appendItems appends items to the array at path: one "add" of the whole
// array when it is absent or empty, else one "add" per item at "/-".
func appendItems[T any](ops []Operation, path string, empty bool, items []T) []Operation {
	if len(items) == 0 {
		return ops
	}
	if empty {
		return append(ops, Operation{"add", path, items})
	}
	for _, it := range items {
		ops = append(ops, Operation{"add", path + "/-", it})
	}
	return ops
}

// escapePointer escapes a JSON Pointer reference token (RFC 6901): the
// annotation keys have slashes.
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
