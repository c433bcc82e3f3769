package inject

// The Helm chart in charts/detour, tested with the real helm binary: `helm
// lint` and `helm template` for the default values and for every documented
// value, every rendered manifest decoded strictly into k8s.io/api types, and
// the essentials checked: the webhook's Service and CA bundle match its
// certificate, no RBAC, probes, non-root security contexts, resources, the
// failure policy, selectors that never pick detour's own pods, per-namespace
// objects that detour itself accepts, and named templates that add the very
// sidecar the webhook adds.

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"go/build"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/policy"
)

const (
	chartDir     = "../../charts/detour"
	release      = "detour"
	releaseNS    = "detour"
	injectorName = "detour-injector"
)

var (
	helmOnce sync.Once
	helmPath string
)

// helm finds the helm binary on PATH or in $GOPATH/bin (where `go install
// helm.sh/helm/v3/cmd/helm@v3.22.0` puts it). Missing: skipped locally, a
// failure in CI.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if p, err := exec.LookPath("helm"); err == nil {
			helmPath = p
			return
		}
		for _, gp := range filepath.SplitList(build.Default.GOPATH) {
			p := filepath.Join(gp, "bin", "helm")
			if _, err := os.Stat(p); err == nil {
				helmPath = p
				return
			}
		}
	})
	if helmPath == "" {
		msg := "helm not found on PATH or in $GOPATH/bin (go install helm.sh/helm/v3/cmd/helm@v3.22.0)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return helmPath
}

// helmRuns counts the helm processes started, for countHelm.
var helmRuns atomic.Int64

// countHelm logs, when t and its subtests are done, how many helm processes
// they started: each costs some 0.2 s of CPU, most of this package's time.
func countHelm(t *testing.T) {
	start := helmRuns.Load()
	t.Cleanup(func() { t.Logf("%d helm runs", helmRuns.Load()-start) })
}

func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	helmRuns.Add(1)
	cmd := exec.Command(helm(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// A fresh, empty Helm home: no repositories, no plugins, no cache.
	home := t.TempDir()
	// GOGC=off: helm is a Go program that lives a fraction of a second and
	// peaks at some 60 MiB either way; its collector only spends CPU (about
	// a fifth of each run) on memory the exit gives back anyway. Its output
	// is the same.
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home, "GOGC=off")
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// Types for the cert-manager objects (cert-manager.io/v1), limited to the
// fields the chart writes, so that strict decoding catches a misspelt one.
type cmIssuer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SelfSigned *struct{} `json:"selfSigned"`
	} `json:"spec"`
}

type cmCertificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretName  string   `json:"secretName"`
		CommonName  string   `json:"commonName"`
		DNSNames    []string `json:"dnsNames"`
		Duration    string   `json:"duration"`
		RenewBefore string   `json:"renewBefore"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
		Usages    []string `json:"usages"`
		IssuerRef struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			Group string `json:"group"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// Types for the Prometheus operator's objects (monitoring.coreos.com/v1),
// limited to the fields the chart writes, so that strict decoding catches a
// misspelt one.
type promRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ruleGroups `json:"spec"`
}

// ruleGroups is a Prometheus rule file, the PrometheusRule's spec.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Scheme        string `json:"scheme"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// manifests are the decoded objects of one `helm template`.
type manifests struct {
	// metricsServices are the headless Services of
	// monitoring.serviceMonitor, apart from the injector's.
	metricsServices []corev1.Service
	promRules       []promRule
	serviceMonitors []serviceMonitor
	serviceAccounts []corev1.ServiceAccount
	configMaps      []corev1.ConfigMap
	secrets         []corev1.Secret
	services        []corev1.Service
	deployments     []appsv1.Deployment
	pdbs            []policyv1.PodDisruptionBudget
	webhooks        []admregv1.MutatingWebhookConfiguration
	issuers         []cmIssuer
	certificates    []cmCertificate
	kinds           []string
}

// The lines of helm's output that decodeManifests reads before decoding a
// document.
var (
	// separatorHere is a document separator, `(?m)^---\s*$`, at the start
	// of its input (splitManifests).
	separatorHere    = regexp.MustCompile(`(?m)\A---\s*$`)
	manifestComment  = regexp.MustCompile(`(?m)^#.*$`)
	topLevelKind     = regexp.MustCompile(`(?m)^kind:[ \t]*(\S+)[ \t]*$`)
	topLevelVersion  = regexp.MustCompile(`(?m)^apiVersion:[ \t]*(\S+)[ \t]*$`)
	metricsComponent = regexp.MustCompile(`(?m)^    app\.kubernetes\.io/component: metrics$`)
)

