package metrics

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func text(t *testing.T, r *Registry) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.Gather().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

type collectFunc func(s *Scrape)

func (f collectFunc) Collect(s *Scrape) { f(s) }

// TestWriteTextEscapesAndFormatsAsTheTextFormat: HELP escapes backslash
// and line feed, a label value also the double quote; numbers are Go's
// shortest form with +Inf, -Inf and NaN spelled out and -0 as 0; labels
// are written in name order and series sorted by their values.
func TestWriteTextEscapesAndFormatsAsTheTextFormat(t *testing.T) {
	t.Parallel()
	d := NewDesc("x_value", "Help with \\ a backslash,\na line feed and \"quotes\".", KindGauge, "zone", "app")
	r := NewRegistry()
	r.Register(collectFunc(func(s *Scrape) {
		s.Add(d, math.Inf(1), "b", "q\"uo\\te\nd")
		s.Add(d, math.Inf(-1), "a", "z")
		s.Add(d, math.NaN(), "a", "y")
		s.Add(d, math.Copysign(0, -1), "c", "")
		s.Add(d, 1234567, "d", "")
		s.Add(d, 0.000123, "e", "")
		s.Add(d, 1e21, "f", "")
		s.Add(d, -1.5, "g", "")
	}))
	want := `# HELP x_value Help with \\ a backslash,\na line feed and "quotes".
# TYPE x_value gauge
x_value{app="",zone="c"} 0
x_value{app="",zone="d"} 1.234567e+06
x_value{app="",zone="e"} 0.000123
x_value{app="",zone="f"} 1e+21
x_value{app="",zone="g"} -1.5
x_value{app="q\"uo\\te\nd",zone="b"} +Inf
x_value{app="y",zone="a"} NaN
x_value{app="z",zone="a"} -Inf
`
	if got := text(t, r); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestWriteTextSortsFamiliesAndLeavesOutEmptyOnes: families come out by
// name whatever the order of registration; a vector without children
// writes nothing, not even its HELP; an unlabelled instrument is written
// while zero.
func TestWriteTextSortsFamiliesAndLeavesOutEmptyOnes(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	b := NewCounterVec("b_total", "B.", "k")
	a := NewCounterVec("a_total", "A.")
	empty := NewCounterVec("c_total", "C.", "k")
	g := NewGaugeVec("d", "D.")
	r.Register(b, empty, g, a)
	b.WithLabelValues("x").Add(2.5)
	b.WithLabelValues("x").Inc()
	g.WithLabelValues().Set(-3)
	g.WithLabelValues().Add(1)
	want := `# HELP a_total A.
# TYPE a_total counter
a_total 0
# HELP b_total B.
# TYPE b_total counter
b_total{k="x"} 3.5
# HELP d D.
# TYPE d gauge
d -2
`
	if got := text(t, r); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestHistogramWritesCumulativeBucketsSumAndCount: an observation on a
// bound falls in that bound's bucket (le is inclusive), one above every
// bound only in +Inf, and the count equals the +Inf bucket.
func TestHistogramWritesCumulativeBucketsSumAndCount(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	h := NewHistogramVec("lat_seconds", "Latency.", []float64{0.005, 0.5, 1}, "up")
	r.Register(h)
	for _, v := range []float64{0.005, 0.3, 2, 0.001} {
		h.WithLabelValues("a").Observe(v)
	}
	want := `# HELP lat_seconds Latency.
# TYPE lat_seconds histogram
lat_seconds_bucket{up="a",le="0.005"} 2
lat_seconds_bucket{up="a",le="0.5"} 3
lat_seconds_bucket{up="a",le="1"} 3
lat_seconds_bucket{up="a",le="+Inf"} 4
lat_seconds_sum{up="a"} 2.306
lat_seconds_count{up="a"} 4
`
	if got := text(t, r); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestSummaryWritesQuantilesSumAndCount: the one summary detour writes,
// go_gc_duration_seconds, has its quantile label last.
func TestSummaryWritesQuantilesSumAndCount(t *testing.T) {
	t.Parallel()
	d := NewDesc("p_seconds", "Pauses.", KindSummary)
	r := NewRegistry()
	r.Register(collectFunc(func(s *Scrape) {
		s.AddSummary(d, []float64{0, 0.5, 1}, []float64{1e-05, 0.00025, 0.002}, 0.01, 12)
	}))
	want := `# HELP p_seconds Pauses.
# TYPE p_seconds summary
p_seconds{quantile="0"} 1e-05
p_seconds{quantile="0.5"} 0.00025
p_seconds{quantile="1"} 0.002
p_seconds_sum 0.01
p_seconds_count 12
`
	if got := text(t, r); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestCounterIgnoresWhatWouldTakeItDown: a counter only goes up, and mixes
// whole and fractional additions.
func TestCounterIgnoresWhatWouldTakeItDown(t *testing.T) {
	t.Parallel()
	var c Counter
	c.Add(-1)
	c.Add(math.NaN())
	c.Add(2)
	c.Add(0.25)
	c.Inc()
	if got := c.Value(); got != 3.25 {
		t.Errorf("Value() = %v; want 3.25", got)
	}
}

// TestNewDescRefusesInvalidNames: a name the text format cannot carry, a
// repeated label, or a label the kind reserves is a programming error.
func TestNewDescRefusesInvalidNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		kind   Kind
		labels []string
	}{
		{"1abc", KindGauge, nil},
		{"a-b", KindGauge, nil},
		{"", KindGauge, nil},
		{"ok", KindGauge, []string{"a:b"}},
		{"ok", KindGauge, []string{"__x"}},
		{"ok", KindGauge, []string{"a", "a"}},
		{"ok", KindHistogram, []string{"le"}},
		{"ok", KindSummary, []string{"quantile"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewDesc(%q, %v, %q) did not panic", tc.name, tc.kind, tc.labels)
				}
			}()
			NewDesc(tc.name, "h", tc.kind, tc.labels...)
		}()
	}
	NewDesc("ns:sub_name_total", "h", KindCounter, "le", "_ok", "a1")
}

// TestWithLabelValuesFindsTheSameChildAndRefusesAWrongCount: the same
// values give the same child; values that concatenate alike do not.
func TestWithLabelValuesFindsTheSameChildAndRefusesAWrongCount(t *testing.T) {
	t.Parallel()
	v := NewCounterVec("x_total", "X.", "a", "b")
	first := v.WithLabelValues("ab", "c")
	if v.WithLabelValues("a"+"b", "c") != first {
		t.Error("two children for the same values")
	}
	if v.WithLabelValues("ab", "c") == v.WithLabelValues("a", "bc") {
		t.Error("one child for (ab, c) and (a, bc)")
	}
	defer func() {
		if recover() == nil {
			t.Error("WithLabelValues with one value of two did not panic")
		}
	}()
	v.WithLabelValues("a")
}

// TestHandlerServesTextAndGzipsWhenAsked: the text format's content type,
// gzip only when Accept-Encoding allows it, the same text either way.
func TestHandlerServesTextAndGzipsWhenAsked(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	c := NewCounterVec("x_total", "X.", "k")
	r.Register(c)
	c.WithLabelValues("v").Inc()
	want := text(t, r)
	for _, tc := range []struct {
		accept string
		gzip   bool
	}{
		{"", false},
		{"gzip", true},
		{"deflate, gzip;q=0.5", true},
		{"GZIP", true},
		{"gzip;q=0", false},
		{"*", true},
		{"*;q=0", false},
		{"gzip;q=0, *", false},
		{"identity", false},
		{"br, zstd", false},
	} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if tc.accept != "" {
			req.Header.Set("Accept-Encoding", tc.accept)
		}
		w := httptest.NewRecorder()
		r.Handler().ServeHTTP(w, req)
		if ct := w.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("Accept-Encoding %q: Content-Type %q", tc.accept, ct)
		}
		body := w.Body.Bytes()
		if got := w.Header().Get("Content-Encoding") == "gzip"; got != tc.gzip {
			t.Errorf("Accept-Encoding %q: gzipped %v; want %v", tc.accept, got, tc.gzip)
			continue
		}
		if tc.gzip {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if string(body) != want {
			t.Errorf("Accept-Encoding %q: body\n%s\nwant\n%s", tc.accept, body, want)
		}
	}
}

