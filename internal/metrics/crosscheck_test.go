package metrics

// The Prometheus client library is a test-only dependency: these tests hold
// this package's output to what the library writes for the same
// instruments and the same observations, and the benchmarks measure the
// hot path against it. The sidecar's binary does not link it (deps_test.go).

import (
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func promText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.PanicOnError}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	return w.Body.String()
}

func parseText(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the text parser of Prometheus refuses the output: %v\n%s", err, text)
	}
	return fams
}

// TestTextIsWhatTheClientLibraryWrites: counters (whole and fractional
// additions), gauges, histograms with and without labels, functions and
// computed values, fed the same random observations and label values
// with every character the format escapes, come out byte for byte as the
// client library's handler writes them, and its parser reads them back.
func TestTextIsWhatTheClientLibraryWrites(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	buckets := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120}
	labels := []string{"", "plain", `back\slash`, `quo"te`, "line\nfeed", "ünïcode", "a,b=c}"}
	help := "Help with \\ and \n and \"quotes\"."

	ours := NewRegistry()
	oc := NewCounterVec("t_requests_total", help, "route", "outcome")
	og := NewGaugeVec("t_in_flight", "In flight.", "upstream")
	oh := NewHistogramVec("t_latency_seconds", "Latency.", buckets, "upstream", "phase")
	ou := NewHistogramVec("t_overhead_seconds", "Overhead.", buckets[:5])
	of := NewGaugeFunc("t_buffered_bytes", "Buffered.", func() float64 { return 1 << 20 })
	ocf := NewCounterFunc("t_dropped_total", "Dropped.", func() float64 { return 7 })
	od := NewDesc("t_state", "State.", KindGauge, "upstream", "route")
	ours.Register(oc, og, oh, ou, of, ocf, collectFunc(func(s *Scrape) {
		for i, l := range labels {
			s.Add(od, float64(i)/3, l, "r")
		}
	}))

	reg := prometheus.NewRegistry()
	pc := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t_requests_total", Help: help}, []string{"route", "outcome"})
	pg := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "t_in_flight", Help: "In flight."}, []string{"upstream"})
	ph := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "t_latency_seconds", Help: "Latency.", Buckets: buckets}, []string{"upstream", "phase"})
	pu := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "t_overhead_seconds", Help: "Overhead.", Buckets: buckets[:5]})
	pd := prometheus.NewDesc("t_state", "State.", []string{"upstream", "route"}, nil)
	reg.MustRegister(pc, pg, ph, pu,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "t_buffered_bytes", Help: "Buffered."}, func() float64 { return 1 << 20 }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "t_dropped_total", Help: "Dropped."}, func() float64 { return 7 }),
		constCollector{pd, labels})

	pick := func() string { return labels[rng.IntN(len(labels))] }
	for range 2000 {
		r, o, u := pick(), pick(), pick()
		switch rng.IntN(3) {
		case 0:
			oc.WithLabelValues(r, o).Inc()
			pc.WithLabelValues(r, o).Inc()
		case 1:
			v := float64(rng.IntN(5000))
			oc.WithLabelValues(r, o).Add(v)
			pc.WithLabelValues(r, o).Add(v)
		default:
			v := rng.Float64() * 3
			oc.WithLabelValues(r, o).Add(v)
			pc.WithLabelValues(r, o).Add(v)
		}
		g := rng.NormFloat64() * 10
		og.WithLabelValues(u).Add(g)
		pg.WithLabelValues(u).Add(g)
		// Latencies from sub-millisecond to beyond the last bucket, some
		// exactly on a bound.
		v := math.Exp(rng.Float64()*14 - 9)
		if rng.IntN(10) == 0 {
			v = buckets[rng.IntN(len(buckets))]
		}
		phase := []string{"headers", "commit"}[rng.IntN(2)]
		oh.WithLabelValues(u, phase).Observe(v)
		ph.WithLabelValues(u, phase).Observe(v)
		ou.WithLabelValues().Observe(v / 1000)
		pu.Observe(v / 1000)
	}

	got, want := text(t, ours), promText(t, reg)
	if got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d:\n got %s\nwant %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%d lines; want %d", len(gl), len(wl))
	}
	parseText(t, got)
}