// decodeManifests splits the output into documents and decodes each one
// strictly (unknown fields and duplicate keys are errors) into its type.
// The type is picked by the document's top-level kind and apiVersion
// lines, and the strict decoding must then find the same ones: a document
// is parsed once (under -race a YAML parse of a rendering is a good part of
// the test's own CPU), and one whose kind the lines do not show fails, as
// an unknown one does.
func decodeManifests(t *testing.T, out string) *manifests {
	t.Helper()
	m := &manifests{}
	for i, doc := range splitManifests(out) {
		var tm metav1.TypeMeta
		if k := topLevelKind.FindStringSubmatch(doc); k != nil {
			tm.Kind = k[1]
		}
		if v := topLevelVersion.FindStringSubmatch(doc); v != nil {
			tm.APIVersion = v[1]
		}
		if tm.Kind == "" {
			if strings.TrimSpace(manifestComment.ReplaceAllString(doc, "")) != "" {
				t.Fatalf("document %d has no kind:\n%s", i, doc)
			}
			continue
		}
		m.kinds = append(m.kinds, tm.APIVersion+"/"+tm.Kind)
		var target any
		switch tm.APIVersion + "/" + tm.Kind {
		case "v1/ServiceAccount":
			m.serviceAccounts = append(m.serviceAccounts, corev1.ServiceAccount{})
			target = &m.serviceAccounts[len(m.serviceAccounts)-1]
		case "v1/ConfigMap":
			m.configMaps = append(m.configMaps, corev1.ConfigMap{})
			target = &m.configMaps[len(m.configMaps)-1]
		case "v1/Secret":
			m.secrets = append(m.secrets, corev1.Secret{})
			target = &m.secrets[len(m.secrets)-1]
		case "v1/Service":
			if metricsComponent.MatchString(doc) {
				m.metricsServices = append(m.metricsServices, corev1.Service{})
				target = &m.metricsServices[len(m.metricsServices)-1]
				break
			}
			m.services = append(m.services, corev1.Service{})
			target = &m.services[len(m.services)-1]
		case "monitoring.coreos.com/v1/PrometheusRule":
			m.promRules = append(m.promRules, promRule{})
			target = &m.promRules[len(m.promRules)-1]
		case "monitoring.coreos.com/v1/ServiceMonitor":
			m.serviceMonitors = append(m.serviceMonitors, serviceMonitor{})
			target = &m.serviceMonitors[len(m.serviceMonitors)-1]
		case "apps/v1/Deployment":
			m.deployments = append(m.deployments, appsv1.Deployment{})
			target = &m.deployments[len(m.deployments)-1]
		case "policy/v1/PodDisruptionBudget":
			m.pdbs = append(m.pdbs, policyv1.PodDisruptionBudget{})
			target = &m.pdbs[len(m.pdbs)-1]
		case "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration":
			m.webhooks = append(m.webhooks, admregv1.MutatingWebhookConfiguration{})
			target = &m.webhooks[len(m.webhooks)-1]
		case "cert-manager.io/v1/Issuer":
			m.issuers = append(m.issuers, cmIssuer{})
			target = &m.issuers[len(m.issuers)-1]
		case "cert-manager.io/v1/Certificate":
			m.certificates = append(m.certificates, cmCertificate{})
			target = &m.certificates[len(m.certificates)-1]
		default:
			// RBAC included: the injector needs no API access, so a Role,
			// ClusterRole or binding appearing is a regression.
			t.Fatalf("unexpected object %s/%s in the chart's output", tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			t.Fatalf("%s does not decode strictly: %v\n%s", tm.Kind, err, doc)
		}
		if got := reflect.ValueOf(target).Elem().FieldByName("TypeMeta").Interface().(metav1.TypeMeta); got != tm {
			t.Fatalf("document %d decodes as %s/%s; its lines say %s/%s\n%s", i, got.APIVersion, got.Kind, tm.APIVersion, tm.Kind, doc)
		}
	}
	return m
}

// splitManifests is regexp.MustCompile(`(?m)^---\s*$`).Split(out, -1), the
// regexp tried only where a line starts with "---": its scan of a whole
// rendering for line starts was a fifth of decodeManifests under -race.
func splitManifests(out string) []string {
	var docs []string
	beg := 0
	for c := 0; c < len(out); {
		i := strings.Index(out[c:], "---")
		if i < 0 {
			break
		}
		i += c
		var m []int
		if i == 0 || out[i-1] == '\n' {
			m = separatorHere.FindStringIndex(out[i:])
		}
		if m == nil {
			c = i + 1
			continue
		}
		docs = append(docs, out[beg:i])
		beg = i + m[1]
		c = beg
	}
	return append(docs, out[beg:])
}

func (m *manifests) configMap(ns, name string) *corev1.ConfigMap {
	for i := range m.configMaps {
		if c := &m.configMaps[i]; c.Namespace == ns && c.Name == name {
			return c
		}
	}
	return nil
}

func (m *manifests) secret(ns, name string) *corev1.Secret {
	for i := range m.secrets {
		if s := &m.secrets[i]; s.Namespace == ns && s.Name == name {
			return s
		}
	}
	return nil
}

func (m *manifests) deployment(name string) *appsv1.Deployment {
	for i := range m.deployments {
		if d := &m.deployments[i]; d.Name == name {
			return d
		}
	}
	return nil
}

// chartCase is one set of values. set/setFile keys name the documented
// values the case exercises (TestChartCoversEveryDocumentedValue).
type chartCase struct {
	name       string
	kube       string // --kube-version; default 1.30.0
	set        []string
	setString  []string
	setFile    []string
	namespaces []string // the namespaces served; default [releaseNS]
	native     bool
	// lint: `helm lint --strict` this case too. Lint renders in strict mode
	// (a missing value is an error) and checks names and API versions, so
	// what it can find depends on which branches of the templates a case
	// takes, not on the values themselves: the defaults and the two
	// "every option" cases between them take every branch, and "no webhook"
	// the one they cannot. The other cases only render (`helm template`
	// checks the schema and the refusals as lint does).
	lint bool
	// failurePolicy is the webhooks' expected failurePolicy; default Ignore.
	failurePolicy admregv1.FailurePolicyType
	check         func(t *testing.T, m *manifests, cfg Config)
}

func (c chartCase) args() []string {
	kube := c.kube
	if kube == "" {
		kube = "1.30.0"
	}
	args := []string{"--kube-version", kube}
	for _, s := range c.set {
		args = append(args, "--set", s)
	}
	for _, s := range c.setString {
		args = append(args, "--set-string", s)
	}
	for _, s := range c.setFile {
		args = append(args, "--set-file", s)
	}
	return args
}

func (c chartCase) keys() []string {
	var keys []string
	for _, s := range slices.Concat(c.set, c.setString, c.setFile) {
		k, _, _ := strings.Cut(s, "=")
		keys = append(keys, regexp.MustCompile(`\[\d+\]`).ReplaceAllString(k, ""))
	}
	return keys
}

// writeTestCA writes a CA made by detour's own code, for ca.cert/ca.key.
func writeTestCA(t *testing.T) (certFile, keyFile string, ca *mitm.CA) {
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	ca, created, _, err := mitm.LoadOrCreate(certFile, keyFile)
	if err != nil || !created {
		t.Fatalf("creating a test CA: %v", err)
	}
	return certFile, keyFile, ca
}

func writeFile(t *testing.T, name, content string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// customPolicy has models patterns whose order matters ("*" last): the
// chart must store the policy as written, not re-serialized with sorted keys.
const customPolicy = `{
  "listen": "127.0.0.1:%d",
  "admin_listen": "0.0.0.0:%d",
  "upstreams": {
    "openai":  {"shape": "openai", "base_url": "https://api.openai.com/v1", "auth": {"from": "client"}},
    "gateway": {"shape": "openai", "base_url": "https://gw.example.com/v1", "auth": {"env": "GATEWAY_KEY"},
                "models": {"gpt-4o*": "gpt-4o", "*": "gpt-4o-mini"}}
  },
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["openai", "gateway"]}]
}
`

func chartCases(t *testing.T) []chartCase {
	caCert, caKey, givenCA := writeTestCA(t)
	policyFile := writeFile(t, "policy.json", fmt.Sprintf(customPolicy, 8787, 8788))
	adminPolicyFile := writeFile(t, "admin-policy.json", strings.Replace(fmt.Sprintf(customPolicy, 8787, 8788),
		`"listen"`, `"admin": {"token_file": "`+AdminTokenFile+`"}, "listen"`, 1))
	portsPolicy := writeFile(t, "ports.json", fmt.Sprintf(customPolicy, 9787, 9788))
	return []chartCase{
		{name: "defaults", native: true, lint: true},
		{
			// Every option away from its default where the options are
			// either/or, the transparent side; the next case the other.
			name: "every option, transparent side", native: true, lint: true, failurePolicy: admregv1.Fail,
			set: []string{"sidecar.interception=transparent", "sidecar.transparent.port=16001", "sidecar.transparent.uid=2000",
				"sidecar.transparent.redirectPorts={443}", "example.enabled=true", "namespaces={shop,research}",
				"keys.values.GATEWAY_KEY=sk-test", "sidecar.proxyPort=9787", "sidecar.adminPort=9788",
				"sidecar.resources.requests.cpu=100m", "sidecar.resources.limits.memory=512Mi", "sidecar.noProxy={corp.internal}",
				"image.repository=registry.example.com/detour", "image.digest=sha256:" + strings.Repeat("ab", 32),
				"image.pullPolicy=Always", "nameOverride=egress", "imagePullSecrets[0].name=regcred",
				"injector.replicas=1", "injector.port=9443", "injector.failurePolicy=Fail", "injector.timeoutSeconds=10",
				"injector.logLevel=debug", "injector.resources.requests.cpu=50m", "injector.podAnnotations.team=platform",
				"injector.podLabels.tier=control", "injector.nodeSelector.pool=system", "injector.priorityClassName=system-cluster-critical",
				"injector.tolerations[0].key=dedicated", "injector.tolerations[0].operator=Exists",
				"injector.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
				"injector.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
				"injector.tls.certManager.enabled=true", "injector.tls.certManager.duration=2160h",
				"injector.tls.certManager.renewBefore=360h", "ca.validityDays=30"},
			setFile:    []string{"policy.json=" + writeFile(t, "every.json", strings.Replace(fmt.Sprintf(customPolicy, 9787, 9788), `"listen"`, `"admin": {"token_file": "`+AdminTokenFile+`"}, "listen"`, 1)), "ca.cert=" + caCert, "ca.key=" + caKey},
			namespaces: []string{"shop", "research"},
		},
		{
			name: "every option, the other side", kube: "1.27.0", native: false, lint: true,
			set: []string{"keys.mode=file", "keys.existingSecret=llm-keys", "policy.existingConfigMap=team-policy",
				"ca.existingSecret=team-ca", "admin.existingSecret=ops-admin-token", "injector.tls.certManager.enabled=true",
				"injector.tls.certManager.issuerRef.name=corp-ca", "injector.tls.certManager.issuerRef.kind=ClusterIssuer",
				"injector.tls.certManager.issuerRef.group=cert-manager.io", "example.enabled=true", "fullnameOverride=llm-egress",
				// The policy is the user's: the chart only mounts the password.
				"state.redis.existingSecret=redis"},
		},
		{name: "kubernetes 1.28: a regular container", kube: "1.28.0", native: false},
		{name: "nativeSidecars false", set: []string{"sidecar.nativeSidecars=false"}, native: false},
		{name: "nativeSidecars true on 1.28", kube: "1.28.0", set: []string{"sidecar.nativeSidecars=true"}, native: true},
		{
			name: "several namespaces", native: true,
			set:        []string{"namespaces={shop,research}"},
			namespaces: []string{"shop", "research"},
		},
		{
			name: "policy from a file, kept verbatim", native: true,
			setFile: []string{"policy.json=" + adminPolicyFile},
			check: func(t *testing.T, m *manifests, cfg Config) {
				want, _ := os.ReadFile(adminPolicyFile)
				if got := m.configMap(releaseNS, "detour-policy").Data["policy.json"]; got != string(want) {
					t.Errorf("policy ConfigMap differs from the file:\n%s", got)
				}
			},
		},
		{
			// Inserted on the first line, so that detour's line:column in
			// an error still points at the user's own file.
			name: "policy from a file without an admin section: the admin token file added", native: true,
			setFile: []string{"policy.json=" + policyFile},
			check: func(t *testing.T, m *manifests, cfg Config) {
				file, _ := os.ReadFile(policyFile)
				want := strings.Replace(string(file), "{", `{"admin": {"token_file": "`+AdminTokenFile+`"},`, 1)
				if got := m.configMap(releaseNS, "detour-policy").Data["policy.json"]; got != want {
					t.Errorf("policy ConfigMap:\n%s\nwant:\n%s", got, want)
				}
			},
		},
		{
			name: "existing admin token Secret", native: true,
			set:        []string{"admin.existingSecret=ops-admin-token", "namespaces={shop,research}"},
			namespaces: []string{"shop", "research"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.AdminTokenSecret != "ops-admin-token" || m.secret("shop", "detour-admin-token") != nil {
					t.Errorf("adminTokenSecret %q; want ops-admin-token and no chart Secret", cfg.AdminTokenSecret)
				}
			},
		},
		{
			name: "existing policy ConfigMap", native: true,
			set: []string{"policy.existingConfigMap=team-policy"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.PolicyConfigMap != "team-policy" || m.configMap(releaseNS, "detour-policy") != nil {
					t.Errorf("policyConfigMap %q; want team-policy and no chart ConfigMap", cfg.PolicyConfigMap)
				}
			},
		},
		{
			name: "existing CA Secret", native: true,
			set: []string{"ca.existingSecret=team-ca"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.CASecret != "team-ca" || m.secret(releaseNS, "detour-ca") != nil {
					t.Errorf("caSecret %q; want team-ca and no chart Secret", cfg.CASecret)
				}
			},
		},
		{
			name: "given CA", native: true,
			setFile: []string{"ca.cert=" + caCert, "ca.key=" + caKey},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if got := m.secret(releaseNS, "detour-ca").Data["ca.pem"]; !bytes.Equal(got, givenCA.CertPEM) {
					t.Errorf("CA Secret does not hold the given certificate")
				}
			},
		},
		{
			name: "CA validity", native: true,
			set: []string{"ca.validityDays=30"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				cert := parseCert(t, m.secret(releaseNS, "detour-ca").Data["ca.pem"])
				if d := time.Until(cert.NotAfter); d < 29*24*time.Hour || d > 31*24*time.Hour {
					t.Errorf("CA expires in %v; want 30 days", d)
				}
			},
		},
		{
			name: "keys as values, env", native: true,
			set:        []string{"keys.values.GATEWAY_KEY=sk-test", "namespaces={shop,research}"},
			namespaces: []string{"shop", "research"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				for _, ns := range []string{"shop", "research"} {
					s := m.secret(ns, "detour-keys")
					if s == nil || string(s.Data["GATEWAY_KEY"]) != "sk-test" {
						t.Errorf("%s: keys Secret %+v", ns, s)
					}
				}
				if cfg.KeysSecret != "detour-keys" || cfg.KeysMode != KeysModeEnv {
					t.Errorf("config keys %q mode %q", cfg.KeysSecret, cfg.KeysMode)
				}
			},
		},
		{
			name: "keys from an existing Secret, as files", native: true,
			set: []string{"keys.mode=file", "keys.existingSecret=llm-keys"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.KeysSecret != "llm-keys" || cfg.KeysMode != KeysModeFile || m.secret(releaseNS, "detour-keys") != nil {
					t.Errorf("config keys %q mode %q", cfg.KeysSecret, cfg.KeysMode)
				}
			},
		},
		{
			name: "other ports", native: true,
			set:     []string{"sidecar.proxyPort=9787", "sidecar.adminPort=9788"},
			setFile: []string{"policy.json=" + portsPolicy},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.ProxyPort != 9787 || cfg.AdminPort != 9788 {
					t.Errorf("ports %d/%d", cfg.ProxyPort, cfg.AdminPort)
				}
			},
		},
		{
			name: "sidecar resources and NO_PROXY", native: true,
			set: []string{"sidecar.resources.requests.cpu=100m", "sidecar.resources.limits.memory=512Mi",
				"sidecar.noProxy={corp.internal,.example.local}"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.Resources.Requests.Cpu().String() != "100m" || cfg.Resources.Limits.Memory().String() != "512Mi" ||
					!slices.Equal(cfg.NoProxy, []string{"corp.internal", ".example.local"}) {
					t.Errorf("config resources %+v noProxy %q", cfg.Resources, cfg.NoProxy)
				}
			},
		},
		{
			name: "image repository, tag, pull policy", native: true,
			set: []string{"image.repository=registry.example.com/detour", "image.tag=1.2.3", "image.pullPolicy=Always"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.Image != "registry.example.com/detour:1.2.3" || cfg.ImagePullPolicy != corev1.PullAlways {
					t.Errorf("config image %q %q", cfg.Image, cfg.ImagePullPolicy)
				}
				if c := m.deployment(injectorName).Spec.Template.Spec.Containers[0]; c.Image != cfg.Image || c.ImagePullPolicy != corev1.PullAlways {
					t.Errorf("injector image %q %q", c.Image, c.ImagePullPolicy)
				}
			},
		},
		{
			name: "image digest", native: true,
			set: []string{"image.digest=sha256:" + strings.Repeat("ab", 32)},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.Image != "ghcr.io/detour-proxy/detour@sha256:"+strings.Repeat("ab", 32) {
					t.Errorf("config image %q", cfg.Image)
				}
			},
		},
		{
			name: "names", native: true,
			set: []string{"nameOverride=egress", "fullnameOverride=llm-egress"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.PolicyConfigMap != "llm-egress-policy" || cfg.CASecret != "llm-egress-ca" || m.deployment("llm-egress-injector") == nil {
					t.Errorf("names: %q %q", cfg.PolicyConfigMap, cfg.CASecret)
				}
				if m.deployment("llm-egress-injector").Labels["app.kubernetes.io/name"] != "egress" {
					t.Error("nameOverride is not the app.kubernetes.io/name label")
				}
			},
		},
		{
			name: "image pull secrets", native: true,
			set: []string{"imagePullSecrets[0].name=regcred"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if ps := m.deployment(injectorName).Spec.Template.Spec.ImagePullSecrets; len(ps) != 1 || ps[0].Name != "regcred" {
					t.Errorf("imagePullSecrets %+v", ps)
				}
			},
		},
		{
			name: "injector settings", native: true, failurePolicy: admregv1.Fail,
			set: []string{"injector.replicas=1", "injector.port=9443", "injector.failurePolicy=Fail", "injector.timeoutSeconds=10",
				"injector.logLevel=debug", "injector.resources.requests.cpu=50m", "injector.podAnnotations.team=platform",
				"injector.podLabels.tier=control", "injector.nodeSelector.pool=system", "injector.priorityClassName=system-cluster-critical",
				"injector.tolerations[0].key=dedicated", "injector.tolerations[0].operator=Exists",
				"injector.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
				"injector.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
			},
			check: func(t *testing.T, m *manifests, cfg Config) {
				d := m.deployment(injectorName)
				ps := d.Spec.Template.Spec
				if *d.Spec.Replicas != 1 || len(m.pdbs) != 0 {
					t.Errorf("replicas %d, %d PDBs; want 1 and none", *d.Spec.Replicas, len(m.pdbs))
				}
				if ps.Containers[0].Ports[0].ContainerPort != 9443 || !slices.Contains(ps.Containers[0].Args, ":9443") ||
					!slices.Contains(ps.Containers[0].Args, "debug") {
					t.Errorf("injector args %q ports %+v", ps.Containers[0].Args, ps.Containers[0].Ports)
				}
				for _, w := range m.webhooks[0].Webhooks {
					if *w.FailurePolicy != admregv1.Fail || *w.TimeoutSeconds != 10 {
						t.Errorf("%s: failurePolicy %s timeout %d", w.Name, *w.FailurePolicy, *w.TimeoutSeconds)
					}
				}
				if d.Spec.Template.Annotations["team"] != "platform" || d.Spec.Template.Labels["tier"] != "control" ||
					ps.NodeSelector["pool"] != "system" || ps.PriorityClassName != "system-cluster-critical" ||
					len(ps.Tolerations) != 1 || ps.Affinity == nil || ps.Containers[0].Resources.Requests.Cpu().String() != "50m" {
					t.Errorf("injector pod settings not applied: %+v", ps)
				}
			},
		},
		{
			name: "webhook certificate validity", native: true,
			set: []string{"injector.tls.validityDays=365"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				cert := parseCert(t, m.secret(releaseNS, injectorName+"-tls").Data["tls.crt"])
				if d := time.Until(cert.NotAfter); d < 364*24*time.Hour || d > 366*24*time.Hour {
					t.Errorf("webhook certificate expires in %v; want 365 days", d)
				}
			},
		},
		{
			name: "cert-manager, self-signed", native: true,
			set: []string{"injector.tls.certManager.enabled=true", "injector.tls.certManager.duration=2160h",
				"injector.tls.certManager.renewBefore=360h"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if len(m.issuers) != 1 || m.issuers[0].Spec.SelfSigned == nil {
					t.Fatalf("issuers %+v; want one self-signed", m.issuers)
				}
				c := m.certificates[0].Spec
				if c.IssuerRef.Name != m.issuers[0].Name || c.IssuerRef.Kind != "Issuer" || c.Duration != "2160h" || c.RenewBefore != "360h" {
					t.Errorf("certificate %+v", c)
				}
			},
		},
		{
			name: "cert-manager, given issuer", native: true,
			set: []string{"injector.tls.certManager.enabled=true", "injector.tls.certManager.issuerRef.name=corp-ca",
				"injector.tls.certManager.issuerRef.kind=ClusterIssuer", "injector.tls.certManager.issuerRef.group=cert-manager.io"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				c := m.certificates[0].Spec
				if len(m.issuers) != 0 || c.IssuerRef.Name != "corp-ca" || c.IssuerRef.Kind != "ClusterIssuer" {
					t.Errorf("issuers %d, issuerRef %+v", len(m.issuers), c.IssuerRef)
				}
			},
		},
		{
			name: "no webhook", native: true, lint: true,
			set: []string{"injector.enabled=false"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if len(m.deployments)+len(m.webhooks)+len(m.services)+len(m.serviceAccounts) != 0 {
					t.Errorf("injector objects rendered: %q", m.kinds)
				}
				if m.configMap(releaseNS, "detour-policy") == nil || m.secret(releaseNS, "detour-ca") == nil {
					t.Error("per-namespace objects missing")
				}
			},
		},
		{
			// Every transparent value away from its default, and the example
			// built with the named templates: they and the webhook must
			// inject the same detour-redirect, listener and uid.
			name: "transparent interception, every value", native: true,
			set: []string{"sidecar.interception=transparent", "sidecar.transparent.port=16001", "sidecar.transparent.uid=2000",
				"sidecar.transparent.redirectPorts={443}", "sidecar.transparent.excludeCIDRs={10.96.0.0/12,fd00::/8}", "example.enabled=true"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.Interception != InterceptionTransparent || cfg.TransparentPort != 16001 || cfg.TransparentUID != 2000 ||
					!slices.Equal(cfg.RedirectPorts, []int32{443}) || !slices.Equal(cfg.ExcludeCIDRs, []string{"10.96.0.0/12", "fd00::/8"}) {
					t.Errorf("config interception %q port %d uid %d ports %v excluded %q", cfg.Interception, cfg.TransparentPort, cfg.TransparentUID, cfg.RedirectPorts, cfg.ExcludeCIDRs)
				}
				checkTransparentExample(t, m, cfg, []string{"redirect", "install", "--to-port", "16001", "--ports", "443", "--exclude-uid", "2000",
					"--exclude-cidr", "10.96.0.0/12", "--exclude-cidr", "fd00::/8"})
			},
		},
		{
			// The defaults are left out of the injector's config: the
			// chart's and the webhook's defaults must be the same.
			name: "transparent interception, defaults, regular container", kube: "1.28.0", native: false,
			set: []string{"sidecar.interception=transparent", "example.enabled=true"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.Interception != InterceptionTransparent || cfg.TransparentPort != 0 || cfg.TransparentUID != 0 || cfg.RedirectPorts != nil {
					t.Errorf("config %+v; want interception transparent and the rest left to the defaults", cfg)
				}
				checkTransparentExample(t, m, cfg, []string{"redirect", "install", "--to-port", "15001", "--ports", "443,80", "--exclude-uid", "65531"})
			},
		},
		{
			name: "monitoring, defaults", native: true,
			set: []string{"monitoring.dashboard.enabled=true", "monitoring.prometheusRule.enabled=true", "monitoring.serviceMonitor.enabled=true"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				checkMonitoring(t, m, monitoringWant{dashboardNS: releaseNS, dashboardLabels: map[string]string{"grafana_dashboard": "1"},
					runbook: defaultRunbook, namespaces: []string{releaseNS}, podLabels: map[string]string{LabelInject: "true"},
					interval: "30s", adminPort: 8788})
			},
		},
		{
			name: "monitoring, every value", native: true, lint: true,
			set: []string{"monitoring.dashboard.enabled=true", "monitoring.dashboard.namespace=shop",
				"monitoring.dashboard.labels.dashboards=detour", "monitoring.dashboard.annotations.grafana_folder=LLM",
				"monitoring.prometheusRule.enabled=true", "monitoring.prometheusRule.labels.release=kube-prometheus-stack",
				"monitoring.prometheusRule.runbookBaseURL=https://wiki.example.com/detour/",
				"monitoring.serviceMonitor.enabled=true", "monitoring.serviceMonitor.podSelector.app=chat",
				"monitoring.serviceMonitor.interval=15s", "monitoring.serviceMonitor.scrapeTimeout=5s",
				"monitoring.serviceMonitor.labels.release=kube-prometheus-stack",
				"namespaces={shop,research}", "sidecar.adminPort=9788"},
			setFile:    []string{"policy.json=" + writeFile(t, "monitoring.json", fmt.Sprintf(customPolicy, 8787, 9788))},
			namespaces: []string{"shop", "research"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				checkMonitoring(t, m, monitoringWant{dashboardNS: "shop",
					dashboardLabels: map[string]string{"grafana_dashboard": "1", "dashboards": "detour"}, dashboardAnnotations: map[string]string{"grafana_folder": "LLM"},
					ruleLabels: map[string]string{"release": "kube-prometheus-stack"}, runbook: "https://wiki.example.com/detour",
					namespaces: []string{"shop", "research"}, podLabels: map[string]string{LabelInject: "true", "app": "chat"},
					interval: "15s", scrapeTimeout: "5s", monitorLabels: map[string]string{"release": "kube-prometheus-stack"}, adminPort: 9788})
			},
		},
		{
			// Every state.redis value, and the example built with the named
			// templates: they and the webhook must mount the same password.
			name: "fleet state in Redis, every value", native: true, lint: true,
			set: []string{"state.redis.url=rediss://redis-master.redis.svc:6380/0", "state.redis.existingSecret=redis",
				"state.redis.passwordKey=redis-password", "state.redis.keyPrefix=shop:", "state.redis.timeout=50ms",
				"example.enabled=true", "namespaces={shop,research}"},
			setFile:    []string{"policy.json=" + policyFile},
			namespaces: []string{"shop", "research"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				if cfg.RedisPasswordSecret != "redis" || cfg.RedisPasswordKey != "redis-password" {
					t.Errorf("config redis secret %q key %q", cfg.RedisPasswordSecret, cfg.RedisPasswordKey)
				}
				file, _ := os.ReadFile(policyFile)
				want := strings.Replace(string(file), "{", `{"state": {"backend":"redis","redis":{"key_prefix":"shop:","password_file":"`+RedisPasswordFile+
					`","timeout":"50ms","url":"rediss://redis-master.redis.svc:6380/0"}},{"admin": {"token_file": "`+AdminTokenFile+`"},`, 1)
				want = strings.Replace(want, `}},{"admin"`, `}},"admin"`, 1)
				for _, ns := range []string{"shop", "research"} {
					if got := m.configMap(ns, "detour-policy").Data["policy.json"]; got != want {
						t.Errorf("%s: policy ConfigMap:\n%s\nwant:\n%s", ns, got, want)
					}
				}
			},
		},
		{
			name: "fleet state in Redis without a password", native: true,
			set: []string{"state.redis.url=redis://redis.shop.svc:6379"},
			check: func(t *testing.T, m *manifests, cfg Config) {
				text := m.configMap(releaseNS, "detour-policy").Data["policy.json"]
				if !strings.HasPrefix(text, `{"state": {"backend":"redis","redis":{"url":"redis://redis.shop.svc:6379"}},`) || cfg.RedisPasswordSecret != "" {
					t.Errorf("policy %.160q, redis secret %q; want a state section with the URL only and no Secret", text, cfg.RedisPasswordSecret)
				}
			},
		},
		{
			name: "example, native", native: true,
			set: []string{"example.enabled=true", "example.image=docker.io/library/python:3.13-slim"},
		},
		{
			name: "example, regular container, keys as files", kube: "1.27.0", native: false,
			set: []string{"example.enabled=true", "keys.mode=file", "keys.values.GATEWAY_KEY=sk-test", "sidecar.noProxy={corp.internal}"},
		},
	}
}

