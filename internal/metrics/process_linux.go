package metrics

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// Linux architecture Go supports (the kernel exports clock ticks to user
// space at that rate whatever its own HZ).
const userHZ = 100

// procReader reads the process_* figures from a proc file system, the way
// the Prometheus client's procfs reader does, without its parser. root is
// "/proc" but for tests.
type procReader struct {
	root string

	startOnce sync.Once
	start     float64
	startErr  error
}

func newProcReader(root string) procReader { return procReader{root: root} }

func (p *procReader) path(name string) string { return filepath.Join(p.root, "self", name) }

func (p *procReader) collect(s *Scrape) {
	if st, err := p.stat(); err == nil {
		s.Add(cpuDesc, float64(st.utime+st.stime)/userHZ)
		s.Add(vsizeDesc, float64(st.vsize))
		s.Add(rssDesc, float64(st.rss*int64(os.Getpagesize())))
		// The start time never changes: /proc/stat is read once.
		p.startOnce.Do(func() {
			var boot int64
			boot, p.startErr = p.bootTime()
			p.start = float64(boot) + float64(st.starttime)/userHZ
		})
		if p.startErr == nil {
			s.Add(startDesc, p.start)
		}
	}
	if n, err := p.openFDs(); err == nil {
		s.Add(openFDsDesc, float64(n))
	}
	if files, as, err := p.limits(); err == nil {
		s.Add(maxFDsDesc, files)
		s.Add(maxVsizeDesc, as)
	}
	if in, out, err := p.netstat(); err == nil {
		s.Add(netInDesc, in)
		s.Add(netOutDesc, out)
	}
}

type procStat struct {
	utime, stime, starttime uint64
	vsize                   uint64
	rss                     int64 // pages
}

var errProcFormat = errors.New("metrics: unexpected /proc format")

// stat reads /proc/self/stat (proc(5)): the fields after the command name,
// which is in parentheses and may itself hold spaces and parentheses.
func (p *procReader) stat() (procStat, error) {
	data, err := os.ReadFile(p.path("stat"))
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, errProcFormat
	}
	// f[0] is field 3 of proc(5), state.
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 22 {
		return procStat{}, errProcFormat
	}
	var st procStat
	var errs [5]error
	st.utime, errs[0] = strconv.ParseUint(f[11], 10, 64)     // 14 utime
	st.stime, errs[1] = strconv.ParseUint(f[12], 10, 64)     // 15 stime
	st.starttime, errs[2] = strconv.ParseUint(f[19], 10, 64) // 22 starttime
	st.vsize, errs[3] = strconv.ParseUint(f[20], 10, 64)     // 23 vsize, bytes
	st.rss, errs[4] = strconv.ParseInt(f[21], 10, 64)        // 24 rss, pages
	return st, errors.Join(errs[:]...)
}

// bootTime is /proc/stat's btime, in seconds since the epoch.
func (p *procReader) bootTime() (int64, error) {
	f, err := os.Open(filepath.Join(p.root, "stat"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errProcFormat
}

// openFDs counts /proc/self/fd's entries. The directory being read is
// open too and counted, as by the Prometheus client.
func (p *procReader) openFDs() (int, error) {
	d, err := os.Open(p.path("fd"))
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(512)
		n += len(names)
		if err != nil {
			if len(names) == 0 {
				return n, nil
			}
			return 0, err
		}
	}
}

// limits reads the soft limits on open files and address space from
// /proc/self/limits; "unlimited" is the largest uint64, as the Prometheus
// client reports it.
func (p *procReader) limits() (files, addressSpace float64, err error) {
	data, err := os.ReadFile(p.path("limits"))
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for _, line := range strings.Split(string(data), "\n") {
		var dst *float64
		var rest string
		if r, ok := strings.CutPrefix(line, "Max open files "); ok {
			dst, rest = &files, r
		} else if r, ok := strings.CutPrefix(line, "Max address space "); ok {
			dst, rest = &addressSpace, r
		} else {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) == 0 {
			return 0, 0, errProcFormat
		}
		if fs[0] == "unlimited" {
			*dst = float64(^uint64(0))
		} else {
			v, err := strconv.ParseUint(fs[0], 10, 64)
			if err != nil {
				return 0, 0, err
			}
			*dst = float64(v)
		}
		found++
	}
	if found != 2 {
		return 0, 0, errProcFormat
	}
	return files, addressSpace, nil
}

// netstat reads IpExt's InOctets and OutOctets from /proc/self/net/netstat:
// a line of names and a line of values, each starting "IpExt:". They count
// the process's network namespace, which is what the Prometheus client
// reports under these names.
func (p *procReader) netstat() (in, out float64, err error) {
	data, err := os.ReadFile(p.path("net/netstat"))
	if err != nil {
		return 0, 0, err
	}
	var names []string
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "IpExt:")
		if !ok {
			continue
		}
		if names == nil {
			names = strings.Fields(rest)
			continue
		}
		vals := strings.Fields(rest)
		if len(vals) != len(names) {
			return 0, 0, errProcFormat
		}
		for i, n := range names {
			var dst *float64
			switch n {
			case "InOctets":
				dst = &in
			case "OutOctets":
				dst = &out
			default:
				continue
			}
			v, err := strconv.ParseFloat(vals[i], 64)
			if err != nil {
				return 0, 0, err
			}
			*dst = v
		}
		return in, out, nil
	}
	return 0, 0, errProcFormat
}
