package inject

import (
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig("config.json", []byte(`{"image":"example/detour:1","nativeSidecars":false,"keysSecret":"k","keysMode":"file",
		"resources":{"requests":{"cpu":"20m","memory":"32Mi"},"limits":{"memory":"128Mi"}},"noProxy":["corp.internal"]}`))
	if err != nil {
		t.Fatal(err)
	}
	d := c.withDefaults()
	if d.Image != "example/detour:1" || *d.NativeSidecars || d.KeysMode != KeysModeFile || d.Resources.Requests.Cpu().String() != "20m" ||
		d.ProxyPort != DefaultProxyPort || d.PolicyConfigMap != DefaultPolicyConfigMap {
		t.Errorf("decoded %+v", d)
	}
	// YAML is accepted too: the chart may render either.
	if _, err := ParseConfig("config.yaml", []byte("image: example/detour:1\nproxyPort: 9000\n")); err != nil {
		t.Errorf("YAML config: %v", err)
	}
}

func TestParseConfigRefusesMistakes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"imag":"x"}`, `unknown field "imag"`},
		{`{"proxyPort":8788}`, "proxyPort and adminPort are both 8788"},
		{`{"adminPort":70000}`, "adminPort 70000"},
		{`{"keysMode":"vault"}`, `keysMode "vault"`},
		{`{"policyConfigMap":"Bad_Name"}`, `policyConfigMap "Bad_Name"`},
		{`{"imagePullPolicy":"Sometimes"}`, `imagePullPolicy "Sometimes"`},
		{`{"resources":{"requests":{"memory":"1Gi"},"limits":{"memory":"256Mi"}}}`, "memory request 1Gi is above its limit 256Mi"},
		{`{"noProxy":["a,b"]}`, `noProxy entry "a,b"`},
	} {
		_, err := ParseConfig("c.json", []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want %q", tc.in, err, tc.want)
		}
	}
}