const defaultRunbook = "https://github.com/detour-proxy/detour/blob/main/docs/runbook.md"

// monitoringWant is what checkMonitoring expects of the monitoring objects.
type monitoringWant struct {
	dashboardNS                           string
	dashboardLabels, dashboardAnnotations map[string]string
	ruleLabels, monitorLabels             map[string]string
	runbook                               string
	namespaces                            []string
	podLabels                             map[string]string
	interval, scrapeTimeout               string
	adminPort                             int32
}

// checkMonitoring: the dashboard ConfigMap holds the chart's dashboard file
// byte for byte, with the sidecar's label; the PrometheusRule is the rule
// file with only runbook_url's base changed; in every served namespace a
// headless Service selects pods with the given labels on the admin port,
// and a ServiceMonitor selects that Service and scrapes /metrics there.
func checkMonitoring(t *testing.T, m *manifests, w monitoringWant) {
	t.Helper()
	var dash *corev1.ConfigMap
	for i := range m.configMaps {
		if m.configMaps[i].Labels["app.kubernetes.io/component"] == "dashboard" {
			dash = &m.configMaps[i]
		}
	}
	file, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "detour.json"))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case dash == nil:
		t.Error("no dashboard ConfigMap")
	case dash.Namespace != w.dashboardNS || dash.Data["detour.json"] != string(file):
		t.Errorf("dashboard ConfigMap in %q (want %q); holds the dashboard file: %v", dash.Namespace, w.dashboardNS, dash.Data["detour.json"] == string(file))
	default:
		for k, v := range w.dashboardLabels {
			if dash.Labels[k] != v {
				t.Errorf("dashboard ConfigMap label %s=%q; want %q", k, dash.Labels[k], v)
			}
		}
		for k, v := range w.dashboardAnnotations {
			if dash.Annotations[k] != v {
				t.Errorf("dashboard ConfigMap annotation %s=%q; want %q", k, dash.Annotations[k], v)
			}
		}
	}

	rulesText, err := os.ReadFile(filepath.Join(chartDir, "rules", "detour.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want ruleGroups
	if err := yaml.UnmarshalStrict([]byte(strings.ReplaceAll(string(rulesText), defaultRunbook, w.runbook)), &want); err != nil {
		t.Fatal(err)
	}
	if len(m.promRules) != 1 {
		t.Fatalf("%d PrometheusRules; want 1", len(m.promRules))
	}
	pr := m.promRules[0]
	gotJSON, _ := json.Marshal(pr.Spec)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) || pr.Namespace != releaseNS {
		t.Errorf("PrometheusRule in %q is not the rule file:\n%s\nwant:\n%s", pr.Namespace, gotJSON, wantJSON)
	}
	if len(want.Groups) == 0 || !strings.HasPrefix(want.Groups[0].Rules[0].Annotations["runbook_url"], w.runbook+"#") {
		t.Errorf("runbook_url %q; want under %s", want.Groups[0].Rules[0].Annotations["runbook_url"], w.runbook)
	}
	for k, v := range w.ruleLabels {
		if pr.Labels[k] != v {
			t.Errorf("PrometheusRule label %s=%q; want %q", k, pr.Labels[k], v)
		}
	}

	if len(m.metricsServices) != len(w.namespaces) || len(m.serviceMonitors) != len(w.namespaces) {
		t.Fatalf("%d metrics Services and %d ServiceMonitors; want one each in %q", len(m.metricsServices), len(m.serviceMonitors), w.namespaces)
	}
	for i, ns := range w.namespaces {
		svc, sm := m.metricsServices[i], m.serviceMonitors[i]
		if svc.Namespace != ns || sm.Namespace != ns || svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("metrics Service %s/%s (clusterIP %q), ServiceMonitor %s/%s; want both in %s, headless", svc.Namespace, svc.Name, svc.Spec.ClusterIP, sm.Namespace, sm.Name, ns)
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.podLabels)) || len(svc.Spec.Selector) != len(w.podLabels) {
			t.Errorf("metrics Service selector %v; want %v", svc.Spec.Selector, w.podLabels)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.IntValue() != int(w.adminPort) {
			t.Errorf("metrics Service ports %+v; want the admin port %d", svc.Spec.Ports, w.adminPort)
		}
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(svc.Labels)) || sel.Matches(labels.Set(m.services[0].Labels)) {
			t.Errorf("ServiceMonitor selector %v: must select the metrics Service %v and not the injector's", sm.Spec.Selector, svc.Labels)
		}
		if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{ns}) || len(sm.Spec.Endpoints) != 1 {
			t.Fatalf("ServiceMonitor %+v", sm.Spec)
		}
		ep := sm.Spec.Endpoints[0]
		if ep.Port != svc.Spec.Ports[0].Name || ep.Path != "/metrics" || ep.Interval != w.interval || ep.ScrapeTimeout != w.scrapeTimeout {
			t.Errorf("ServiceMonitor endpoint %+v; want port %q, /metrics, interval %q, timeout %q", ep, svc.Spec.Ports[0].Name, w.interval, w.scrapeTimeout)
		}
		for k, v := range w.monitorLabels {
			if sm.Labels[k] != v {
				t.Errorf("ServiceMonitor label %s=%q; want %q", k, sm.Labels[k], v)
			}
		}
	}
}

