package inject

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Defaults of Config. The ports are detour's own defaults (policy listen and
// admin_listen); the names are what the chart creates for a release named
// "detour".
const (
	// DefaultImage is the sidecar image when the config names none. The chart
	// always sets one (its appVersion); this is for running the webhook by hand.
	DefaultImage = "ghcr.io/detour-proxy/detour:latest"
	// DefaultProxyPort is where detour's proxy listens on the pod's loopback:
	// the policy's listen must be 127.0.0.1:<this>.
	DefaultProxyPort = 8787
	// DefaultAdminPort is where detour's admin listener serves /healthz and
	// /readyz to the kubelet: the policy's admin_listen must be 0.0.0.0:<this>.
	DefaultAdminPort = 8788
	// DefaultPolicyConfigMap is the ConfigMap (key policy.json) mounted as the policy.
	DefaultPolicyConfigMap = "detour-policy"
	// DefaultCASecret is the Secret holding ca.pem and ca-key.pem.
	DefaultCASecret = "detour-ca"
	// DefaultAdminTokenSecret is the Secret holding the admin token (key
	// AdminTokenKey).
	DefaultAdminTokenSecret = "detour-admin-token"
	// KeysModeEnv exposes every key of the keys Secret as an environment
	// variable of detour (policy auth {"env": "NAME"}).
	KeysModeEnv = "env"
	// KeysModeFile mounts the keys Secret as files under KeysDir (policy auth
	// {"file": "/var/run/secrets/detour-keys/NAME"}).
	KeysModeFile = "file"
)

// Config is what the webhook injects: the chart renders it from its values
// into a ConfigMap (JSON; YAML is accepted too). Every field documents its
// default; zero means the default. Unknown fields are errors.
type Config struct {
	// Image is the detour image of the sidecar and of detour-trust. Default
	// DefaultImage. Per pod: annotation detour.io/image.
	Image string `json:"image,omitempty"`
	// ImagePullPolicy of both containers. Default IfNotPresent.
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// NativeSidecars adds detour as a native sidecar (an init container with
	// restartPolicy Always: Kubernetes ≥ 1.29) rather than as the first
	// regular container. The AdmissionReview does not carry the cluster's
	// version, so the chart decides at install time from
	// .Capabilities.KubeVersion (value sidecar.nativeSidecars: auto). Default
	// true. Per pod: annotation detour.io/mode.
	NativeSidecars *bool `json:"nativeSidecars,omitempty"`
	// ProxyPort is detour's proxy port on the pod's loopback; the policy's
	// listen must be 127.0.0.1:ProxyPort. Default DefaultProxyPort.
	ProxyPort int32 `json:"proxyPort,omitempty"`
	// AdminPort is detour's admin port, probed by the kubelet on the pod IP;
	// the policy's admin_listen must be 0.0.0.0:AdminPort. Default
	// DefaultAdminPort.
	AdminPort int32 `json:"adminPort,omitempty"`
	// PolicyConfigMap names the ConfigMap, in the pod's namespace, whose key
	// policy.json is detour's policy. Default DefaultPolicyConfigMap. Per
	// pod: annotation detour.io/policy.
	PolicyConfigMap string `json:"policyConfigMap,omitempty"`
	// CASecret names the Secret, in the pod's namespace, with keys ca.pem and
	// ca-key.pem. Default DefaultCASecret.
	CASecret string `json:"caSecret,omitempty"`
	// AdminTokenSecret names the Secret, in the pod's namespace, whose key
	// AdminTokenKey is the admin listener's bearer token, mounted into
	// detour alone at AdminTokenFile (the policy's admin.token_file).
	// Default DefaultAdminTokenSecret.
	AdminTokenSecret string `json:"adminTokenSecret,omitempty"`
	// KeysSecret names a Secret, in the pod's namespace, with detour's own
	// vendor keys. Default none. Per pod: annotation detour.io/keys-secret.
	KeysSecret string `json:"keysSecret,omitempty"`
	// KeysMode is how detour sees KeysSecret: KeysModeEnv or KeysModeFile.
	// Default KeysModeEnv.
	KeysMode string `json:"keysMode,omitempty"`
	// Resources of the detour container. Default DefaultResources. Per pod:
	// annotations detour.io/resources-*.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// NoProxy are NO_PROXY entries added to the app containers besides the
	// built-in ones (localhost, 127.0.0.1, ::1, 169.254.169.254,
	// 169.254.0.0/16, .svc, .cluster.local). Use
	// it for another cluster domain or for in-cluster names without dots.
	NoProxy []string `json:"noProxy,omitempty"`
	// Interception is how the app containers' connections reach detour:
	// InterceptionProxyEnv (proxy variables) or InterceptionTransparent (an
	// init container's redirect rules; no proxy variables). Default
	// InterceptionProxyEnv. Per pod: annotation detour.io/interception.
	Interception string `json:"interception,omitempty"`
	// TransparentPort is detour's transparent listener's port on the pod's
	// loopback, where the redirect rules send connections (transparent
	// interception). Default DefaultTransparentPort.
	TransparentPort int32 `json:"transparentPort,omitempty"`
	// TransparentUID is the uid detour runs as in transparent interception,
	// whose connections the redirect rules let pass; no app container may
	// run as it. Default DefaultTransparentUID.
	TransparentUID int64 `json:"transparentUID,omitempty"`
	// RedirectPorts are the TCP destination ports redirected to detour in
	// transparent interception. Default DefaultRedirectPorts (443, 80).
	RedirectPorts []int32 `json:"redirectPorts,omitempty"`
	// ExcludeCIDRs are destination ranges the redirect rules let pass in
	// transparent interception, beside loopback and link-local (`detour
	// redirect install --exclude-cidr`): the cluster's pod and service
	// ranges, say, so that calls to in-cluster services skip a hop through
	// detour, which would only splice them. Default none. Per pod:
	// annotation detour.io/exclude-cidrs adds to them.
	ExcludeCIDRs []string `json:"excludeCIDRs,omitempty"`
	// RedisPasswordSecret names a Secret, in the pod's namespace, holding
	// the password of the fleet state's Redis (policy state.redis), mounted
	// into detour alone at RedisPasswordFile (the policy's
	// state.redis.password_file). Default none: nothing is mounted.
	RedisPasswordSecret string `json:"redisPasswordSecret,omitempty"`
	// RedisPasswordKey is the password's key in RedisPasswordSecret.
	// Default DefaultRedisPasswordKey.
	RedisPasswordKey string `json:"redisPasswordKey,omitempty"`
}

