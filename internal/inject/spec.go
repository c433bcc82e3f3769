package inject

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// What the injector adds to a pod. The chart's named templates
// (charts/detour/templates/_sidecar.tpl) write the same containers and
// volumes by hand; the chart test checks that the two agree.
const (
	// ContainerName is detour's container (an init container in native mode).
	ContainerName = "detour"
	// TrustContainerName is the init container that writes the CA bundle.
	TrustContainerName = "detour-trust"

	// PolicyFile is where detour reads its policy: the ConfigMap is mounted
	// on its directory, so the kubelet's ..data symlink swap reaches detour's
	// directory watch (a subPath mount would never update).
	PolicyFile = policyDir + "/policy.json"
	policyDir  = "/etc/detour/policy"

	// ConfigHome is detour's XDG_CONFIG_HOME, so that detour's default CA
	// location, $XDG_CONFIG_HOME/detour/{ca.pem,ca-key.pem}, is CADir, where
	// the CA Secret is mounted: a policy without a ca section works as is.
	ConfigHome = "/var/run/secrets"
	// CADir holds the CA certificate and key, in detour's container only.
	CADir = ConfigHome + "/detour"
	// CACertDir holds the CA certificate alone, for detour-trust.
	CACertDir = "/var/run/detour/ca-cert"
	// TrustDir is the emptyDir shared by detour-trust (writes) and the app
	// containers (read only).
	TrustDir = "/var/run/detour/trust"
	// BundleFile is the trust bundle: system roots plus detour's CA.
	BundleFile = TrustDir + "/ca-bundle.pem"
	// KeysDir is where the keys Secret is mounted in KeysModeFile.
	KeysDir = "/var/run/secrets/detour-keys"
	// AdminTokenDir holds the admin token, in detour's container only. The
	// Secret is mounted on the directory, not by subPath, so that a rotated
	// token reaches detour (which re-reads it at most once a second).
	AdminTokenDir = "/var/run/secrets/detour-admin"
	// AdminTokenKey is the admin token's key in its Secret and its file
	// name in AdminTokenDir.
	AdminTokenKey = "token"
	// AdminTokenFile is the admin token as detour sees it: the policy's
	// admin.token_file (the chart's policy names it).
	AdminTokenFile = AdminTokenDir + "/" + AdminTokenKey

	// Secret keys of the CA Secret (what `detour ca init` writes and the
	// chart generates).
	CACertKey = "ca.pem"
	CAKeyKey  = "ca-key.pem"

	// Volume names added to the pod.
	volPolicy = "detour-policy"
	volCA     = "detour-ca"
	volCACert = "detour-ca-cert"
	volTrust  = "detour-trust"
	volKeys   = "detour-keys"
	volAdmin  = "detour-admin-token"

	// RunAsUser is the non-root UID (and GID) detour runs as: distroless's
	// "nonroot".
	RunAsUser = 65532

	// secretMode is the mode of the Secret files. The kubelet makes them
	// root-owned, and detour runs as RunAsUser without touching the pod's
	// fsGroup, so they must be world-readable to be read at all; they are
	// mounted into detour's own container only, where detour is the only
	// process.
	secretMode = 0o444
)