// TestChart lints and renders the chart for every case and checks what
// every rendering must satisfy, then the case's own promises.
func TestChart(t *testing.T) {
	helm(t)
	countHelm(t)
	for _, c := range chartCases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.lint {
				if out, err := runHelm(t, append([]string{"lint", "--strict", chartDir, "--namespace", releaseNS}, c.args()...)...); err != nil {
					t.Fatalf("helm lint: %v\n%s", err, out)
				}
			}
			out, err := runHelm(t, append([]string{"template", release, chartDir, "--namespace", releaseNS}, c.args()...)...)
			if err != nil {
				t.Fatal(err)
			}
			m := decodeManifests(t, out)
			namespaces := c.namespaces
			if namespaces == nil {
				namespaces = []string{releaseNS}
			}
			cfg := checkCommon(t, m, c, namespaces)
			if c.check != nil {
				c.check(t, m, cfg)
			}
		})
	}
}

// checkCommon checks the essentials of one rendering and returns the
// injector's config (as the chart would have rendered it, also without the
// injector).
func checkCommon(t *testing.T, m *manifests, c chartCase, namespaces []string) Config {
	t.Helper()
	var cfg Config
	if d := m.deployment(injectorName); d != nil || len(m.webhooks) > 0 {
		want := c.failurePolicy
		if want == "" {
			want = admregv1.Ignore
		}
		cfg = checkInjector(t, m, namespaces, want)
		if *cfg.NativeSidecars != c.native {
			t.Errorf("nativeSidecars %v; want %v", *cfg.NativeSidecars, c.native)
		}
	}
	for _, d := range m.deployments {
		checkPodSpec(t, d.Name, &d.Spec.Template.Spec)
	}
	// Per-namespace objects: present where the config says, accepted by detour.
	policyCM, caSecret := "detour-policy", "detour-ca"
	if cfg.PolicyConfigMap != "" {
		policyCM, caSecret = cfg.PolicyConfigMap, cfg.CASecret
	}
	adminSecret := cfg.withDefaults().AdminTokenSecret
	var caPEM []byte
	tokens := map[string]string{}
	for _, ns := range namespaces {
		token := []byte("a-token-from-an-existing-secret")
		if s := m.secret(ns, adminSecret); s != nil {
			token = s.Data[AdminTokenKey]
			if !regexp.MustCompile(`^[A-Za-z0-9]{43}$`).Match(token) {
				t.Errorf("%s: admin token %q; want 43 random letters and digits", ns, token)
			}
			if other, dup := tokens[string(token)]; dup {
				t.Errorf("namespaces %s and %s share an admin token: a Secret read in one would open the other", other, ns)
			}
			tokens[string(token)] = ns
		} else if !strings.Contains(strings.Join(c.keys(), ","), "admin.existingSecret") {
			t.Errorf("%s: no admin token Secret %q", ns, adminSecret)
		}
		if cm := m.configMap(ns, policyCM); cm != nil {
			checkPolicy(t, cm.Data["policy.json"], cfg.withDefaults(), token)
		} else if !strings.Contains(strings.Join(c.keys(), ","), "policy.existingConfigMap") {
			t.Errorf("%s: no policy ConfigMap %q", ns, policyCM)
		}
		if s := m.secret(ns, caSecret); s != nil {
			checkCA(t, s)
			if caPEM != nil && !bytes.Equal(caPEM, s.Data[CACertKey]) {
				t.Errorf("%s: a different CA than in %s", ns, namespaces[0])
			}
			caPEM = s.Data[CACertKey]
		} else if !strings.Contains(strings.Join(c.keys(), ","), "ca.existingSecret") {
			t.Errorf("%s: no CA Secret %q", ns, caSecret)
		}
	}
	for _, o := range namespacesOf(m) {
		if !slices.Contains(namespaces, o) && o != releaseNS {
			t.Errorf("an object in namespace %q, which is not served", o)
		}
	}
	if d := m.deployment("detour-example"); d != nil {
		checkExample(t, d, cfg, namespaces[0])
	}
	return cfg
}

