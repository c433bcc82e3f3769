package metrics

import (
	"math"
	"slices"
	"sync/atomic"
)

// Counter is a value that only goes up. Its zero value is ready; Inc and an
// integral Add are one atomic addition.
type Counter struct {
	// An integral part and a float part, as the Prometheus client keeps
	// them: most counts are whole, and an atomic integer add is cheaper
	// than a compare-and-swap loop on float bits.
	ints  atomic.Uint64
	float atomic.Uint64 // float64 bits
}

// Inc adds 1.
func (c *Counter) Inc() { c.ints.Add(1) }

// Add adds v. A negative or NaN v is ignored: a counter never goes down.
func (c *Counter) Add(v float64) {
	if !(v >= 0) {
		return
	}
	if u := uint64(v); float64(u) == v {
		c.ints.Add(u)
		return
	}
	addFloat(&c.float, v)
}

// Value is the counter's current value.
func (c *Counter) Value() float64 {
	return float64(c.ints.Load()) + math.Float64frombits(c.float.Load())
}

// Gauge is a value that goes up and down. Its zero value is ready.
type Gauge struct{ bits atomic.Uint64 }

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds v (negative to subtract).
func (g *Gauge) Add(v float64) { addFloat(&g.bits, v) }

// Value is the gauge's current value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

func addFloat(bits *atomic.Uint64, v float64) {
	for {
		old := bits.Load()
		if bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Histogram counts observations into buckets by upper bound (inclusive, as
// Prometheus's le), with their sum and count.
type Histogram struct {
	bounds []float64 // ascending, without +Inf
	// counts[i] counts the observations in bucket i alone (not cumulative);
	// the last one those above every bound. The count is their sum, so that
	// a scrape never shows a +Inf bucket other than the count.
	counts []atomic.Uint64
	sum    atomic.Uint64 // float64 bits
}

func newHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe adds v to the bucket it falls in and to the sum.
func (h *Histogram) Observe(v float64) {
	i := 0
	if len(h.bounds) < 32 {
		// A linear scan beats a binary search on the few buckets detour
		// uses (the Prometheus client draws the line at 35).
		for i < len(h.bounds) && v > h.bounds[i] {
			i++
		}
	} else {
		i, _ = slices.BinarySearch(h.bounds, v)
	}
	h.counts[i].Add(1)
	addFloat(&h.sum, v)
}

func (h *Histogram) snapshot() *distribution {
	d := &distribution{bounds: h.bounds, counts: make([]float64, len(h.counts))}
	var cum uint64
	for i := range h.counts {
		cum += h.counts[i].Load()
		d.counts[i] = float64(cum)
	}
	d.count = float64(cum)
	d.sum = math.Float64frombits(h.sum.Load())
	return d
}

// CounterVec is a family of counters, one per set of label values.
type CounterVec struct{ vec[Counter] }

// NewCounterVec returns a counter family. With no label names it has one
// counter, WithLabelValues(), written even while it is zero.
func NewCounterVec(name, help string, labelNames ...string) *CounterVec {
	f := &CounterVec{newVec(NewDesc(name, help, KindCounter, labelNames...), func() *Counter { return new(Counter) })}
	if len(labelNames) == 0 {
		f.WithLabelValues()
	}
	return f
}

// Collect adds every counter of the family to s.
func (f *CounterVec) Collect(s *Scrape) {
	f.each(func(values []string, c *Counter) { s.Add(f.desc, c.Value(), values...) })
}

// GaugeVec is a family of gauges, one per set of label values.
type GaugeVec struct{ vec[Gauge] }

// NewGaugeVec returns a gauge family. With no label names it has one gauge,
// WithLabelValues(), written even while it is zero.
func NewGaugeVec(name, help string, labelNames ...string) *GaugeVec {
	f := &GaugeVec{newVec(NewDesc(name, help, KindGauge, labelNames...), func() *Gauge { return new(Gauge) })}
	if len(labelNames) == 0 {
		f.WithLabelValues()
	}
	return f
}

// Collect adds every gauge of the family to s.
func (f *GaugeVec) Collect(s *Scrape) {
	f.each(func(values []string, g *Gauge) { s.Add(f.desc, g.Value(), values...) })
}

// HistogramVec is a family of histograms with the same buckets, one per
// set of label values.
type HistogramVec struct{ vec[Histogram] }

// NewHistogramVec returns a histogram family with buckets' upper bounds
// (ascending; +Inf is implied and must not be given). With no label names
// it has one histogram, WithLabelValues(), written even while it is empty.
func NewHistogramVec(name, help string, buckets []float64, labelNames ...string) *HistogramVec {
	if !slices.IsSorted(buckets) || slices.Contains(buckets, math.Inf(1)) || len(slices.Compact(slices.Clone(buckets))) != len(buckets) {
		panic("metrics: buckets of " + name + " must ascend strictly and leave out +Inf")
	}
	bounds := slices.Clone(buckets)
	f := &HistogramVec{newVec(NewDesc(name, help, KindHistogram, labelNames...), func() *Histogram { return newHistogram(bounds) })}
	if len(labelNames) == 0 {
		f.WithLabelValues()
	}
	return f
}

// Collect adds every histogram of the family to s.
func (f *HistogramVec) Collect(s *Scrape) {
	f.each(func(values []string, h *Histogram) { s.addHistogram(f.desc, h.snapshot(), values) })
}

// Func is a family of one value read from a function when scraped.
type Func struct {
	desc *Desc
	f    func() float64
}

// NewCounterFunc returns a counter read from f when scraped; f must only
// go up and be safe to call from any goroutine.
func NewCounterFunc(name, help string, f func() float64) *Func {
	return &Func{desc: NewDesc(name, help, KindCounter), f: f}
}

// NewGaugeFunc returns a gauge read from f when scraped; f must be safe to
// call from any goroutine.
func NewGaugeFunc(name, help string, f func() float64) *Func {
	return &Func{desc: NewDesc(name, help, KindGauge), f: f}
}

// Desc describes the family.
func (f *Func) Desc() *Desc { return f.desc }

// Collect adds f's value to s.
func (f *Func) Collect(s *Scrape) { s.Add(f.desc, f.f()) }
