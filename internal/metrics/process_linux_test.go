package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProcReaderReadsProcFiles: the figures come from the fields proc(5)
// names, a command name holding spaces and parentheses included, and
// "unlimited" is the largest uint64 as the Prometheus client reports it.
func TestProcReaderReadsProcFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	self := filepath.Join(root, "self")
	for name, data := range map[string]string{
		"stat":             "cpu  1 2 3\nbtime 1764590000\nprocesses 9\n",
		"self/stat":        "4242 (de tour) (x)) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 12 0 360000 1234567168 4000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
		"self/limits":      "Limit                     Soft Limit           Hard Limit           Units     \nMax cpu time              unlimited            unlimited            seconds   \nMax open files            1048576              1048576              files     \nMax address space         unlimited            unlimited            bytes     \n",
		"self/net/netstat": "TcpExt: SyncookiesSent\nTcpExt: 0\nIpExt: InNoRoutes InOctets OutOctets\nIpExt: 0 123456 7890\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(self, "fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"0", "1", "2", "7"} {
		if err := os.WriteFile(filepath.Join(self, "fd", n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := NewRegistry()
	r.Register(&ProcessCollector{proc: newProcReader(root)})
	got := text(t, r)
	page := float64(os.Getpagesize())
	for _, line := range []string{
		"process_cpu_seconds_total 3",
		"process_start_time_seconds 1.7645936e+09",
		"process_virtual_memory_bytes 1.234567168e+09",
		"process_resident_memory_bytes " + string(appendFloat(nil, 4000*page)),
		"process_open_fds 4",
		"process_max_fds 1.048576e+06",
		"process_virtual_memory_max_bytes 1.8446744073709552e+19",
		"process_network_receive_bytes_total 123456",
		"process_network_transmit_bytes_total 7890",
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("lacks %s\n%s", line, got)
		}
	}
}

// TestProcReaderLeavesOutWhatItCannotRead: a missing file leaves its
// families out of the scrape; the others are still there.
func TestProcReaderLeavesOutWhatItCannotRead(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "self", "fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := NewRegistry()
	r.Register(&ProcessCollector{proc: newProcReader(root)})
	got := text(t, r)
	if !strings.Contains(got, "process_open_fds 0\n") || strings.Contains(got, "process_cpu_seconds_total") || strings.Contains(got, "process_max_fds") {
		t.Errorf("got\n%s", got)
	}
}