func namespacesOf(m *manifests) []string {
	var out []string
	for _, c := range m.configMaps {
		out = append(out, c.Namespace)
	}
	for _, s := range m.secrets {
		out = append(out, s.Namespace)
	}
	return out
}

// checkInjector checks the webhook, its Service, certificate, Deployment and
// selectors, and returns its config.
func checkInjector(t *testing.T, m *manifests, namespaces []string, failurePolicy admregv1.FailurePolicyType) Config {
	t.Helper()
	var d *appsv1.Deployment
	for i := range m.deployments {
		if m.deployments[i].Spec.Template.Labels[LabelComponent] == "injector" {
			d = &m.deployments[i]
		}
	}
	if d == nil || len(m.services) != 1 || len(m.webhooks) != 1 || len(m.serviceAccounts) != 1 {
		t.Fatalf("want one injector Deployment, Service, ServiceAccount and webhook configuration; got %q", m.kinds)
	}
	ps := d.Spec.Template.Spec
	svc, sa, mwc := m.services[0], m.serviceAccounts[0], m.webhooks[0]
	pod := ps.Containers[0]

	// RBAC minimal: no API access at all.
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken ||
		ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken || ps.ServiceAccountName != sa.Name {
		t.Error("the injector must run as its own ServiceAccount without a token")
	}
	// The Service reaches the pods, on the port the container listens on.
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the injector pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Deployment selector does not match its pods")
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != pod.Ports[0].Name {
		t.Errorf("Service targetPort %v; want the container's port %q", svc.Spec.Ports, pod.Ports[0].Name)
	}
	for _, p := range []*corev1.Probe{pod.ReadinessProbe, pod.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Scheme != corev1.URISchemeHTTPS ||
			p.HTTPGet.Port.StrVal != pod.Ports[0].Name {
			t.Errorf("injector probe %+v; want GET https /healthz on the webhook port", p)
		}
	}
	arg := func(flag string) string {
		i := slices.Index(pod.Args, flag)
		if i < 0 || i+1 >= len(pod.Args) {
			t.Fatalf("injector args %q lack %s", pod.Args, flag)
		}
		return pod.Args[i+1]
	}
	if pod.Args[0] != "inject" || arg("--listen") != fmt.Sprintf(":%d", pod.Ports[0].ContainerPort) {
		t.Errorf("injector args %q", pod.Args)
	}

	// The config: decoded by the injector's own strict parser.
	cm := m.configMap(d.Namespace, volumeSource(t, ps, pathVolume(t, pod, arg("--config"))).ConfigMap.Name)
	if cm == nil {
		t.Fatal("the injector's config ConfigMap is missing")
	}
	cfg, err := ParseConfig("config.json", []byte(cm.Data["config.json"]))
	if err != nil {
		t.Fatalf("the chart's injector config: %v", err)
	}
	if d.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("no checksum/config annotation: a config change would not roll the injector")
	}

	// The webhooks.
	tlsSecretName := volumeSource(t, ps, pathVolume(t, pod, arg("--tls-cert"))).Secret.SecretName
	if pathVolume(t, pod, arg("--tls-key")) != pathVolume(t, pod, arg("--tls-cert")) {
		t.Error("--tls-cert and --tls-key are in different volumes")
	}
	certManager := len(m.certificates) > 0
	var caBundle []byte
	if !certManager {
		s := m.secret(d.Namespace, tlsSecretName)
		if s == nil || s.Type != corev1.SecretTypeTLS {
			t.Fatalf("no kubernetes.io/tls Secret %q", tlsSecretName)
		}
		caBundle = s.Data["ca.crt"]
		checkServingCert(t, s, caBundle, fmt.Sprintf("%s.%s.svc", svc.Name, svc.Namespace))
		if mwc.Annotations["cert-manager.io/inject-ca-from"] != "" {
			t.Error("cert-manager annotation without cert-manager")
		}
	} else {
		crt := m.certificates[0]
		if crt.Spec.SecretName != tlsSecretName || !slices.Contains(crt.Spec.DNSNames, fmt.Sprintf("%s.%s.svc", svc.Name, svc.Namespace)) {
			t.Errorf("Certificate %+v does not fit Secret %q and Service %s", crt.Spec, tlsSecretName, svc.Name)
		}
		if got, want := mwc.Annotations["cert-manager.io/inject-ca-from"], crt.Namespace+"/"+crt.Name; got != want {
			t.Errorf("inject-ca-from %q; want %q", got, want)
		}
		if m.secret(d.Namespace, tlsSecretName) != nil {
			t.Error("the chart renders the TLS Secret that cert-manager owns")
		}
	}
	if len(mwc.Webhooks) != 2 {
		t.Fatalf("%d webhooks; want 2 (pod label, namespace label)", len(mwc.Webhooks))
	}
	for _, w := range mwc.Webhooks {
		ref := w.ClientConfig.Service
		if ref == nil || ref.Name != svc.Name || ref.Namespace != svc.Namespace || ref.Path == nil || *ref.Path != "/inject" ||
			ref.Port == nil || *ref.Port != svc.Spec.Ports[0].Port || w.ClientConfig.URL != nil {
			t.Errorf("%s: clientConfig %+v does not point at Service %s/%s port %d path /inject", w.Name, w.ClientConfig, svc.Namespace, svc.Name, svc.Spec.Ports[0].Port)
		}
		if !bytes.Equal(w.ClientConfig.CABundle, caBundle) {
			t.Errorf("%s: caBundle is not the serving certificate's CA", w.Name)
		}
		if w.SideEffects == nil || *w.SideEffects != admregv1.SideEffectClassNone || !slices.Equal(w.AdmissionReviewVersions, []string{"v1"}) {
			t.Errorf("%s: sideEffects %v reviews %v", w.Name, w.SideEffects, w.AdmissionReviewVersions)
		}
		if len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Operations, []admregv1.OperationType{admregv1.Create}) ||
			!slices.Equal(w.Rules[0].Resources, []string{"pods"}) || !slices.Equal(w.Rules[0].APIGroups, []string{""}) {
			t.Errorf("%s: rules %+v; want pods CREATE only", w.Name, w.Rules)
		}
		if w.FailurePolicy == nil || *w.FailurePolicy != failurePolicy || w.TimeoutSeconds == nil {
			t.Errorf("%s: failurePolicy %v; want %s, and an explicit timeoutSeconds", w.Name, ptrString(w.FailurePolicy), failurePolicy)
		}
	}
	checkSelectors(t, mwc, d, namespaces)
	return cfg
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

