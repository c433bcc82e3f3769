package policy

import (
	"fmt"
	"net/url"
	"path"
	"sort"
	"strings"
)

// vendorHostPatterns are the API hosts of the vendors detour knows (path.Match
// patterns: "*" spans dots too). They serve HTTPS only, and a plain-HTTP
// base_url naming one is a mistake that would send the key in clear to
// whoever answers on port 80 on the way, so allow_plain_http never covers
// them. The hosts the policy's own routes intercept are refused as well.
var vendorHostPatterns = []string{
	"api.openai.com",
	"api.anthropic.com",
	"generativelanguage.googleapis.com",
	"*.openai.azure.com",
	"*.cognitiveservices.azure.com",
	"*.services.ai.azure.com",
	"bedrock-runtime.*.amazonaws.com",
	"bedrock-runtime-fips.*.amazonaws.com",
	"aiplatform.googleapis.com",
	"*-aiplatform.googleapis.com",
}

// isVendorHost reports whether host is a vendor's API host.
func isVendorHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, p := range vendorHostPatterns {
		if ok, _ := path.Match(p, host); ok {
			return true
		}
	}
	return false
}

// plainHTTP checks allow_plain_http on every upstream, once the routes are
// known: it is refused on a static upstream and on an https base_url (it
// would say something the URL does not do), and an http base_url to a vendor
// host, or to a host a route intercepts (detour would call itself), is
// refused even with it. The loopback-only rule without it is in upstream.
func (k *compiler) plainHTTP(f *File) {
	intercepted := map[string]bool{}
	for _, r := range f.Routes {
		intercepted[strings.ToLower(r.Match.Host)] = true
	}
	for _, name := range sortedKeys(f.Upstreams) {
		uf := f.Upstreams[name]
		p := "upstreams." + name
		if !uf.AllowPlainHTTP {
			continue
		}
		if uf.Shape == string(ShapeStatic) {
			k.errorf(p+".allow_plain_http", "a static upstream sends no request, so it takes no allow_plain_http")
			continue
		}
		bu, err := url.Parse(uf.BaseURL)
		if err != nil || bu.Host == "" {
			continue // base_url's own error says it
		}
		host := strings.TrimSuffix(strings.ToLower(bu.Hostname()), ".")
		switch {
		case bu.Scheme == "https":
			k.errorf(p+".allow_plain_http", "only for an http:// base_url; this one is https://, which needs nothing allowed: remove it")
		case isVendorHost(host):
			k.errorf(p+".base_url", "plain http to %q is refused even with allow_plain_http: it is a vendor's API host, which serves https only, and the key would travel in clear; use https://%s", bu.Host, bu.Host)
		case intercepted[host]:
			k.errorf(p+".base_url", "plain http to %q is refused even with allow_plain_http: a route intercepts that host, so the upstream would be detour itself", bu.Host)
		}
	}
}

// PlainHTTPWarnings are the warnings about upstreams reached over plain
// HTTP to a host that is not loopback (allow_plain_http), for `detour policy
// check`: the request, its key and the answer cross the network unencrypted.
func (c *Compiled) PlainHTTPWarnings() []string {
	var out []string
	for name, u := range c.Upstreams {
		if u.BaseURL == nil || u.BaseURL.Scheme != "http" || isLoopbackHost(u.BaseURL.Hostname()) {
			continue
		}
		out = append(out, fmt.Sprintf("upstream %q is reached over plain http at %s (allow_plain_http): prompts, answers and any key it is sent cross the network unencrypted; keep it on a network you control (a cluster Service, restricted by a NetworkPolicy)", name, u.BaseURL.Host))
	}
	sort.Strings(out)
	return out
}
