package inject

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// builtinNoProxy are always in the app containers' NO_PROXY: loopback (so
// that calls to detour's base-URL mode and to other sidecars stay direct),
// the cloud metadata address and link-local (the app's own cloud SDK
// fetches its credentials there, which detour's egress policy refuses to
// proxy; the literal address is for tools that do not read CIDRs), and the
// cluster-local suffixes (so that in-cluster services are not sent through
// detour).
var builtinNoProxy = []string{"localhost", "127.0.0.1", "::1", "169.254.169.254", "169.254.0.0/16", ".svc", ".cluster.local"}

// envChange is what one app container's env needs: variables to append and
// values to replace (by index into the container's env).
type envChange struct {
	add     []corev1.EnvVar
	replace map[int]string
}

// appEnv plans the variables for a container whose env is env.
//
// A variable the container already sets is never replaced, with one
// exception: a literal NO_PROXY (or no_proxy) keeps its entries and gains the
// missing built-in ones. Proxy variables go by pairs: a container that sets
// either HTTPS_PROXY or https_proxy gets neither from detour, because tools
// disagree on which case wins (Python prefers lowercase, Go uppercase), and
// adding the other case would override the user's choice for half of them.
// A NO_PROXY pair with a valueFrom member is left alone: its value cannot be
// seen here. Variables from envFrom cannot be seen either, and an env entry
// wins over envFrom: set such variables in env instead.
func (s settings) appEnv(env []corev1.EnvVar) envChange {
	ch := envChange{replace: map[int]string{}}
	index := map[string]int{}
	for i, e := range env {
		index[e.Name] = i // the last one wins in Kubernetes too
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := index[n]; ok {
				return true
			}
		}
		return false
	}
	if !s.transparent() {
		// Transparent interception sets no proxy variable: the kernel sends
		// the connections to detour, and a proxy variable would only send
		// the runtimes that honour it another way.
		url := s.proxyURL()
		for _, pair := range [][2]string{{"HTTPS_PROXY", "https_proxy"}, {"HTTP_PROXY", "http_proxy"}} {
			if !has(pair[0], pair[1]) {
				ch.add = append(ch.add, corev1.EnvVar{Name: pair[0], Value: url}, corev1.EnvVar{Name: pair[1], Value: url})
			}
		}
		s.noProxy(env, index, &ch)
	}
	for _, name := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"} {
		if !has(name) {
			ch.add = append(ch.add, corev1.EnvVar{Name: name, Value: BundleFile})
		}
	}
	// Node ≥ 22.21 / 24.5 honours HTTPS_PROXY only when told to.
	if !s.transparent() && !has("NODE_USE_ENV_PROXY") {
		ch.add = append(ch.add, corev1.EnvVar{Name: "NODE_USE_ENV_PROXY", Value: "1"})
	}
	return ch
}

// noProxy merges the built-in and configured entries into NO_PROXY and
// no_proxy.
func (s settings) noProxy(env []corev1.EnvVar, index map[string]int, ch *envChange) {
	names := [2]string{"NO_PROXY", "no_proxy"}
	var base string
	for _, n := range names {
		i, ok := index[n]
		if !ok {
			continue
		}
		if env[i].ValueFrom != nil {
			return
		}
		if base == "" {
			base = env[i].Value
		}
	}
	ours := append(append([]string(nil), builtinNoProxy...), s.NoProxy...)
	for _, n := range names {
		if i, ok := index[n]; ok {
			if merged := mergeList(env[i].Value, ours); merged != env[i].Value {
				ch.replace[i] = merged
			}
			continue
		}
		ch.add = append(ch.add, corev1.EnvVar{Name: n, Value: mergeList(base, ours)})
	}
}

// mergeList appends to the comma-separated list the entries of add it lacks
// (compared without case). The list's own text is kept as it is, spaces
// included, and the new entries follow it.
func mergeList(list string, add []string) string {
	seen := map[string]bool{}
	for e := range strings.SplitSeq(list, ",") {
		seen[strings.ToLower(strings.TrimSpace(e))] = true
	}
	var missing []string
	for _, e := range add {
		if !seen[strings.ToLower(e)] {
			seen[strings.ToLower(e)] = true
			missing = append(missing, e)
		}
	}
	if len(missing) == 0 {
		return list
	}
	if kept := strings.TrimRight(list, ", \t"); kept != "" {
		return kept + "," + strings.Join(missing, ",")
	}
	return strings.Join(missing, ",")
}
