package policy

import (
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// memoBodies are error bodies of every envelope, with and without quota
// IDs, and bodies that are no envelope.
var memoBodies = []string{
	oaiQuota, oaiTPM, oaiServerOverloaded, azureDaily, gemPerMinute, gemPerDay, antOverloaded,
	`{"error":"model not found"}`, `[{"error":{"code":503,"message":"x","status":"UNAVAILABLE"}}]`,
	`{"error":null}`, `<html>502</html>`, ``, `{"error":{"message":"a\u00e9\ud800"}}`,
	strings.Repeat(" ", maxMemoErrorBody) + oaiQuota,
}

// checkErrorMemo parses each body three times in a row through the memo, then
// each once, interleaved: every answer must be rewrite.ParseError's.
func checkErrorMemo(t *testing.T, bodies []string) {
	t.Helper()
	check := func(b string) {
		if got, want := parseErrorMemo([]byte(b)), rewrite.ParseError([]byte(b)); !reflect.DeepEqual(got, want) {
			t.Fatalf("parseErrorMemo(%.80q) = %+v; ParseError says %+v", b, got, want)
		}
	}
	for _, b := range bodies {
		for range 3 {
			check(b)
		}
	}
	for _, b := range bodies {
		check(b)
	}
}

func TestParseErrorMemoMatchesParseError(t *testing.T) {
	t.Parallel()
	checkErrorMemo(t, memoBodies)
}

// Callers in parallel, each repeating its own body, read only their own
// body's info (go test -race checks the memo's sharing).
func TestParseErrorMemoUnderConcurrentCallers(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	for _, b := range memoBodies[:7] {
		wg.Go(func() {
			want := rewrite.ParseError([]byte(b))
			for range 200 {
				if got := parseErrorMemo([]byte(b)); !reflect.DeepEqual(got, want) {
					t.Errorf("parseErrorMemo(%.80q) = %+v; ParseError says %+v", b, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A body that repeats is decoded twice, then remembered; one with quota IDs
// never is.
func TestParseErrorMemoRemembersARepeatedBody(t *testing.T) {
	// Not parallel: it reads the package's memo.
	body := []byte(oaiServerOverloaded)
	parseErrorMemo(body)
	parseErrorMemo(body)
	if m := lastErrorInfo.Load(); m == nil || string(m.body) != oaiServerOverloaded {
		t.Fatalf("after the same body twice the memo holds %+v", m)
	}
	for range 2 {
		parseErrorMemo([]byte(gemPerDay))
	}
	if m := lastErrorInfo.Load(); m == nil || string(m.body) != oaiServerOverloaded {
		t.Errorf("a body with quota IDs replaced the memo: %+v", m)
	}
}

func FuzzParseErrorMemo(f *testing.F) {
	for _, b := range memoBodies {
		f.Add(b, oaiQuota)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		checkErrorMemo(t, []string{a, b, a})
	})
}
