package metrics

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"time"
)

// The runtime/metrics samples the go_* families are made of.
const (
	rmTinyAllocs = iota
	rmAllocsObjects
	rmFreesObjects
	rmAllocsBytes
	rmHeapObjects
	rmHeapGoal
	rmTotal
	rmHeapObjectsBytes
	rmHeapUnused
	rmHeapReleased
	rmHeapFree
	rmHeapStacks
	rmOSStacks
	rmMSpanInuse
	rmMSpanFree
	rmMCacheInuse
	rmMCacheFree
	rmProfBuckets
	rmMetadataOther
	rmOther
	rmGOGC
	rmMemLimit
	rmGOMAXPROCS
	rmCount
)

var rmNames = [rmCount]string{
	rmTinyAllocs:       "/gc/heap/tiny/allocs:objects",
	rmAllocsObjects:    "/gc/heap/allocs:objects",
	rmFreesObjects:     "/gc/heap/frees:objects",
	rmAllocsBytes:      "/gc/heap/allocs:bytes",
	rmHeapObjects:      "/gc/heap/objects:objects",
	rmHeapGoal:         "/gc/heap/goal:bytes",
	rmTotal:            "/memory/classes/total:bytes",
	rmHeapObjectsBytes: "/memory/classes/heap/objects:bytes",
	rmHeapUnused:       "/memory/classes/heap/unused:bytes",
	rmHeapReleased:     "/memory/classes/heap/released:bytes",
	rmHeapFree:         "/memory/classes/heap/free:bytes",
	rmHeapStacks:       "/memory/classes/heap/stacks:bytes",
	rmOSStacks:         "/memory/classes/os-stacks:bytes",
	rmMSpanInuse:       "/memory/classes/metadata/mspan/inuse:bytes",
	rmMSpanFree:        "/memory/classes/metadata/mspan/free:bytes",
	rmMCacheInuse:      "/memory/classes/metadata/mcache/inuse:bytes",
	rmMCacheFree:       "/memory/classes/metadata/mcache/free:bytes",
	rmProfBuckets:      "/memory/classes/profiling/buckets:bytes",
	rmMetadataOther:    "/memory/classes/metadata/other:bytes",
	rmOther:            "/memory/classes/other:bytes",
	rmGOGC:             "/gc/gogc:percent",
	rmMemLimit:         "/gc/gomemlimit:bytes",
	rmGOMAXPROCS:       "/sched/gomaxprocs:threads",
}

// memStat is one go_memstats_* family: the figure runtime.ReadMemStats
// gives, made of runtime/metrics samples (which, unlike ReadMemStats, do
// not stop the world), as the Prometheus client computes it.
type memStat struct {
	desc  *Desc
	value func(s *[rmCount]float64) float64
}

func gaugeOf(i int) func(s *[rmCount]float64) float64 {
	return func(s *[rmCount]float64) float64 { return s[i] }
}

func sumOf(is ...int) func(s *[rmCount]float64) float64 {
	return func(s *[rmCount]float64) float64 {
		t := 0.0
		for _, i := range is {
			t += s[i]
		}
		return t
	}
}

