package inject

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestMergeList(t *testing.T) {
	add := []string{"localhost", ".svc"}
	for _, tc := range []struct{ list, want string }{
		{"", "localhost,.svc"},
		{"a.example", "a.example,localhost,.svc"},
		{"a.example, ", "a.example,localhost,.svc"},
		{"LOCALHOST, .svc", "LOCALHOST, .svc"},
		{"*", "*,localhost,.svc"},
	} {
		if got := mergeList(tc.list, add); got != tc.want {
			t.Errorf("mergeList(%q) = %q; want %q", tc.list, got, tc.want)
		}
	}
}

// TestAppEnvNeverOverridesTheUser: a variable the pod sets stays, proxy
// variables go by case pairs, and a NO_PROXY from valueFrom is left alone.
func TestAppEnvNeverOverridesTheUser(t *testing.T) {
	s := settings{Config: testConfig.withDefaults()}
	names := func(vs []corev1.EnvVar) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		env     []corev1.EnvVar
		add     []string
		replace map[int]string
	}{
		{
			name: "lowercase https_proxy keeps both cases out",
			env:  []corev1.EnvVar{{Name: "https_proxy", Value: "http://corp:3128"}},
			add: []string{"HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
				"CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY"},
		},
		{
			name: "NO_PROXY from a secret: neither case touched",
			env: []corev1.EnvVar{{Name: "NO_PROXY", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}},
			add: []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
				"CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY"},
		},
		{
			name: "lowercase no_proxy merged, uppercase added from it",
			env: []corev1.EnvVar{{Name: "no_proxy", Value: "db.internal"}, {Name: "NODE_USE_ENV_PROXY", Value: "0"},
				{Name: "SSL_CERT_FILE", Value: ""}},
			add: []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "REQUESTS_CA_BUNDLE",
				"CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"},
			replace: map[int]string{0: "db.internal,localhost,127.0.0.1,::1,169.254.169.254,169.254.0.0/16,.svc,.cluster.local"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := s.appEnv(tc.env)
			if got := names(ch.add); !reflect.DeepEqual(got, tc.add) {
				t.Errorf("added %q; want %q", got, tc.add)
			}
			if tc.replace == nil {
				tc.replace = map[int]string{}
			}
			if !reflect.DeepEqual(ch.replace, tc.replace) {
				t.Errorf("replaced %v; want %v", ch.replace, tc.replace)
			}
			for _, v := range ch.add {
				if v.Name == "NO_PROXY" && tc.replace[0] != "" && v.Value != "db.internal,localhost,127.0.0.1,::1,169.254.169.254,169.254.0.0/16,.svc,.cluster.local" {
					t.Errorf("NO_PROXY %q; want the pod's no_proxy entries first", v.Value)
				}
			}
		})
	}
}
