// Package metrics is detour's own metrics registry and its Prometheus text
// exposition (format 0.0.4): counters, gauges and histograms with label
// vectors, functions read when scraped, collectors of computed values, and
// the go_* and process_* families.
//
// It replaces the Prometheus client library in the sidecar's binary, which
// brought its data model, its procfs reader and the protobuf runtime along
// (docs/architecture.md#admin-listener-and-metrics): detour needs only the
// text format, a few instrument kinds and a handful of runtime figures. The
// output is what the client library wrote, family by family (names, help,
// types, label order, bucket bounds, escaping, number formatting), so that
// dashboards, rules and scrapers see no difference.
//
// An instrument's hot path (Inc, Add, Observe on a child already resolved,
// and WithLabelValues finding an existing child) is atomic and allocates
// nothing. Everything else happens when /metrics is scraped.
//
// The package imports only the standard library; nothing of detour's.
package metrics

import (
	"slices"
	"strings"
	"sync"
)

// Kind is a family's Prometheus type, written on its TYPE line.
type Kind uint8

// The kinds detour exports.
const (
	KindCounter Kind = iota + 1
	KindGauge
	KindHistogram
	KindSummary
)

func (k Kind) String() string {
	switch k {
	case KindCounter:
		return "counter"
	case KindGauge:
		return "gauge"
	case KindHistogram:
		return "histogram"
	case KindSummary:
		return "summary"
	}
	return "untyped"
}

// Desc describes one family: its full name, help text, kind and label
// names (in the order label values are given). The exposition writes the
// labels sorted by name, as the Prometheus client library does.
type Desc struct {
	name   string
	help   string
	kind   Kind
	labels []string
	// order lists the indices of labels sorted by name: values are written
	// and series sorted in that order.
	order []int
}

// NewDesc returns the description of a family. It panics on a name or label
// name that is not valid in the text format, or a repeated label name: a
// programming error, found at start.
func NewDesc(name, help string, kind Kind, labelNames ...string) *Desc {
	if !validName(name, true) {
		panic("metrics: invalid metric name " + name)
	}
	d := &Desc{name: name, help: help, kind: kind, labels: slices.Clone(labelNames), order: make([]int, len(labelNames))}
	for i, l := range labelNames {
		if !validName(l, false) || strings.HasPrefix(l, "__") || l == "le" && kind == KindHistogram || l == "quantile" && kind == KindSummary {
			panic("metrics: invalid label name " + l + " for " + name)
		}
		if slices.Index(labelNames, l) != i {
			panic("metrics: label " + l + " repeated for " + name)
		}
		d.order[i] = i
	}
	slices.SortFunc(d.order, func(a, b int) int { return strings.Compare(labelNames[a], labelNames[b]) })
	return d
}

// Name is the family's name.
func (d *Desc) Name() string { return d.name }

// validName reports whether s is a legacy Prometheus metric name (colons
// allowed) or label name.
func validName(s string, metric bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', metric && c == ':':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Collector adds its families' current samples to a scrape.
type Collector interface {
	Collect(s *Scrape)
}

// Registry holds the collectors that /metrics reports. Families are written
// sorted by name whatever the order of registration.
type Registry struct {
	mu         sync.Mutex
	collectors []Collector
	names      map[string]bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]bool{}} }

// Register adds collectors to r. It panics when an instrument (a vector or
// a Func) has the name of one registered before, as the Prometheus client
// did: the two would write one family twice.
func (r *Registry) Register(cs ...Collector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		if d, ok := c.(interface{ Desc() *Desc }); ok {
			n := d.Desc().name
			if r.names[n] {
				panic("metrics: " + n + " registered twice")
			}
			r.names[n] = true
		}
	}
	r.collectors = append(r.collectors, cs...)
}

// Gather runs every collector into a new scrape.
func (r *Registry) Gather() *Scrape {
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	s := &Scrape{byName: map[string]*family{}}
	for _, c := range cs {
		c.Collect(s)
	}
	return s
}

// Scrape is one gathering of every family's samples, handed to each
// Collector. Its methods are not safe for concurrent use: a collector adds
// its samples from the goroutine that called it.
type Scrape struct {
	byName map[string]*family
	fams   []*family
}

type family struct {
	desc    *Desc
	samples []sample
}

// sample is one series: a counter's or gauge's value, or a histogram's or
// summary's snapshot.
type sample struct {
	values []string
	value  float64
	dist   *distribution
}

// distribution is a histogram's buckets (cumulative, by upper bound, +Inf
// last) or a summary's quantiles, with sum and count.
type distribution struct {
	bounds []float64
	counts []float64
	sum    float64
	count  float64
}

func (s *Scrape) family(d *Desc, values []string) *family {
	if len(values) != len(d.labels) {
		panic("metrics: " + d.name + " takes " + strings.Join(d.labels, ",") + "; got " + strings.Join(values, ","))
	}
	f := s.byName[d.name]
	if f == nil {
		f = &family{desc: d}
		s.byName[d.name] = f
		s.fams = append(s.fams, f)
	}
	return f
}

// Add adds one sample of a counter or gauge family d, with its label values
// in the order of d's label names.
func (s *Scrape) Add(d *Desc, value float64, labelValues ...string) {
	f := s.family(d, labelValues)
	f.samples = append(f.samples, sample{values: slices.Clone(labelValues), value: value})
}

// AddSummary adds one summary sample of family d: quantiles (ascending)
// and their values, the sum and count of the observations.
func (s *Scrape) AddSummary(d *Desc, quantiles, values []float64, sum float64, count uint64, labelValues ...string) {
	f := s.family(d, labelValues)
	f.samples = append(f.samples, sample{values: slices.Clone(labelValues),
		dist: &distribution{bounds: quantiles, counts: values, sum: sum, count: float64(count)}})
}

func (s *Scrape) addHistogram(d *Desc, dist *distribution, labelValues []string) {
	f := s.family(d, labelValues)
	f.samples = append(f.samples, sample{values: labelValues, dist: dist})
}
