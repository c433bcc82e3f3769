package devrun

import (
	"slices"
	"strings"
	"testing"
)

func TestChildEnv(t *testing.T) {
	base := []string{
		"PATH=/usr/bin", "HOME=/home/dev",
		"HTTPS_PROXY=http://corp:3128", "http_proxy=http://corp:3128", "NO_PROXY=internal.example",
		"SSL_CERT_FILE=/etc/corp.pem", "DETOUR_ADMIN_URL=http://127.0.0.1:1",
		"EMPTY=", "WITH_EQUALS=a=b",
	}
	v := vars{Proxy: "http://127.0.0.1:5000", Bundle: "/tmp/d/ca-bundle.pem", NodeCA: "/tmp/d/node-extra-ca.pem"}
	got := childEnv(base, v)
	want := []string{
		"PATH=/usr/bin", "HOME=/home/dev", "EMPTY=", "WITH_EQUALS=a=b",
		"HTTPS_PROXY=http://127.0.0.1:5000", "https_proxy=http://127.0.0.1:5000",
		"HTTP_PROXY=http://127.0.0.1:5000", "http_proxy=http://127.0.0.1:5000",
		"NO_PROXY=localhost,127.0.0.1,::1,169.254.169.254,169.254.0.0/16", "no_proxy=localhost,127.0.0.1,::1,169.254.169.254,169.254.0.0/16",
		"SSL_CERT_FILE=/tmp/d/ca-bundle.pem", "REQUESTS_CA_BUNDLE=/tmp/d/ca-bundle.pem", "CURL_CA_BUNDLE=/tmp/d/ca-bundle.pem",
		"NODE_EXTRA_CA_CERTS=/tmp/d/node-extra-ca.pem", "NODE_USE_ENV_PROXY=1",
		"DETOUR_PROXY_URL=http://127.0.0.1:5000",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}

	v.Admin = "http://127.0.0.1:5001"
	if got := childEnv(base, v); got[len(got)-1] != "DETOUR_ADMIN_URL=http://127.0.0.1:5001" {
		t.Errorf("with an admin listener the last variable is %q; want DETOUR_ADMIN_URL", got[len(got)-1])
	}
}

func TestLookupEnvTakesTheLastValue(t *testing.T) {
	env := []string{"A=1", "AB=2", "A=3"}
	if got := lookupEnv(env, "A"); got != "3" {
		t.Errorf("lookupEnv = %q; want 3 (the value a child sees)", got)
	}
	if got := lookupEnv(env, "B"); got != "" {
		t.Errorf("lookupEnv of a missing name = %q", got)
	}
}
