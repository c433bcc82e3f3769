package chain

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/detour-proxy/detour/policy"
)

// credentialHeaders is policy.CredentialHeaders, read once: the policy
// function copies its list on every call, and the list never changes.
var credentialHeaders = policy.CredentialHeaders()

// droppedRequestHeaders are the app's headers never sent upstream as they
// are: hop-by-hop ones, every credential and the app's identity (put back
// for auth "client" by copyClientCredential), Expect (the body is already
// buffered; waiting for "100 Continue" would only add up to a second per
// attempt), Accept-Encoding (the transport negotiates gzip and decodes it:
// detour must read error bodies and stream events), and the framing
// headers the transport sets itself.
var droppedRequestHeaders = func() map[string]bool {
	m := map[string]bool{"Expect": true, "Accept-Encoding": true, "Content-Length": true, "Host": true}
	for _, l := range [][]string{hopHeaders, credentialHeaders, identityHeaders} {
		for _, k := range l {
			m[k] = true
		}
	}
	return m
}()

// droppedResponseHeaders are the upstream's headers never passed to the
// app: hop-by-hop ones, Content-Length (the answer may be rewritten), and
// Content-Encoding (the transport asked for and decoded gzip itself; what
// the app gets is identity-encoded).
var droppedResponseHeaders = func() map[string]bool {
	m := map[string]bool{"Content-Length": true, "Content-Encoding": true}
	for _, k := range hopHeaders {
		m[k] = true
	}
	return m
}()

// upstreamHeader copies the app's request header without the headers in
// droppedRequestHeaders, detour's own X-Detour-* ones, and those the app's
// Connection header names, in a map with room for extra keys more. The
// values are the app's own slices, shared as copyHeader shares them (capped
// at their length, and nothing writes into a header's values in place):
// copying them would cost an allocation per attempt.
func upstreamHeader(src http.Header, extra int) http.Header {
	// A map for up to mapGroupSlots keys is one group whatever its hint:
	// only a larger header needs the kept keys counted first, so that the
	// map is not sized for the ones dropped.
	hint := len(src) + extra
	if hint > mapGroupSlots {
		hint = extra
		for k := range src {
			if !dropRequestHeader(k) {
				hint++
			}
		}
	}
	h := make(http.Header, hint)
	for k, vs := range src {
		if dropRequestHeader(k) {
			continue
		}
		h[k] = vs[:len(vs):len(vs)]
	}
	for _, c := range src["Connection"] {
		for _, f := range strings.Split(c, ",") {
			h.Del(strings.TrimSpace(f))
		}
	}
	return h
}

// mapGroupSlots is how many keys a Go map holds in its first group: make
// with any hint up to it allocates the same.
const mapGroupSlots = 8

func dropRequestHeader(k string) bool {
	return droppedRequestHeaders[k] || strings.HasPrefix(k, "X-Detour-")
}

// Header values detour sets on every answer, built once: a Header.Set
// allocates a one-element slice per call. The slices are shared between
// answers, so each has capacity 1 (an Add elsewhere reallocates rather
// than write into it) and nothing in detour writes into a header's values
// in place.
var (
	noneValue      = []string{"none"}
	attemptsValues = func() (v [16][]string) {
		for i := range v {
			v[i] = []string{strconv.Itoa(i)}
		}
		return v
	}()
	// answeredByValues holds one value per upstream name seen ([]string by
	// name), up to maxAnsweredByValues names (a policy that keeps renaming
	// its upstreams across reloads only stops being cached). A sync.Map,
	// not a mutex: every answer reads it and almost none writes, and its
	// reads of a stable key share no lock word between cores.
	answeredByValues sync.Map
	answeredByCount  atomic.Int32
)

const maxAnsweredByValues = 1024

func attemptsValue(n int) []string {
	if n >= 0 && n < len(attemptsValues) {
		return attemptsValues[n]
	}
	return []string{strconv.Itoa(n)}
}

func answeredByValue(name string) []string {
	if name == "" {
		return noneValue
	}
	if v, ok := answeredByValues.Load(name); ok {
		return v.([]string)
	}
	v := []string{name}
	if answeredByCount.Load() < maxAnsweredByValues {
		if prev, loaded := answeredByValues.LoadOrStore(name, v); loaded {
			return prev.([]string)
		}
		answeredByCount.Add(1)
	}
	return v
}