// DefaultResources are the detour container's resources when the config
// gives none: detour is a proxy whose work is mostly waiting on vendors.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("50m"),
			corev1.ResourceMemory: resource.MustParse("64Mi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("256Mi"),
		},
	}
}

// LoadConfig reads a Config file strictly (unknown fields are errors) and
// validates it. An empty path gives the defaults.
func LoadConfig(path string) (Config, error) {
	if path == "" {
		c := Config{}
		return c, c.Validate()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("injector config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes and validates a Config. name labels errors.
func ParseConfig(name string, data []byte) (Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return Config{}, fmt.Errorf("injector config %s: %w", name, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("injector config %s: %w", name, err)
	}
	return c, nil
}

// Validate reports every problem of c, defaults applied.
func (c Config) Validate() error {
	var errs []error
	d := c.withDefaults()
	if strings.TrimSpace(d.Image) != d.Image {
		errs = append(errs, fmt.Errorf("image %q has surrounding spaces", d.Image))
	}
	switch d.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, fmt.Errorf("imagePullPolicy %q: want Always, IfNotPresent or Never", d.ImagePullPolicy))
	}
	for _, p := range []struct {
		name string
		port int32
	}{{"proxyPort", d.ProxyPort}, {"adminPort", d.AdminPort}} {
		if p.port < 1 || p.port > 65535 {
			errs = append(errs, fmt.Errorf("%s %d: want 1-65535", p.name, p.port))
		}
	}
	if d.ProxyPort == d.AdminPort {
		errs = append(errs, fmt.Errorf("proxyPort and adminPort are both %d", d.ProxyPort))
	}
	errs = append(errs, d.validateInterception()...)
	errs = append(errs, d.validateRedis()...)
	for _, n := range []struct{ field, name string }{
		{"policyConfigMap", d.PolicyConfigMap}, {"caSecret", d.CASecret}, {"adminTokenSecret", d.AdminTokenSecret}, {"keysSecret", d.KeysSecret},
	} {
		if n.name == "" && n.field == "keysSecret" {
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(n.name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s %q: %s", n.field, n.name, strings.Join(msgs, "; ")))
		}
	}
	if d.KeysMode != KeysModeEnv && d.KeysMode != KeysModeFile {
		errs = append(errs, fmt.Errorf("keysMode %q: want %q or %q", d.KeysMode, KeysModeEnv, KeysModeFile))
	}
	if err := checkResources(*d.Resources); err != nil {
		errs = append(errs, fmt.Errorf("resources: %w", err))
	}
	for _, e := range d.NoProxy {
		if e == "" || strings.ContainsAny(e, ", \t") {
			errs = append(errs, fmt.Errorf("noProxy entry %q: want one host, domain suffix or CIDR", e))
		}
	}
	return errors.Join(errs...)
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Image == "" {
		c.Image = DefaultImage
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if c.NativeSidecars == nil {
		t := true
		c.NativeSidecars = &t
	}
	if c.ProxyPort == 0 {
		c.ProxyPort = DefaultProxyPort
	}
	if c.AdminPort == 0 {
		c.AdminPort = DefaultAdminPort
	}
	if c.PolicyConfigMap == "" {
		c.PolicyConfigMap = DefaultPolicyConfigMap
	}
	if c.CASecret == "" {
		c.CASecret = DefaultCASecret
	}
	if c.AdminTokenSecret == "" {
		c.AdminTokenSecret = DefaultAdminTokenSecret
	}
	if c.KeysMode == "" {
		c.KeysMode = KeysModeEnv
	}
	if c.Resources == nil {
		r := DefaultResources()
		c.Resources = &r
	}
	if c.Interception == "" {
		c.Interception = InterceptionProxyEnv
	}
	if c.TransparentPort == 0 {
		c.TransparentPort = DefaultTransparentPort
	}
	if c.TransparentUID == 0 {
		c.TransparentUID = DefaultTransparentUID
	}
	if len(c.RedirectPorts) == 0 {
		c.RedirectPorts = DefaultRedirectPorts
	}
	return c
}

// checkResources rejects a request above its limit, which the API server
// would refuse with a message that does not say where the numbers came from.
func checkResources(r corev1.ResourceRequirements) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, fmt.Errorf("%s request %s is above its limit %s", name, req.String(), lim.String()))
		}
	}
	return errors.Join(errs...)
}