// constCollector is the client library's side of a collector of computed
// values (stateCollector and the like in internal/admin).
type constCollector struct {
	desc   *prometheus.Desc
	labels []string
}

func (c constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for i, l := range c.labels {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(i)/3, l, "r")
	}
}

// TestRuntimeFamiliesAreTheClientLibrarys: the go_* and process_* families
// have the client library's collectors' names, types and help, and the
// figures that do not move between two scrapes agree with theirs (the
// others within a margin: memory and threads change as the test runs).
func TestRuntimeFamiliesAreTheClientLibrarys(t *testing.T) {
	// Not parallel: the memory figures of the two reads are compared, and
	// the other tests' allocations in between would move them.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ours := NewRegistry()
	ours.Register(NewGoCollector(), NewProcessCollector())
	// Ours is read before and after theirs: the memory figures grow as the
	// reads themselves allocate (the client library's gather allocates
	// megabytes at a heap this small), so theirs is held to the range that
	// ours spans around it rather than to one read of ours.
	before := parseText(t, text(t, ours))
	want := parseText(t, promText(t, reg))
	got := parseText(t, text(t, ours))

	names := func(m map[string]*dto.MetricFamily) []string {
		var ns []string
		for n := range m {
			ns = append(ns, n)
		}
		slices.Sort(ns)
		return ns
	}
	if runtime.GOOS != "linux" {
		for n := range want {
			if strings.HasPrefix(n, "process_") {
				delete(want, n)
			}
		}
	}
	if g, w := names(got), names(want); !slices.Equal(g, w) {
		t.Fatalf("families\n%q\nwant\n%q", g, w)
	}
	exact := []string{"go_gc_gogc_percent", "go_gc_gomemlimit_bytes", "go_sched_gomaxprocs_threads", "go_info",
		"process_max_fds", "process_virtual_memory_max_bytes", "process_start_time_seconds"}
	for n, w := range want {
		g := got[n]
		if g.GetType() != w.GetType() || g.GetHelp() != w.GetHelp() || len(g.Metric) != len(w.Metric) {
			t.Errorf("%s: %v %q with %d series; want %v %q with %d", n, g.GetType(), g.GetHelp(), len(g.Metric), w.GetType(), w.GetHelp(), len(w.Metric))
			continue
		}
		for i := range w.Metric {
			if gl, wl := labelString(g.Metric[i]), labelString(w.Metric[i]); gl != wl {
				t.Errorf("%s: labels %s; want %s", n, gl, wl)
			}
		}
		if w.GetType() != dto.MetricType_GAUGE && w.GetType() != dto.MetricType_COUNTER {
			continue
		}
		gv, wv := value(g.Metric[0]), value(w.Metric[0])
		lo, hi := min(gv, value(before[n].Metric[0])), max(gv, value(before[n].Metric[0]))
		switch {
		case slices.Contains(exact, n):
			if gv != wv {
				t.Errorf("%s = %v; want %v", n, gv, wv)
			}
		case strings.HasSuffix(n, "_sys_bytes") || n == "go_threads" || n == "process_resident_memory_bytes" || n == "process_virtual_memory_bytes":
			// Within a factor of two of what ours read around it, and both
			// or neither zero: the same figure, read a moment apart. (The
			// live heap is left out: a collection between the reads can
			// halve it.)
			if (gv == 0) != (wv == 0) || wv > 2*hi+16 || lo > 2*wv+16 {
				t.Errorf("%s = %v..%v; the client library read %v", n, lo, hi, wv)
			}
		}
	}
}

func labelString(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.Label {
		b.WriteString(l.GetName() + "=" + l.GetValue() + ",")
	}
	return b.String()
}

func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// TestProcessFamiliesDescribeThisProcess: the start time is in the past
// hour (the test binary started moments ago), and the process has open
// files, some CPU time and more than a MiB resident.
func TestProcessFamiliesDescribeThisProcess(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the process_* families are read from /proc, on Linux only")
	}
	r := NewRegistry()
	r.Register(NewProcessCollector())
	fams := parseText(t, text(t, r))
	get := func(n string) float64 {
		f := fams[n]
		if f == nil {
			t.Fatalf("no %s", n)
		}
		return value(f.Metric[0])
	}
	now := float64(time.Now().UnixNano()) / 1e9
	if st := get("process_start_time_seconds"); st > now+1 || st < now-3600 {
		t.Errorf("process_start_time_seconds = %v; now is %v", st, now)
	}
	if n := get("process_open_fds"); n < 3 || n > get("process_max_fds") {
		t.Errorf("process_open_fds = %v (max %v)", n, get("process_max_fds"))
	}
	if rss := get("process_resident_memory_bytes"); rss < 1<<20 || rss > get("process_virtual_memory_bytes") {
		t.Errorf("process_resident_memory_bytes = %v (virtual %v)", rss, get("process_virtual_memory_bytes"))
	}
	if cpu := get("process_cpu_seconds_total"); cpu < 0 {
		t.Errorf("process_cpu_seconds_total = %v", cpu)
	}
}