// sidecarContainer is detour itself.
func (s settings) sidecarContainer() corev1.Container {
	c := corev1.Container{
		Name:            ContainerName,
		Image:           s.Image,
		ImagePullPolicy: s.ImagePullPolicy,
		Args:            []string{"serve", "--policy", PolicyFile},
		Env:             []corev1.EnvVar{{Name: "XDG_CONFIG_HOME", Value: ConfigHome}},
		Resources:       *s.Resources,
		VolumeMounts: []corev1.VolumeMount{
			{Name: volPolicy, MountPath: policyDir, ReadOnly: true},
			{Name: volCA, MountPath: CADir, ReadOnly: true},
			{Name: volAdmin, MountPath: AdminTokenDir, ReadOnly: true},
		},
		// The kubelet starts the app containers only once this passes
		// (native sidecars), so apps never see a proxy that is not there.
		StartupProbe: &corev1.Probe{
			ProbeHandler:     s.adminGet("/readyz"),
			PeriodSeconds:    1,
			TimeoutSeconds:   1,
			FailureThreshold: 120,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     s.adminGet("/readyz"),
			PeriodSeconds:    5,
			TimeoutSeconds:   1,
			FailureThreshold: 3,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     s.adminGet("/healthz"),
			PeriodSeconds:    10,
			TimeoutSeconds:   2,
			FailureThreshold: 3,
		},
		// An invalid policy or a missing CA is reported on stderr before
		// detour exits: show it in kubectl describe.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedSecurityContext(),
	}
	if s.transparent() {
		// The listener the redirect rules send to, whatever the policy's
		// transparent section says; and the uid the rules exclude.
		c.Args = append(c.Args, "--transparent", s.transparentAddr())
		uid := s.TransparentUID
		c.SecurityContext.RunAsUser, c.SecurityContext.RunAsGroup = &uid, &uid
	}
	if s.native {
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	c.VolumeMounts = append(c.VolumeMounts, s.redisMounts()...)
	if s.KeysSecret != "" {
		switch s.KeysMode {
		case KeysModeFile:
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volKeys, MountPath: KeysDir, ReadOnly: true})
		default:
			c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.KeysSecret},
			}}}
		}
	}
	return c
}

func (s settings) adminGet(path string) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path:   path,
		Port:   intstr.FromInt32(s.AdminPort),
		Scheme: corev1.URISchemeHTTP,
	}}
}

// trustContainer writes the bundle apps trust into the shared emptyDir. It
// sees the CA certificate only, never the key.
func (s settings) trustContainer() corev1.Container {
	return corev1.Container{
		Name:            TrustContainerName,
		Image:           s.Image,
		ImagePullPolicy: s.ImagePullPolicy,
		Args:            []string{"ca", "bundle", "--cert", CACertDir + "/" + CACertKey, "--out", BundleFile},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("16Mi"),
			},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: volCACert, MountPath: CACertDir, ReadOnly: true},
			{Name: volTrust, MountPath: TrustDir},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedSecurityContext(),
	}
}

// restrictedSecurityContext satisfies the "restricted" Pod Security Standard
// on its own, whatever the pod says.
func restrictedSecurityContext() *corev1.SecurityContext {
	uid := int64(RunAsUser)
	yes, no := true, false
	return &corev1.SecurityContext{
		RunAsUser:                &uid,
		RunAsGroup:               &uid,
		RunAsNonRoot:             &yes,
		ReadOnlyRootFilesystem:   &yes,
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// volumes are the pod volumes detour's containers and the apps mount.
func (s settings) volumes() []corev1.Volume {
	mode := int32(secretMode)
	sizeLimit := resource.MustParse("4Mi")
	vs := []corev1.Volume{
		{Name: volPolicy, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.PolicyConfigMap},
		}}},
		{Name: volCA, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  s.CASecret,
			Items:       []corev1.KeyToPath{{Key: CACertKey, Path: CACertKey}, {Key: CAKeyKey, Path: CAKeyKey}},
			DefaultMode: &mode,
		}}},
		{Name: volCACert, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  s.CASecret,
			Items:       []corev1.KeyToPath{{Key: CACertKey, Path: CACertKey}},
			DefaultMode: &mode,
		}}},
		{Name: volAdmin, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  s.AdminTokenSecret,
			Items:       []corev1.KeyToPath{{Key: AdminTokenKey, Path: AdminTokenKey}},
			DefaultMode: &mode,
		}}},
		{Name: volTrust, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium:    corev1.StorageMediumMemory,
			SizeLimit: &sizeLimit,
		}}},
	}
	if s.KeysSecret != "" && s.KeysMode == KeysModeFile {
		vs = append(vs, corev1.Volume{Name: volKeys, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  s.KeysSecret,
			DefaultMode: &mode,
		}}})
	}
	return append(vs, s.redisVolumes()...)
}

// appMount is the bundle's mount in every target app container.
func appMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: volTrust, MountPath: TrustDir, ReadOnly: true}
}

// proxyURL is what HTTPS_PROXY and HTTP_PROXY point at.
func (s settings) proxyURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(int(s.ProxyPort))
}