// checkSelectors: the two webhooks pick a pod at most once; labelled pods
// in served namespaces, and unlabelled ones in labelled served namespaces;
// never an opted-out pod, a pod of an unserved namespace, or detour's own.
func checkSelectors(t *testing.T, mwc admregv1.MutatingWebhookConfiguration, injector *appsv1.Deployment, namespaces []string) {
	t.Helper()
	served := namespaces[0]
	nsLabels := func(name string, optIn bool) labels.Set {
		l := labels.Set{"kubernetes.io/metadata.name": name}
		if optIn {
			l[LabelInject] = "true"
		}
		return l
	}
	for _, tc := range []struct {
		name      string
		ns        labels.Set
		pod       labels.Set
		wantCalls int
	}{
		{"labelled pod", nsLabels(served, false), labels.Set{LabelInject: "true", "app": "x"}, 1},
		{"labelled pod in a labelled namespace", nsLabels(served, true), labels.Set{LabelInject: "true"}, 1},
		{"unlabelled pod in a labelled namespace", nsLabels(served, true), labels.Set{"app": "x"}, 1},
		{"unlabelled pod", nsLabels(served, false), labels.Set{"app": "x"}, 0},
		{"opted-out pod in a labelled namespace", nsLabels(served, true), labels.Set{LabelInject: "false"}, 0},
		{"labelled pod in a namespace not served", nsLabels("elsewhere", true), labels.Set{LabelInject: "true"}, 0},
		{"kube-system", nsLabels("kube-system", true), labels.Set{"component": "kube-proxy"}, 0},
		{"detour's own injector", nsLabels(injector.Namespace, true), labels.Set(injector.Spec.Template.Labels), 0},
		{"detour's own injector, labelled by mistake", nsLabels(served, true),
			labels.Merge(labels.Set(injector.Spec.Template.Labels), labels.Set{LabelInject: "true"}), 0},
	} {
		calls := 0
		for _, w := range mwc.Webhooks {
			nsSel, err1 := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
			objSel, err2 := metav1.LabelSelectorAsSelector(w.ObjectSelector)
			if err1 != nil || err2 != nil || w.NamespaceSelector == nil || w.ObjectSelector == nil {
				t.Fatalf("%s: selectors %v %v", w.Name, err1, err2)
			}
			if nsSel.Matches(tc.ns) && objSel.Matches(tc.pod) {
				calls++
			}
		}
		if calls != tc.wantCalls {
			t.Errorf("%s: sent to %d webhooks; want %d", tc.name, calls, tc.wantCalls)
		}
	}
}

// checkServingCert: tls.crt and tls.key are a pair, and tls.crt verifies
// against the CA bundle the API server is given, for the Service's name.
func checkServingCert(t *testing.T, s *corev1.Secret, caBundle []byte, dnsName string) {
	t.Helper()
	if _, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"]); err != nil {
		t.Fatalf("tls.crt and tls.key: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		t.Fatal("caBundle has no certificate")
	}
	leaf := parseCert(t, s.Data["tls.crt"])
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: pool,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("webhook certificate does not verify for %s against the caBundle: %v", dnsName, err)
	}
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// pathVolume returns the volume of the container's mount that holds path.
func pathVolume(t *testing.T, c corev1.Container, path string) string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return m.Name
		}
	}
	t.Fatalf("container %q has no mount holding %s", c.Name, path)
	return ""
}

func volumeSource(t *testing.T, ps corev1.PodSpec, name string) corev1.VolumeSource {
	t.Helper()
	for _, v := range ps.Volumes {
		if v.Name == name {
			return v.VolumeSource
		}
	}
	t.Fatalf("no volume %q", name)
	return corev1.VolumeSource{}
}

// checkPodSpec: every container runs as non-root with a read-only root,
// no privilege escalation and no capabilities, and has resources; the pod
// is valid by validatePod's rules.
func checkPodSpec(t *testing.T, name string, ps *corev1.PodSpec) {
	t.Helper()
	if errs := validatePod(&corev1.Pod{Spec: *ps}); len(errs) > 0 {
		t.Errorf("%s: %s", name, strings.Join(errs, "; "))
	}
	podNonRoot := ps.SecurityContext != nil && ps.SecurityContext.RunAsNonRoot != nil && *ps.SecurityContext.RunAsNonRoot
	for _, c := range append(append([]corev1.Container(nil), ps.InitContainers...), ps.Containers...) {
		sc := c.SecurityContext
		if c.Name == RedirectContainerName {
			// Root with NET_ADMIN and NET_RAW by design: checked by
			// checkInterception (checkTransparentExample).
			continue
		}
		switch {
		case sc == nil:
			t.Errorf("%s/%s: no securityContext", name, c.Name)
			continue
		case !podNonRoot && (sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot):
			t.Errorf("%s/%s: not runAsNonRoot", name, c.Name)
		case sc.RunAsUser != nil && *sc.RunAsUser == 0:
			t.Errorf("%s/%s: runAsUser 0", name, c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s/%s: root filesystem not read-only", name, c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s/%s: privilege escalation allowed", name, c.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
			t.Errorf("%s/%s: capabilities %+v; want drop ALL", name, c.Name, sc.Capabilities)
		}
		r := c.Resources
		if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
			t.Errorf("%s/%s: resources %+v; want cpu and memory requests and a memory limit", name, c.Name, r)
		}
	}
}

// checkPolicy: the ConfigMap's policy compiles with detour's own compiler
// and fits the sidecar: listen on the proxy port, admin on every interface
// at the admin port, CA where the Secret is mounted.
func checkPolicy(t *testing.T, text string, cfg Config, adminToken []byte) {
	t.Helper()
	text = withoutPendingState(t, text)
	c, err := policy.Compile("policy.json", []byte(text), policy.Options{
		BaseDir:      policyDir,
		DefaultCADir: CADir,
		Getenv:       func(string) (string, bool) { return "test-key", true },
		// The admin token as the pod mounts it from the rendered Secret.
		ReadFile: func(p string) ([]byte, error) {
			if p == AdminTokenFile {
				return adminToken, nil
			}
			if p == RedisPasswordFile && cfg.RedisPasswordSecret != "" {
				return []byte("a-redis-password"), nil
			}
			return os.ReadFile(p)
		},
	})
	if err != nil {
		t.Fatalf("the chart's policy does not compile: %v", err)
	}
	if c.Listen != fmt.Sprintf("127.0.0.1:%d", cfg.ProxyPort) || c.AdminListen != fmt.Sprintf("0.0.0.0:%d", cfg.AdminPort) {
		t.Errorf("policy listen %q admin_listen %q; want the sidecar's ports", c.Listen, c.AdminListen)
	}
	if c.CACertFile != CADir+"/"+CACertKey || c.CAKeyFile != CADir+"/"+CAKeyKey {
		t.Errorf("policy CA files %s, %s; want the Secret's mount", c.CACertFile, c.CAKeyFile)
	}
	// The admin listener is on the pod IP: without the token, /status and
	// rollback would answer no one outside the pod.
	if c.Admin.TokenFile != AdminTokenFile {
		t.Errorf("policy admin.token_file %q; want the admin token Secret's mount %s", c.Admin.TokenFile, AdminTokenFile)
	}
}

// withoutPendingState returns the policy text without the "state" section
// the chart inserts for state.redis while this branch's policy compiler
// has no state.redis (the fleet state backend is merged from another
// branch): the rest of the policy is still compiled. Once policy.StateFile
// has Redis, the text is compiled whole, state section included.
func withoutPendingState(t *testing.T, text string) string {
	t.Helper()
	if _, ok := reflect.TypeOf(policy.StateFile{}).FieldByName("Redis"); ok {
		return text
	}
	open := regexp.MustCompile(`^\s*\{"state": `).FindString(text)
	if open == "" {
		return text
	}
	dec := json.NewDecoder(strings.NewReader(text[len(open):]))
	var section json.RawMessage
	if err := dec.Decode(&section); err != nil {
		t.Fatalf("the inserted state section: %v", err)
	}
	rest := text[len(open)+int(dec.InputOffset()):]
	if !strings.HasPrefix(rest, ",") {
		t.Fatalf("the inserted state section is not followed by a comma: %q", rest)
	}
	return strings.TrimSuffix(open, `"state": `) + rest[1:]
}

// checkCA: detour loads the Secret's CA, mounted as the pod would mount it
// (mode 0444), and it is ECDSA P-256.
func checkCA(t *testing.T, s *corev1.Secret) {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{CACertKey, CAKeyKey} {
		if err := os.WriteFile(filepath.Join(dir, k), s.Data[k], secretMode); err != nil {
			t.Fatal(err)
		}
	}
	ca, created, _, err := mitm.LoadOrCreate(filepath.Join(dir, CACertKey), filepath.Join(dir, CAKeyKey))
	if err != nil || created {
		t.Fatalf("detour does not load the chart's CA: created %v, %v", created, err)
	}
	if k, ok := ca.Key.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("CA key is %T; want ECDSA P-256", ca.Key)
	}
}