// BenchmarkCounterInc: a labelled counter's Inc, on a child resolved once
// (the hot path detour keeps) and through WithLabelValues, against the
// client library.
func BenchmarkCounterInc(b *testing.B) {
	ours := NewCounterVec("b_total", "B.", "upstream", "class")
	theirs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "b_total", Help: "B."}, []string{"upstream", "class"})
	up, class := "primary", "overloaded"
	b.Run("resolved/detour", func(b *testing.B) {
		c := ours.WithLabelValues(up, class)
		b.ReportAllocs()
		for b.Loop() {
			c.Inc()
		}
	})
	b.Run("resolved/client_golang", func(b *testing.B) {
		c := theirs.WithLabelValues(up, class)
		b.ReportAllocs()
		for b.Loop() {
			c.Inc()
		}
	})
	b.Run("WithLabelValues/detour", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ours.WithLabelValues(up, class).Inc()
		}
	})
	b.Run("WithLabelValues/client_golang", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			theirs.WithLabelValues(up, class).Inc()
		}
	})
}

// BenchmarkHistogramObserve: Observe on detour's upstream latency buckets,
// resolved and through WithLabelValues, against the client library.
func BenchmarkHistogramObserve(b *testing.B) {
	buckets := []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120}
	ours := NewHistogramVec("b_seconds", "B.", buckets, "upstream", "phase")
	theirs := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "b_seconds", Help: "B.", Buckets: buckets}, []string{"upstream", "phase"})
	vs := []float64{0.03, 0.4, 1.7, 0.09, 12, 0.2, 3.3, 0.6}
	up, phase := "primary", "commit"
	b.Run("resolved/detour", func(b *testing.B) {
		h := ours.WithLabelValues(up, phase)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			h.Observe(vs[i&7])
			i++
		}
	})
	b.Run("resolved/client_golang", func(b *testing.B) {
		h := theirs.WithLabelValues(up, phase)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			h.Observe(vs[i&7])
			i++
		}
	})
	b.Run("WithLabelValues/detour", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ours.WithLabelValues(up, phase).Observe(vs[i&7])
			i++
		}
	})
	b.Run("WithLabelValues/client_golang", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			theirs.WithLabelValues(up, phase).Observe(vs[i&7])
			i++
		}
	})
}

// BenchmarkScrape: one /metrics of a registry like detour's after some
// traffic, against the client library's handler.
func BenchmarkScrape(b *testing.B) {
	ours := NewRegistry()
	oc := NewCounterVec("b_total", "B.", "upstream", "class")
	oh := NewHistogramVec("b_seconds", "B.", []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120}, "upstream", "phase")
	ours.Register(oc, oh, NewGoCollector(), NewProcessCollector())
	reg := prometheus.NewRegistry()
	pc := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "b_total", Help: "B."}, []string{"upstream", "class"})
	ph := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "b_seconds", Help: "B.", Buckets: []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120}}, []string{"upstream", "phase"})
	reg.MustRegister(pc, ph, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, u := range []string{"a", "b", "c", "d"} {
		for _, c := range []string{"ok", "overloaded", "timeout", "rate_limited"} {
			oc.WithLabelValues(u, c).Inc()
			pc.WithLabelValues(u, c).Inc()
		}
		for _, p := range []string{"headers", "commit"} {
			oh.WithLabelValues(u, p).Observe(0.3)
			ph.WithLabelValues(u, p).Observe(0.3)
		}
	}
	b.Run("detour", func(b *testing.B) {
		h := ours.Handler()
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		}
	})
	b.Run("client_golang", func(b *testing.B) {
		h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		}
	})
}
