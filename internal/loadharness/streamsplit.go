package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// streamClock is what the client of one stream saw besides its send and
// its content events: when the transport had written the request, and
// when the first byte of the answer (its status line) arrived.
type streamClock struct {
	mu        sync.Mutex
	wrote     time.Time
	firstByte time.Time
}

// trace returns ctx with a client trace that fills in c. It only takes
// the clock: the request is the same for every variant, so whatever the
// trace costs the client, it costs each of them alike.
func (c *streamClock) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) {
			c.mu.Lock()
			c.wrote = time.Now()
			c.mu.Unlock()
		},
		GotFirstResponseByte: func() {
			c.mu.Lock()
			c.firstByte = time.Now()
			c.mu.Unlock()
		},
	})
}

func (c *streamClock) times() (wrote, firstByte time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wrote, c.firstByte
}

// streamSplit gathers, per variant, the parts the time to first token is
// made of, for the breakdown compare prints beside its table: where a
// proxy's time goes, measured from outside it. Nothing in the README's
// figures is computed from it.
type streamSplit struct {
	send      map[string][]time.Duration // client's send → request written
	toVendor  map[string][]time.Duration // request written → vendor's handler
	toHeaders map[string][]time.Duration // vendor's first content write → client's first byte of the answer
	parse     map[string][]time.Duration // client's first byte of the answer → first content at the client
	// late counts the streams whose first content reached the client
	// after the vendor had already written its second content event: the
	// vendor shares this process, so its next write ran before the
	// client's read of the first.
	late    map[string]int
	streams map[string]int
	// conns are the vendor connections each variant's streams came on.
	conns map[string]map[string]bool
}

func newStreamSplit() *streamSplit {
	return &streamSplit{
		send: map[string][]time.Duration{}, toVendor: map[string][]time.Duration{},
		toHeaders: map[string][]time.Duration{}, parse: map[string][]time.Duration{},
		late: map[string]int{}, streams: map[string]int{}, conns: map[string]map[string]bool{},
	}
}

// add records one stream of variant name.
func (s *streamSplit) add(name string, start, entered time.Time, c *streamClock, sent, arrived []time.Time, remote string) {
	wrote, firstByte := c.times()
	s.send[name] = append(s.send[name], wrote.Sub(start))
	s.toVendor[name] = append(s.toVendor[name], entered.Sub(wrote))
	s.toHeaders[name] = append(s.toHeaders[name], firstByte.Sub(sent[0]))
	s.parse[name] = append(s.parse[name], arrived[0].Sub(firstByte))
	if len(sent) > 1 && sent[1].Before(arrived[0]) {
		s.late[name]++
	}
	s.streams[name]++
	if s.conns[name] == nil {
		s.conns[name] = map[string]bool{}
	}
	s.conns[name][remote] = true
}

// print writes the breakdown of the streams of kind, one line per
// variant, medians.
func (s *streamSplit) print(w io.Writer, kind string) {
	names := make([]string, 0, len(s.streams))
	for n := range s.streams {
		names = append(names, n)
	}
	sort.Strings(names)
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1e3) }
	fmt.Fprintln(w, "compare: stream split, "+kind+" opening, p50 (client send → request written → vendor's handler; vendor's first content → client's first byte of the answer → first content read):")
	for _, n := range names {
		var b strings.Builder
		fmt.Fprintf(&b, "compare:   %-6s send %s, to vendor %s", n, us(pct(s.send[n], 50)), us(pct(s.toVendor[n], 50)))
		if pct(s.toHeaders[n], 50) > 0 {
			// The first byte comes after the first content's write only
			// when the headers came with that content: from a proxy that
			// holds them until then (detour), or from a vendor that writes
			// its opening event with its first content (joined); otherwise
			// they came with the opening event.
			fmt.Fprintf(&b, ", first content to headers %s, headers to content read %s", us(pct(s.toHeaders[n], 50)), us(pct(s.parse[n], 50)))
		}
		fmt.Fprintf(&b, "; vendor's 2nd event written before the 1st was read: %d of %d; vendor connections: %d", s.late[n], s.streams[n], len(s.conns[n]))
		fmt.Fprintln(w, b.String())
	}
}

// streamUsage is what each proxy's process spent over the stream phase,
// for the CPU and context switches per event compare prints beside its
// table: unlike an event's transit, which the other work of a shared
// machine stretches, a proxy's own CPU per event varies little from run
// to run, so that a difference between two proxies' per-event work shows
// in it where their transits' medians are within each other's noise. The
// figures include the phase's requests (a stream's way in and commit
// point) and the warm-up streams, spread over the events.
type streamUsage struct {
	vs   []*variant
	cpu0 []time.Duration
	ctx0 []int64
	flt0 []int64
}

func startStreamUsage(vs []*variant) (*streamUsage, error) {
	u := &streamUsage{vs: vs}
	for _, v := range vs {
		c, err := cpuTime(v.child.pid())
		if err != nil {
			return nil, err
		}
		u.cpu0 = append(u.cpu0, c)
		u.ctx0 = append(u.ctx0, ctxSwitches(v.child.pid()))
		u.flt0 = append(u.flt0, minorFaults(v.child.pid()))
	}
	return u, nil
}

// print writes each proxy's CPU and context switches per event, events
// being every content event the phase streamed through it.
func (u *streamUsage) print(w io.Writer, events, streams int) error {
	var b strings.Builder
	b.WriteString("compare: stream phase, per content event (the streams' requests included): ")
	for i, v := range u.vs {
		c, err := cpuTime(v.child.pid())
		if err != nil {
			return err
		}
		cpu := c - u.cpu0[i]
		sw := ctxSwitches(v.child.pid()) - u.ctx0[i]
		flt := minorFaults(v.child.pid()) - u.flt0[i]
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s CPU %.1f µs, context switches %.2f, page faults per stream %.1f", v.name, float64(cpu.Nanoseconds())/1e3/float64(events), float64(sw)/float64(events), float64(flt)/float64(streams))
	}
	fmt.Fprintln(w, b.String())
	return nil
}

// minorFaults is pid's minor page faults so far (0 where /proc cannot tell:
// a diagnostic). A fault costs a VM far more than a cache miss, and a Go
// process faults again on memory its scavenger gave back while it was idle.
func minorFaults(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 8 {
		return 0
	}
	n, _ := strconv.ParseInt(f[7], 10, 64) // minflt, the line's 10th field
	return n
}

// ctxSwitches is the sum of the voluntary and involuntary context switches
// of pid's threads alive now (0 where /proc cannot tell: a diagnostic).
func ctxSwitches(pid int) int64 {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
	}
	return n
}