// checkExample: the Deployment written with the named templates has the very
// containers, volumes, variables and mounts the webhook adds, and the webhook
// leaves it alone.
func checkExample(t *testing.T, d *appsv1.Deployment, cfg Config, ns string) {
	t.Helper()
	if d.Namespace != ns {
		t.Errorf("example in %q; want %q", d.Namespace, ns)
	}
	pod := &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
	compareWithWebhook(t, pod, cfg, "app")
}

// compareWithWebhook compares a pod written with the named templates with
// what Mutate adds to the same pod without them.
func compareWithWebhook(t *testing.T, pod *corev1.Pod, cfg Config, app string) {
	t.Helper()
	if d, err := cfg.Mutate(pod); err != nil || len(d.Patch) != 0 || d.Reason != ReasonAlready {
		t.Errorf("the webhook would change a pod that has detour by hand: %v %v", d.Reason, err)
	}
	// The pod as its author wrote it, minus everything detour's templates added.
	bare := pod.DeepCopy()
	isOurs := func(c corev1.Container) bool {
		return c.Name == ContainerName || c.Name == TrustContainerName || c.Name == RedirectContainerName
	}
	bare.Spec.InitContainers = slices.DeleteFunc(bare.Spec.InitContainers, isOurs)
	bare.Spec.Containers = slices.DeleteFunc(bare.Spec.Containers, isOurs)
	bare.Spec.Volumes = slices.DeleteFunc(bare.Spec.Volumes, func(v corev1.Volume) bool { return strings.HasPrefix(v.Name, "detour-") })
	for i := range bare.Spec.Containers {
		bare.Spec.Containers[i].Env = nil
		bare.Spec.Containers[i].VolumeMounts = slices.DeleteFunc(bare.Spec.Containers[i].VolumeMounts,
			func(m corev1.VolumeMount) bool { return m.Name == volTrust })
	}
	dec, err := cfg.Mutate(bare)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(bare)
	ops, _ := json.Marshal(dec.Patch)
	patched, err := applyPatch(raw, ops)
	if err != nil {
		t.Fatal(err)
	}
	var injected corev1.Pod
	if err := strictUnmarshal(patched, &injected); err != nil {
		t.Fatal(err)
	}
	same := func(what string, a, b any) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("%s differs between the named templates and the webhook:\ntemplates: %s\nwebhook:   %s", what, ja, jb)
		}
	}
	same("initContainers", pod.Spec.InitContainers, injected.Spec.InitContainers)
	same("containers", pod.Spec.Containers, injected.Spec.Containers)
	same("volumes", pod.Spec.Volumes, injected.Spec.Volumes)
	if findContainer(pod.Spec.Containers, app) == nil {
		t.Errorf("no app container %q", app)
	}
}

// TestChartFailsOnMistakes: values the sidecar could not work with are
// refused at render time, with a message that says what to do.
func TestChartFailsOnMistakes(t *testing.T) {
	helm(t)
	countHelm(t)
	keyOnly := writeFile(t, "key.pem", "-----BEGIN EC PRIVATE KEY-----\n-----END EC PRIVATE KEY-----\n")
	// The cases values.schema.json refuses share one rendering with all
	// their values: helm reports every value the schema refuses at once
	// (where a template's fail stops at the first), each under its own
	// path, and no case's message shows without its own value. A helm
	// process costs some 0.1 s of CPU, whatever it renders. The first case
	// to ask runs it; the loop has collected every case's values by then
	// (parallel subtests wait for it to end).
	bySchema := map[string]bool{"unknown value": true, "bad nativeSidecars": true, "bad failurePolicy": true,
		"bad interception": true, "excluded range not a CIDR": true, "transparent uid 0": true, "Redis URL of another scheme": true}
	var schemaArgs []string
	var schemaOnce sync.Once
	var schemaOut string
	var schemaErr error
	schemaRefusals := func(t *testing.T) (string, error) {
		schemaOnce.Do(func() {
			schemaOut, schemaErr = runHelm(t, append([]string{"template", release, chartDir, "--namespace", releaseNS}, schemaArgs...)...)
		})
		return schemaOut, schemaErr
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"the repository's policy (loopback admin)", []string{"--set-file", "policy.json=../../policy.json"}, `admin_listen is "127.0.0.1:8788": set it to "0.0.0.0:8788"`},
		{"policy on another port", []string{"--set", "sidecar.proxyPort=9000"}, `listen is "127.0.0.1:8787" but sidecar.proxyPort is 9000`},
		{"policy listening on every interface", []string{"--set-file", "policy.json=" + writeFile(t, "public.json",
			`{"listen": "0.0.0.0:8787", "admin_listen": "0.0.0.0:8788", "listen_public": true}`)}, `listen is "0.0.0.0:8787": keep it on loopback ("127.0.0.1:8787")`},
		{"policy listening on the pod IP", []string{"--set-file", "policy.json=" + writeFile(t, "podip.json",
			`{"listen": "10.1.2.3:8787", "admin_listen": "0.0.0.0:8788", "egress": {"tunnel": "deny"}}`)}, `listen is "10.1.2.3:8787": keep it on loopback`},
		{"policy not JSON", []string{"--set-file", "policy.json=" + keyOnly}, "policy.json is not valid JSON"},
		{"ca section elsewhere", []string{"--set-file", "policy.json=" + writeFile(t, "ca.json",
			`{"admin_listen": "0.0.0.0:8788", "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"}}`)}, "the ca section must name /var/run/secrets/detour/ca.pem"},
		{"admin token elsewhere", []string{"--set-file", "policy.json=" + writeFile(t, "admin.json",
			`{"admin_listen": "0.0.0.0:8788", "admin": {"token_file": "/etc/token"}}`)}, `admin.token_file is "/etc/token": set it to "/var/run/secrets/detour-admin/token"`},
		{"admin section without a token file", []string{"--set-file", "policy.json=" + writeFile(t, "admin-empty.json",
			`{"admin_listen": "0.0.0.0:8788", "admin": {}}`)}, `admin.token_file is "": set it to "/var/run/secrets/detour-admin/token"`},
		{"ca.key without ca.cert", []string{"--set-file", "ca.key=" + keyOnly}, "ca.cert and ca.key go together"},
		{"unknown value", []string{"--set", "injector.failurepolicy=Fail"}, "additional properties 'failurepolicy' not allowed"},
		{"bad nativeSidecars", []string{"--set", "sidecar.nativeSidecars=maybe"}, "nativeSidecars"},
		{"bad failurePolicy", []string{"--set", "injector.failurePolicy=Sometimes"}, "failurePolicy"},
		{"bad interception", []string{"--set", "sidecar.interception=iptables"}, "/sidecar/interception"},
		{"transparent port on the proxy port", []string{"--set", "sidecar.transparent.port=8787"}, "sidecar.transparent.port 8787 is also sidecar.proxyPort"},
		{"transparent port redirected", []string{"--set", "sidecar.transparent.redirectPorts={443,15001}"}, "every connection to it would loop"},
		{"excluded range not a CIDR", []string{"--set", "sidecar.transparent.excludeCIDRs={cluster.local}"}, "excludeCIDRs/0"},
		{"transparent uid 0", []string{"--set", "sidecar.transparent.uid=0"}, "uid"},
		{"state section and state.redis.url", []string{"--set", "state.redis.url=redis://redis:6379", "--set-file", "policy.json=" + writeFile(t, "state.json",
			`{"admin_listen": "0.0.0.0:8788", "state": {"backend": "memory"}}`)}, `policy.json has a "state" section and state.redis.url is set`},
		{"Redis password without a URL", []string{"--set", "state.redis.existingSecret=redis"}, "state.redis.existingSecret is set without state.redis.url"},
		{"Redis URL with an existing policy ConfigMap", []string{"--set", "state.redis.url=redis://redis:6379", "--set", "policy.existingConfigMap=team-policy"},
			"write that section in your policy"},
		{"Redis URL of another scheme", []string{"--set", "state.redis.url=http://redis:6379"}, "/state/redis/url"},
		{"policy with a socket mark", []string{"--set-file", "policy.json=" + writeFile(t, "mark.json",
			`{"admin_listen": "0.0.0.0:8788", "transparent": {"mark": 487}}`)}, "transparent.mark needs CAP_NET_ADMIN"},
	} {
		schema := bySchema[tc.name]
		if schema {
			schemaArgs = append(schemaArgs, tc.args...)
			delete(bySchema, tc.name)
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out string
			var err error
			if schema {
				out, err = schemaRefusals(t)
			} else {
				out, err = runHelm(t, append([]string{"template", release, chartDir, "--namespace", releaseNS}, tc.args...)...)
			}
			if err == nil {
				t.Fatalf("rendered; want an error containing %q", tc.want)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("error %q lacks %q", out, tc.want)
			}
		})
	}
	if len(bySchema) > 0 {
		t.Fatalf("no case named %v", slices.Collect(maps.Keys(bySchema)))
	}
}

