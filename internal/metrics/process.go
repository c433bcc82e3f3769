package metrics

// The process_* families, with the Prometheus client's names and help. The
// figures are read from /proc on Linux (process_linux.go); elsewhere the
// families are left out (process_other.go).
var (
	cpuDesc      = NewDesc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", KindCounter)
	openFDsDesc  = NewDesc("process_open_fds", "Number of open file descriptors.", KindGauge)
	maxFDsDesc   = NewDesc("process_max_fds", "Maximum number of open file descriptors.", KindGauge)
	vsizeDesc    = NewDesc("process_virtual_memory_bytes", "Virtual memory size in bytes.", KindGauge)
	maxVsizeDesc = NewDesc("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", KindGauge)
	rssDesc      = NewDesc("process_resident_memory_bytes", "Resident memory size in bytes.", KindGauge)
	startDesc    = NewDesc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", KindGauge)
	netInDesc    = NewDesc("process_network_receive_bytes_total", "Number of bytes received by the process over the network.", KindCounter)
	netOutDesc   = NewDesc("process_network_transmit_bytes_total", "Number of bytes sent by the process over the network.", KindCounter)
)

// ProcessCollector reports the process_* families of the running process.
type ProcessCollector struct{ proc procReader }

// NewProcessCollector returns the collector of the process_* families.
func NewProcessCollector() *ProcessCollector { return &ProcessCollector{proc: newProcReader("/proc")} }

// Collect adds the process_* families to s. A figure that cannot be read
// leaves its family out of this scrape rather than failing it.
func (c *ProcessCollector) Collect(s *Scrape) { c.proc.collect(s) }