// TestInstrumentsCountEveryUpdateUnderConcurrentScrapes: goroutines
// resolving and updating children while others scrape lose no update
// (and, under -race, share nothing unsynchronized).
func TestInstrumentsCountEveryUpdateUnderConcurrentScrapes(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	c := NewCounterVec("c_total", "C.", "k")
	g := NewGaugeVec("g", "G.", "k")
	h := NewHistogramVec("h_seconds", "H.", []float64{0.1, 1}, "k")
	r.Register(c, g, h)
	const workers, each = 8, 500
	stop := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		for {
			select {
			case <-stop:
				return
			default:
				r.Gather().WriteText(io.Discard)
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			k := []string{"a", "b"}[w%2]
			for i := range each {
				c.WithLabelValues(k).Inc()
				c.WithLabelValues(k).Add(0.5)
				g.WithLabelValues(k).Add(1)
				h.WithLabelValues(k).Observe(float64(i%3) / 2)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-scraped
	got := text(t, r)
	half := workers / 2 * each
	for _, line := range []string{
		`c_total{k="a"} 3000`, `c_total{k="b"} 3000`,
		`g{k="a"} 2000`, `g{k="b"} 2000`,
		`h_seconds_count{k="a"} 2000`,
		`h_seconds_bucket{k="b",le="0.1"} 668`,
		`h_seconds_bucket{k="b",le="1"} 2000`,
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("lacks %s (%d updates per key)\n%s", line, half, got)
		}
	}
}

// TestRegisterRefusesANameTwice: two instruments of one name would write
// one family twice.
func TestRegisterRefusesANameTwice(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Register(NewGaugeFunc("x_bytes", "X.", func() float64 { return 1 }))
	defer func() {
		if recover() == nil {
			t.Error("a second x_bytes was registered")
		}
	}()
	r.Register(NewCounterVec("x_bytes", "X again."))
}