// The help texts are the Prometheus client's, word for word: dashboards
// and people know these families by them.
var memStats = []memStat{
	{NewDesc("go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", KindGauge), gaugeOf(rmHeapObjectsBytes)},
	{NewDesc("go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", KindCounter), gaugeOf(rmAllocsBytes)},
	{NewDesc("go_memstats_sys_bytes", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", KindGauge), gaugeOf(rmTotal)},
	{NewDesc("go_memstats_mallocs_total", "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", KindCounter), sumOf(rmAllocsObjects, rmTinyAllocs)},
	{NewDesc("go_memstats_frees_total", "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", KindCounter), sumOf(rmFreesObjects, rmTinyAllocs)},
	{NewDesc("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", KindGauge), gaugeOf(rmHeapObjectsBytes)},
	{NewDesc("go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", KindGauge), sumOf(rmHeapObjectsBytes, rmHeapUnused, rmHeapReleased, rmHeapFree)},
	{NewDesc("go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", KindGauge), sumOf(rmHeapReleased, rmHeapFree)},
	{NewDesc("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", KindGauge), sumOf(rmHeapObjectsBytes, rmHeapUnused)},
	{NewDesc("go_memstats_heap_released_bytes", "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.", KindGauge), gaugeOf(rmHeapReleased)},
	{NewDesc("go_memstats_heap_objects", "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", KindGauge), gaugeOf(rmHeapObjects)},
	{NewDesc("go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.", KindGauge), gaugeOf(rmHeapStacks)},
	{NewDesc("go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", KindGauge), sumOf(rmHeapStacks, rmOSStacks)},
	{NewDesc("go_memstats_mspan_inuse_bytes", "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.", KindGauge), gaugeOf(rmMSpanInuse)},
	{NewDesc("go_memstats_mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", KindGauge), sumOf(rmMSpanInuse, rmMSpanFree)},
	{NewDesc("go_memstats_mcache_inuse_bytes", "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.", KindGauge), gaugeOf(rmMCacheInuse)},
	{NewDesc("go_memstats_mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", KindGauge), sumOf(rmMCacheInuse, rmMCacheFree)},
	{NewDesc("go_memstats_buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.", KindGauge), gaugeOf(rmProfBuckets)},
	{NewDesc("go_memstats_gc_sys_bytes", "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.", KindGauge), gaugeOf(rmMetadataOther)},
	{NewDesc("go_memstats_other_sys_bytes", "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.", KindGauge), gaugeOf(rmOther)},
	{NewDesc("go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", KindGauge), gaugeOf(rmHeapGoal)},
}

var (
	goroutinesDesc = NewDesc("go_goroutines", "Number of goroutines that currently exist.", KindGauge)
	threadsDesc    = NewDesc("go_threads", "Number of OS threads created.", KindGauge)
	gcDurationDesc = NewDesc("go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", KindSummary)
	lastGCDesc     = NewDesc("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", KindGauge)
	goInfoDesc     = NewDesc("go_info", "Information about the Go environment.", KindGauge, "version")
)

// goSettings are the families of runtime settings the Prometheus client
// exports by default, with its names; their help is the runtime's own
// description of the sample.
var goSettings = []struct {
	rm   int
	name string
}{
	{rmGOGC, "go_gc_gogc_percent"},
	{rmMemLimit, "go_gc_gomemlimit_bytes"},
	{rmGOMAXPROCS, "go_sched_gomaxprocs_threads"},
}

// GoCollector reports the go_* families: goroutines, threads, GC pauses,
// the go_memstats_* figures, the GC and scheduler settings and go_info.
type GoCollector struct {
	settings []*Desc // by goSettings, nil for a sample this Go lacks

	mu      sync.Mutex // guards samples, which runtime/metrics.Read fills
	samples []rtmetrics.Sample
}

// NewGoCollector returns the collector of the go_* families.
func NewGoCollector() *GoCollector {
	c := &GoCollector{samples: make([]rtmetrics.Sample, rmCount), settings: make([]*Desc, len(goSettings))}
	for i, n := range rmNames {
		c.samples[i].Name = n
	}
	help := map[string]string{}
	for _, d := range rtmetrics.All() {
		help[d.Name] = d.Description
	}
	for i, s := range goSettings {
		if h, ok := help[rmNames[s.rm]]; ok {
			c.settings[i] = NewDesc(s.name, h+" Sourced from "+rmNames[s.rm]+".", KindGauge)
		}
	}
	return c
}

// Collect adds the go_* families to s.
func (c *GoCollector) Collect(s *Scrape) {
	s.Add(goroutinesDesc, float64(runtime.NumGoroutine()))
	n, _ := runtime.ThreadCreateProfile(nil)
	s.Add(threadsDesc, float64(n))

	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	qs := []float64{0, 0.25, 0.5, 0.75, 1}
	vs := make([]float64, len(qs))
	for i, p := range gc.PauseQuantiles {
		vs[i] = p.Seconds()
	}
	s.AddSummary(gcDurationDesc, qs, vs, gc.PauseTotal.Seconds(), uint64(gc.NumGC))
	s.Add(lastGCDesc, float64(gc.LastGC.UnixNano())/1e9)
	s.Add(goInfoDesc, 1, runtime.Version())

	var v [rmCount]float64
	c.mu.Lock()
	rtmetrics.Read(c.samples)
	for i, sm := range c.samples {
		switch sm.Value.Kind() {
		case rtmetrics.KindUint64:
			v[i] = float64(sm.Value.Uint64())
		case rtmetrics.KindFloat64:
			v[i] = sm.Value.Float64()
		}
	}
	c.mu.Unlock()
	for _, m := range memStats {
		s.Add(m.desc, m.value(&v))
	}
	for i, d := range c.settings {
		if d != nil {
			s.Add(d, v[goSettings[i].rm])
		}
	}
}
