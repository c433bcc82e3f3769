package inject

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/detour-proxy/detour/internal/cidr"
)

// How an injected pod's connections reach detour (Config.Interception,
// annotation AnnotationInterception).
//
// InterceptionProxyEnv points the app containers' proxy variables at
// detour: what every runtime that honours HTTPS_PROXY needs, and nothing
// more.
//
// InterceptionTransparent is for runtimes that honour no proxy variable
// (Node 20 and 22's fetch, Java): an init container, detour-redirect,
// installs nftables rules in the pod's network namespace (`detour redirect
// install`) that send every outbound TCP connection to the redirected
// ports to detour's transparent listener, except detour's own, told apart
// by its uid. No proxy variable is set; the trust bundle is mounted as
// before, since an intercepted host is still answered with detour's CA.
const (
	InterceptionProxyEnv    = "proxy-env"
	InterceptionTransparent = "transparent"

	// AnnotationInterception overrides Config.Interception for one pod:
	// InterceptionProxyEnv or InterceptionTransparent.
	AnnotationInterception = "detour.io/interception"
	// AnnotationExcludeCIDRs adds destination ranges, comma-separated, to
	// Config.ExcludeCIDRs for one pod. It adds and never removes: a range
	// the operator excluded for every pod stays excluded. Letting a pod's
	// owner exclude more is safe because detour is that pod's failover,
	// not a boundary: a range left out only loses detour's help.
	AnnotationExcludeCIDRs = "detour.io/exclude-cidrs"

	// RedirectContainerName is the init container that installs the
	// redirect rules (transparent interception only).
	RedirectContainerName = "detour-redirect"

	// DefaultTransparentPort is detour's transparent listener's port on the
	// pod's loopback, the port the rules redirect to: the policy's own
	// default (transparent.listen 127.0.0.1:15001).
	DefaultTransparentPort = 15001
	// DefaultTransparentUID is the uid detour runs as in transparent
	// interception, and the one the rules exclude. Not RunAsUser: 65532 is
	// the uid of every distroless "nonroot" image, so an app built on one
	// would share detour's exclusion and reach the vendors directly,
	// unseen; and an image's USER cannot be seen at admission. 65531 is
	// neither distroless's nonroot (65532) nor the usual nobody (65534).
	DefaultTransparentUID = 65531
)

// DefaultRedirectPorts are the destination ports redirected: HTTPS and
// plain HTTP, `detour redirect install`'s own default.
var DefaultRedirectPorts = []int32{443, 80}

// transparent reports whether s injects transparent interception.
func (s settings) transparent() bool { return s.Interception == InterceptionTransparent }

// transparentAddr is the address detour's transparent listener is told to
// listen on (`detour serve --transparent`). Loopback: the kernel's
// redirect of a local connection delivers it to 127.0.0.1 (::1 for IPv6,
// where detour listens too).
func (s settings) transparentAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(s.TransparentPort)))
}

// redirectArgs are detour-redirect's command line.
func (s settings) redirectArgs() []string {
	ports := make([]string, len(s.RedirectPorts))
	for i, p := range s.RedirectPorts {
		ports[i] = strconv.Itoa(int(p))
	}
	args := []string{"redirect", "install",
		"--to-port", strconv.Itoa(int(s.TransparentPort)),
		"--ports", strings.Join(ports, ","),
		"--exclude-uid", strconv.FormatInt(s.TransparentUID, 10)}
	for _, c := range s.ExcludeCIDRs {
		args = append(args, "--exclude-cidr", c)
	}
	return args
}

// checkCIDRs reports every entry of list, named by where it came from, that
// `detour redirect install --exclude-cidr` would refuse: refused here, the
// pod is not created, instead of its init container failing on every
// restart.
func checkCIDRs(from string, list []string) []error {
	var errs []error
	for _, c := range list {
		if _, err := cidr.Parse(c); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", from, err))
		}
	}
	return errs
}

// excludeCIDRsAnnotation parses AnnotationExcludeCIDRs' value: ranges
// separated by commas, blanks around them allowed.
func excludeCIDRsAnnotation(v string) ([]string, []error) {
	var list []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			list = append(list, f)
		}
	}
	if len(list) == 0 {
		return nil, []error{fmt.Errorf("annotation %s %q: want CIDRs separated by commas, such as 10.0.0.0/8,fd00::/8", AnnotationExcludeCIDRs, v)}
	}
	return list, checkCIDRs("annotation "+AnnotationExcludeCIDRs, list)
}