// TestChartAsDependency: a parent chart adds detour to its own Deployment
// with the named templates, as the chart README shows, and gets the same
// sidecar the webhook would add, naming the objects the subchart creates.
func TestChartAsDependency(t *testing.T) {
	t.Parallel()
	helm(t)
	countHelm(t)
	parent := t.TempDir()
	if err := os.CopyFS(filepath.Join(parent, "charts", "detour"), os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	chartYAML, _ := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	var meta struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(chartYAML, &meta); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml":  fmt.Sprintf("apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n  - name: detour\n    version: %s\n", meta.Version),
		"values.yaml": "detour:\n  injector:\n    enabled: false\n  keys:\n    mode: file\n    existingSecret: shop-llm-keys\n",
		"templates/deployment.yaml": fmt.Sprintf(`{{- $detour := dict "Values" .Values.detour "Release" .Release "Capabilities" .Capabilities
      "Chart" (dict "Name" "detour" "Version" %q "AppVersion" %q) }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
  namespace: {{ .Release.Namespace }}
spec:
  selector:
    matchLabels: {app: shop}
  template:
    metadata:
      labels: {app: shop}
    spec:
      initContainers:
        {{- include "detour.sidecar.initContainers" $detour | nindent 8 }}
      containers:
        {{- with include "detour.sidecar.containers" $detour }}{{ . | nindent 8 }}{{ end }}
        - name: shop
          image: example.com/shop:1.0
          env:
            {{- include "detour.sidecar.appEnv" $detour | nindent 12 }}
          volumeMounts:
            {{- include "detour.sidecar.appVolumeMounts" $detour | nindent 12 }}
          resources:
            requests: {cpu: 100m, memory: 128Mi}
            limits: {memory: 256Mi}
          securityContext:
            runAsNonRoot: true
            runAsUser: 1000
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {drop: ["ALL"]}
      volumes:
        {{- include "detour.sidecar.volumes" $detour | nindent 8 }}
`, meta.Version, meta.AppVersion),
	}
	for name, content := range files {
		p := filepath.Join(parent, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, kube := range []string{"1.30.0", "1.28.0"} {
		t.Run(kube, func(t *testing.T) {
			out, err := runHelm(t, "template", "shop", parent, "--namespace", "shop", "--kube-version", kube)
			if err != nil {
				t.Fatal(err)
			}
			m := decodeManifests(t, out)
			d := m.deployment("shop")
			if d == nil {
				t.Fatal("no shop Deployment")
			}
			checkPodSpec(t, "shop", &d.Spec.Template.Spec)
			cfg := Config{
				Image:            "ghcr.io/detour-proxy/detour:" + meta.AppVersion,
				NativeSidecars:   ptr(kube == "1.30.0"),
				PolicyConfigMap:  "shop-detour-policy",
				CASecret:         "shop-detour-ca",
				AdminTokenSecret: "shop-detour-admin-token",
				KeysSecret:       "shop-llm-keys",
				KeysMode:         KeysModeFile,
			}
			if m.configMap("shop", cfg.PolicyConfigMap) == nil || m.secret("shop", cfg.CASecret) == nil || m.secret("shop", cfg.AdminTokenSecret) == nil {
				t.Fatalf("the subchart did not create %s, %s and %s in the parent's namespace", cfg.PolicyConfigMap, cfg.CASecret, cfg.AdminTokenSecret)
			}
			compareWithWebhook(t, &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}, cfg, "shop")
		})
	}
}

// documentedValues lists the dotted paths of values.yaml that carry a
// "# --" comment, and reports keys that are documented neither themselves
// nor through an ancestor.
func documentedValues(t *testing.T) (documented []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type frame struct {
		indent int
		key    string
		doc    bool
	}
	var stack []frame
	keyLine := regexp.MustCompile(`^( *)([A-Za-z][A-Za-z0-9]*):(.*)$`)
	pendingDoc, blockIndent := false, -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if blockIndent >= 0 {
			if strings.TrimSpace(line) == "" || indent > blockIndent {
				continue // inside a block scalar (policy.json)
			}
			blockIndent = -1
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "# --"):
			pendingDoc = true
			continue
		case trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "-"):
			continue
		}
		mm := keyLine.FindStringSubmatch(line)
		if mm == nil {
			t.Fatalf("values.yaml: cannot read line %q", line)
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		path, inherited := mm[2], false
		if len(stack) > 0 {
			path = stack[len(stack)-1].key + "." + mm[2]
			inherited = stack[len(stack)-1].doc
		}
		rest := strings.TrimSpace(mm[3])
		if pendingDoc {
			documented = append(documented, path)
		}
		if rest != "" && !pendingDoc && !inherited {
			t.Errorf("values.yaml: %s has no \"# --\" comment", path)
		}
		if strings.HasPrefix(rest, "|") {
			blockIndent = indent
		}
		stack = append(stack, frame{indent, path, pendingDoc || inherited})
		pendingDoc = false
	}
	return documented
}

// TestChartCoversEveryDocumentedValue: every documented value is set by at
// least one case of TestChart, so that each is rendered and checked.
func TestChartCoversEveryDocumentedValue(t *testing.T) {
	documented := documentedValues(t)
	if len(documented) < 30 {
		t.Fatalf("found only %d documented values: is the values.yaml parser broken?", len(documented))
	}
	var keys []string
	for _, c := range chartCases(t) {
		keys = append(keys, c.keys()...)
	}
	for _, v := range documented {
		if !slices.ContainsFunc(keys, func(k string) bool { return k == v || strings.HasPrefix(k, v+".") }) {
			t.Errorf("documented value %s is not exercised by any TestChart case", v)
		}
	}
	// And the README documents each of them.
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range documented {
		if !bytes.Contains(readme, []byte("`"+v+"`")) {
			t.Errorf("README.md does not document %s", v)
		}
	}
}

// TestChartNamedTemplateNamesMatchCode: the paths and names hard-coded in the
// chart's templates are the ones the webhook uses.
func TestChartNamedTemplateNamesMatchCode(t *testing.T) {
	tpl, err := os.ReadFile(filepath.Join(chartDir, "templates", "_sidecar.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{PolicyFile, policyDir, CADir, CACertDir, TrustDir, BundleFile, KeysDir, ConfigHome,
		AdminTokenDir, volPolicy, volCA, volCACert, volTrust, volKeys, volAdmin, TrustContainerName, RedirectContainerName,
		RedisPasswordDir, volRedis} {
		if !bytes.Contains(tpl, []byte(s)) {
			t.Errorf("_sidecar.tpl does not mention %q", s)
		}
	}
	// The policy's admin.token_file, which the chart checks and adds.
	for _, f := range []string{"namespaced.yaml", "../values.yaml"} {
		b, err := os.ReadFile(filepath.Join(chartDir, "templates", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(AdminTokenFile)) {
			t.Errorf("%s does not mention %q", f, AdminTokenFile)
		}
	}
	// The policy's state.redis.password_file, which the chart writes.
	for _, f := range []string{"namespaced.yaml", "../values.yaml"} {
		b, err := os.ReadFile(filepath.Join(chartDir, "templates", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(RedisPasswordFile)) {
			t.Errorf("%s does not mention %q", f, RedisPasswordFile)
		}
	}
}

// TestChartREADMESnippet: the plain-YAML snippet of the chart's README adds
// what the webhook adds (default values, native sidecars).
func TestChartREADMESnippet(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "**Plain YAML**")
	if !ok {
		t.Fatal("README.md has no **Plain YAML** section")
	}
	_, after, ok = strings.Cut(after, "```yaml\n")
	snippet, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml block after **Plain YAML**")
	}
	var d struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict([]byte(snippet), &d); err != nil {
		t.Fatalf("README snippet: %v", err)
	}
	// The chart's appVersion: bumping it without the README fails here.
	chartYAML, _ := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	var meta struct{ AppVersion string }
	if err := yaml.Unmarshal(chartYAML, &meta); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Image: "ghcr.io/detour-proxy/detour:" + meta.AppVersion, NativeSidecars: ptr(true),
		PolicyConfigMap: "detour-policy", CASecret: "detour-ca"}
	compareWithWebhook(t, &corev1.Pod{Spec: d.Spec.Template.Spec}, cfg, "app")
}

// renderNotes renders NOTES.txt, which `helm template` skips, by turning it
// into a named template of a copy of the chart.
func renderNotes(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "detour")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "templates", "NOTES.txt"))
	os.WriteFile(filepath.Join(dir, "templates", "_notes_test.tpl"), []byte(`{{- define "notes.test" -}}`+string(notes)+`{{- end -}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "templates", "notes-test.yaml"), []byte(`notes: {{ include "notes.test" . | toJson }}`+"\n"), 0o644)
	out, err := runHelm(t, append([]string{"template", release, dir, "--namespace", releaseNS, "--show-only", "templates/notes-test.yaml"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Notes string }
	if err := yaml.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return v.Notes
}

// TestChartNotes: NOTES.txt tells how to opt a pod in, where, and what to expect.
func TestChartNotes(t *testing.T) {
	helm(t)
	countHelm(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"defaults", []string{"--kube-version", "1.30.0", "--set", "namespaces={shop,research}"}, []string{
			"  - shop\n  - research", `detour.io/inject: "true"`, "kubectl label namespace shop detour.io/inject=true",
			"rollout restart", "a native sidecar", "starts WITHOUT detour",
		}},
		{"old cluster", []string{"--kube-version", "1.28.0"}, []string{"the first regular container", "Jobs will not complete"}},
		{"no webhook", []string{"--set", "injector.enabled=false", "--set", "example.enabled=true"}, []string{
			"The webhook is disabled", "named templates", "deployment/detour-example",
		}},
		{"fail closed", []string{"--set", "injector.failurePolicy=Fail"}, []string{`detour.io/inject: "true"`}},
		{"transparent", []string{"--set", "sidecar.interception=transparent"}, []string{
			"Interception is transparent", "detour-redirect", `"privileged"`, "127.0.0.1:15001", "UID 65531", "No proxy variable is set",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			notes := renderNotes(t, tc.args...)
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
			if tc.name == "fail closed" && strings.Contains(notes, "WITHOUT detour") {
				t.Error("NOTES warn about failurePolicy Ignore with Fail")
			}
			if tc.name == "transparent" && strings.Contains(notes, "HTTPS_PROXY") {
				t.Error("NOTES promise HTTPS_PROXY with transparent interception")
			}
		})
	}
}
