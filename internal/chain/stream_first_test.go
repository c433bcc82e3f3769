package chain

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// firstRecorder is a ResponseWriter for writeFirst alone; its Flush
// checks in on flushing, if set, waits for release, if set, and panics
// when told to.
type firstRecorder struct {
	*httptest.ResponseRecorder
	panics   bool
	flushing *sync.WaitGroup
	release  chan struct{}
}

func (f firstRecorder) Flush() {
	if f.flushing != nil {
		f.flushing.Done()
		<-f.release
	}
	if f.panics {
		panic(http.ErrAbortHandler)
	}
	f.ResponseRecorder.Flush()
}

// TestFirstWritersServeManyAndStayBounded: commit points at the same
// instant, all writing at once (so that each has a helper of its own),
// some of whose flushes panic, each get their own bytes written (or their
// own panic back, on their own goroutine), and afterwards no more helpers
// stay parked than the bound.
func TestFirstWritersServeManyAndStayBounded(t *testing.T) {
	const n = 64
	var wg, flushing sync.WaitGroup
	flushing.Add(n)
	release := make(chan struct{})
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			rec := firstRecorder{ResponseRecorder: httptest.NewRecorder(), panics: i%5 == 0, flushing: &flushing, release: release}
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
	flushing.Wait()
	close(release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// The count settles once the last helpers have parked or ended (a
	// helper counts itself after its write is done, and uncounts itself
	// again when it finds enough parked).
	settled := func() bool {
		p := parkedFirstWriters.Load()
		return p >= 1 && p <= maxParkedFirstWriters
	}
	testsupport.Eventually(t, 10*time.Second, "1 to "+strconv.Itoa(maxParkedFirstWriters)+" helpers parked after the burst", settled)
	// A parked helper takes the next write.
	rec := firstRecorder{ResponseRecorder: httptest.NewRecorder()}
	o := &streamOut{w: rec, rc: *http.NewResponseController(rec), park: true}
	if !o.writeFirst([]byte("next")) || rec.Body.String() != "next" {
		t.Errorf("the write after the burst wrote %q", rec.Body.String())
	}
	testsupport.Eventually(t, 10*time.Second, "the helpers parked again", settled)
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