// redirectContainer installs the redirect rules and exits. It runs before
// detour and the apps (init containers run in order, each to completion),
// so no app connection escapes the rules; the pod's own init containers,
// which run before it, are not redirected.
func (s settings) redirectContainer() corev1.Container {
	return corev1.Container{
		Name:            RedirectContainerName,
		Image:           s.Image,
		ImagePullPolicy: s.ImagePullPolicy,
		Args:            s.redirectArgs(),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("16Mi"),
			},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		// A missing capability or kernel module is explained on stderr.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          redirectSecurityContext(),
	}
}

// redirectSecurityContext grants what programming nftables takes and
// nothing else. CAP_NET_ADMIN is what the kernel checks, not uid 0, but
// Kubernetes' capabilities.add reaches the effective set of uid 0 only:
// the runtimes set no ambient capabilities, so a non-root process loses
// the added ones at exec (kubernetes/kubernetes#56374). Hence uid 0, with
// every other capability dropped, no privilege escalation, a read-only
// root and the runtime's seccomp profile; the process writes one netlink
// transaction and exits. NET_RAW is granted with NET_ADMIN as the rules'
// documented requirement (`detour redirect` names both).
func redirectSecurityContext() *corev1.SecurityContext {
	root := int64(0)
	yes, no := true, false
	return &corev1.SecurityContext{
		RunAsUser:                &root,
		RunAsGroup:               &root,
		RunAsNonRoot:             &no,
		ReadOnlyRootFilesystem:   &yes,
		AllowPrivilegeEscalation: &no,
		Capabilities: &corev1.Capabilities{
			Add:  []corev1.Capability{"NET_ADMIN", "NET_RAW"},
			Drop: []corev1.Capability{"ALL"},
		},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// checkUIDClash refuses a transparent pod whose containers run as detour's
// own uid: the rules let that uid's connections pass, so such a container
// would call the vendors directly with nothing said. Only a uid the pod
// states (the container's runAsUser, else the pod's) can be checked; an
// image's USER is not in the AdmissionReview. Every container that runs
// beside the apps counts, targets or not: the rules cover the whole
// network namespace.
func (s settings) checkUIDClash(pod *corev1.Pod) error {
	if !s.transparent() {
		return nil
	}
	var podUID *int64
	if pod.Spec.SecurityContext != nil {
		podUID = pod.Spec.SecurityContext.RunAsUser
	}
	var errs []error
	running := slices.Clone(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			running = append(running, c) // a native sidecar of the pod's own
		}
	}
	for _, c := range running {
		uid := podUID
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			uid = c.SecurityContext.RunAsUser
		}
		if uid != nil && *uid == s.TransparentUID {
			errs = append(errs, fmt.Errorf("container %q runs as uid %d, detour's own in transparent interception: "+
				"the redirect rules let that uid's connections pass, so its calls would bypass detour; run it as another uid, "+
				"set the injector's transparentUID (chart value sidecar.transparent.uid) to one no app uses, "+
				"or use annotation %s: %s", c.Name, *uid, AnnotationInterception, InterceptionProxyEnv))
		}
	}
	return errors.Join(errs...)
}

// validateInterception reports the problems of the interception fields of
// d (defaults applied). The transparent ones are checked whatever the
// default interception is: a pod can ask for transparent by annotation.
func (d Config) validateInterception() []error {
	var errs []error
	switch d.Interception {
	case InterceptionProxyEnv, InterceptionTransparent:
	default:
		errs = append(errs, fmt.Errorf("interception %q: want %q or %q", d.Interception, InterceptionProxyEnv, InterceptionTransparent))
	}
	if p := d.TransparentPort; p < 1 || p > 65535 {
		errs = append(errs, fmt.Errorf("transparentPort %d: want 1-65535", p))
	} else if p == d.ProxyPort || p == d.AdminPort {
		errs = append(errs, fmt.Errorf("transparentPort %d is also proxyPort or adminPort", p))
	}
	// 0 would exclude root, and Kubernetes' user namespaces map 0-65535 only.
	if u := d.TransparentUID; u < 1 || u > 65535 {
		errs = append(errs, fmt.Errorf("transparentUID %d: want 1-65535 (not 0: root's connections would pass unredirected)", u))
	}
	errs = append(errs, checkCIDRs("excludeCIDRs", d.ExcludeCIDRs)...)
	for _, p := range d.RedirectPorts {
		switch {
		case p < 1 || p > 65535:
			errs = append(errs, fmt.Errorf("redirectPorts: %d is not a TCP port (1-65535)", p))
		case p == d.TransparentPort:
			errs = append(errs, fmt.Errorf("redirectPorts: %d is transparentPort: every connection to it would loop", p))
		}
	}
	return errs
}
