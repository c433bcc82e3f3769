package chain

import (
	"net/http"
	"strconv"
	"testing"
)

// appHeader is an app's request header of n keys besides a few that are
// never sent upstream.
func appHeader(n int) http.Header {
	h := http.Header{
		"Authorization":   {"Bearer sk-app"},
		"Accept-Encoding": {"gzip"},
		"Connection":      {"keep-alive, X-Hop"},
		"X-Hop":           {"1"},
		"X-Detour-Tier":   {"fast"},
	}
	for i := range n {
		h["X-App-"+strconv.Itoa(i)] = []string{strconv.Itoa(i)}
	}
	return h
}

// TestUpstreamHeaderWhateverItsSize: a header small enough to skip
// counting its kept keys, and one large enough to count them, both send
// exactly the app's own keys, sharing its values.
func TestUpstreamHeaderWhateverItsSize(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 8, 20} {
		src := appHeader(n)
		got := upstreamHeader(src, 2)
		if len(got) != n {
			t.Errorf("%d app keys: %d sent: %v", n, len(got), got)
		}
		for i := range n {
			k := "X-App-" + strconv.Itoa(i)
			if vs := got[k]; len(vs) != 1 || &vs[0] != &src[k][0] || cap(vs) != 1 {
				t.Errorf("%d app keys: %s = %v; want the app's own value, capped", n, k, vs)
			}
		}
	}
}

// BenchmarkUpstreamHeader: the header an SDK's small request sends
// upstream (counted in one pass), and a large one's.
func BenchmarkUpstreamHeader(b *testing.B) {
	small := http.Header{
		"Content-Type": {"application/json"}, "Authorization": {"Bearer sk-app"}, "User-Agent": {"OpenAI/Go"},
		"Content-Length": {"81"}, "Accept-Encoding": {"gzip"},
	}
	for name, src := range map[string]http.Header{"small": small, "large": appHeader(12)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = upstreamHeader(src, 2)
			}
		})
	}
}
