package chain

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// firstRecorder is a ResponseWriter for writeFirst alone; its Flush
// panics when told to.
type firstRecorder struct {
	*httptest.ResponseRecorder
	panics bool
}

func (f firstRecorder) Flush() {
	if f.panics {
		panic(http.ErrAbortHandler)
	}
	f.ResponseRecorder.Flush()
}

// TestFirstWritersServeManyAndStayBounded: commit points at the same
// instant, some of whose flushes panic, each get their own bytes written
// (or their own panic back, on their own goroutine), and afterwards no
// more helpers stay parked than the bound.
func TestFirstWritersServeManyAndStayBounded(t *testing.T) {
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			rec := firstRecorder{ResponseRecorder: httptest.NewRecorder(), panics: i%5 == 0}
			o := &streamOut{w: rec, rc: *http.NewResponseController(rec), park: true}
			want := []byte{byte('a' + i%26), byte('0' + i%10)}
			var got any
			ok := func() bool {
				defer func() { got = recover() }()
				return o.writeFirst(want)
			}()
			switch {
			case rec.panics && got != http.ErrAbortHandler:
				errs <- "a panicking flush gave back " + anyString(got)
			case !rec.panics && (got != nil || !ok):
				errs <- "a write failed or panicked: " + anyString(got)
			case rec.Body.String() != string(want):
				errs <- "wrote " + rec.Body.String() + ", want " + string(want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if p := parkedFirstWriters.Load(); p > maxParkedFirstWriters || p < 1 {
		t.Errorf("%d helpers parked after the burst; want 1 to %d", p, maxParkedFirstWriters)
	}
}

func anyString(v any) string {
	if v == nil {
		return "nil"
	}
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return "a non-error value"
}
