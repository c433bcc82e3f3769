package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// The README's generated section lies between these markers; compare
// -readme rewrites what is between them and nothing else.
const (
	measuredBegin = "<!-- measured:begin -->"
	measuredEnd   = "<!-- measured:end -->"
)

// compareConfig bounds one compare run.
type compareConfig struct {
	rounds       int           // c=1 latency rounds (one request per variant each)
	rpsFor       time.Duration // length of one rps run
	rpsReps      int           // rps runs per level and proxy, alternating (median)
	streamRounds int           // 200-event streams per variant
	streamWarm   bool          // a JSON call through the same proxy right before each stream (diagnostic)
	events       int           // content events per stream
	eventGap     time.Duration // the vendor's pause between stream events
	firstPause   time.Duration // the vendor's pause after a stream's first content event (diagnostic)
	streams      int           // streams held open for the RSS figure
	rssReps      int           // fresh starts of every proxy for the RSS figure (median)
	benchN       int           // -benchtime of the allocation benchmark
	cpu, genCPU  string        // cores of the proxies and of the load generator
}

// variant is one proxy under measurement: a child process and the URL an
// app uses to reach the vendor's chat endpoint through it.
type variant struct {
	name  string
	child *detourChild
	url   string
	cl    *http.Client
}

// figures is everything compare reports for one proxy.
type figures struct {
	p50, p99 time.Duration // added over direct, c=1
	// rpsRuns holds each rps run's requests per second by level (16, 64),
	// in order: run i of two proxies were next to each other in time. The
	// figure reported is their median.
	rpsRuns      map[int][]float64
	cpuPerReq    time.Duration // over the rps runs
	busy         float64       // share of its core the proxy used during the rps runs
	allocsJSON   float64       // allocations per request over direct (benchmark)
	allocsStream float64
	// The stream figures: joined, the vendor writing its opening event
	// and first content together; paused, the vendor pausing between
	// them as between all its events.
	joined, paused streamFigures
	rssMiB         float64 // with cfg.streams open streams, median over cfg.rssReps starts
	ready          time.Duration
}

// streamFigures is what the stream phase measures of one proxy with one
// kind of vendor stream.
type streamFigures struct {
	ttft         time.Duration // added p50 time to first content event: way in + first transit
	clientTTFT   time.Duration // added p50 time to first content event as the client saw it
	wayIn        time.Duration // added p50 time from the client's send to the vendor's handler
	firstTransit time.Duration // added p50 transit of the first content event
	perEvent     time.Duration // added stream time per event
}

// streamKind is one kind of vendor stream the stream phase runs.
type streamKind struct {
	name string // in the stream split's lines, and in stream ids
	// join: the vendor writes its opening event and its first content
	// event together (fakevendor.Options.JoinFirst).
	join bool
	figs func(*figures) *streamFigures
}

var streamKinds = []streamKind{
	{"joined", true, func(f *figures) *streamFigures { return &f.joined }},
	{"paused", false, func(f *figures) *streamFigures { return &f.paused }},
}

// joinHeader, on a request from the stream phase, sends it to the vendor
// that writes its opening event and first content together.
const joinHeader = "X-Compare-Join"

// compare runs detour (base-URL mode) and a bare httputil.ReverseProxy with
// a BufferPool as child processes pinned to one core, against one fake
// vendor in this process, with the load generated from another core, and
// reports every figure for both and their ratio.
func compare(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg compareConfig
	fs.IntVar(&cfg.rounds, "rounds", 2000, "c=1 latency rounds")
	fs.DurationVar(&cfg.rpsFor, "rps-for", 2*time.Second, "length of one rps run")
	fs.IntVar(&cfg.rpsReps, "rps-reps", 5, "rps runs per level and proxy, alternating; the median is reported, and the spread of the run-by-run ratios beside it")
	fs.IntVar(&cfg.streamRounds, "stream-rounds", 100, "200-event streams per variant")
	fs.BoolVar(&cfg.streamWarm, "stream-warm", false, "diagnostic, not for the README: call each proxy once, unstreamed, right before each of its streams, so that it serves the stream warm")
	fs.IntVar(&cfg.events, "events", 200, "content events per stream")
	fs.DurationVar(&cfg.eventGap, "event-gap", 200*time.Microsecond, "the vendor's pause between stream events")
	fs.DurationVar(&cfg.firstPause, "first-pause", 0, "diagnostic, not for the README: the vendor's pause after a stream's first content event (instead of -event-gap), so that its second event is not written while the client reads the first (see sendLog)")
	fs.IntVar(&cfg.streams, "streams", 1000, "streams held open for the RSS figure")
	fs.IntVar(&cfg.rssReps, "rss-reps", 5, "fresh starts of every proxy for the RSS figure, whose median is reported")
	fs.IntVar(&cfg.benchN, "bench-n", 300, "requests per variant in the allocation benchmark (0: skip it)")
	fs.StringVar(&cfg.cpu, "cpu", "1", "core the proxies are pinned to (taskset)")
	fs.StringVar(&cfg.genCPU, "gen-cpu", "0", "core of this process: load generator and vendor")
	readme := fs.String("readme", "", "rewrite the section between "+measuredBegin+" and "+measuredEnd+" of this file")
	phases := fs.String("phases", "latency,rps,stream,rss", "phases to run, comma-separated (the allocation benchmark runs unless -bench-n 0)")
	bin := fs.String("detour", "", "detour binary to measure; empty: go build the module's main package")
	before := fs.String("b", "", "a second detour binary, measured beside the first in the same runs as \"before\" (a before/after comparison; its column is not for the README)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.rssReps < 1 {
		cfg.rssReps = 1
	}
	start := time.Now()
	load, _ := os.ReadFile("/proc/loadavg")

	dir, err := os.MkdirTemp("", "detour-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *bin, err = detourBinary(*bin, dir, stderr); err != nil {
		return err
	}
	bareBin, err := bareBinary(dir)
	if err != nil {
		return err
	}
	if cfg.genCPU != "" {
		// Every thread of this process, and those it starts later.
		if out, err := exec.Command("taskset", "-a", "-p", "-c", cfg.genCPU, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
			return fmt.Errorf("taskset: %v: %s", err, out)
		}
	}

	// The allocation benchmark first: it builds a test binary, which must
	// not run beside the timed phases.
	var allocs map[string]float64
	if cfg.benchN > 0 {
		fmt.Fprintln(stderr, "compare: allocation benchmark (go test -bench=AllocsPerRequest ./proxy/)")
		if allocs, err = allocBenchmark(cfg); err != nil {
			return err
		}
	}

	words := strings.TrimSpace(strings.Repeat("word ", cfg.events))
	vendor := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "compare", Text: words, Chunks: cfg.events, EventDelay: cfg.eventGap})
	joined := fakevendor.New(rewrite.OpenAI, fakevendor.Options{Name: "compare", Text: words, Chunks: cfg.events, EventDelay: cfg.eventGap, JoinFirst: true})
	sends := &sendLog{m: map[string][]time.Time{}, entered: map[string]time.Time{}, remote: map[string]string{}, firstPause: cfg.firstPause}
	vsrv := httptest.NewServer(sends.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(joinHeader) != "" {
			joined.ServeHTTP(w, r)
			return
		}
		vendor.ServeHTTP(w, r)
	})))
	defer vsrv.Close()

	pol := fmt.Sprintf(`{
  "listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0",
  "ca": {"cert_file": "ca.pem", "key_file": "ca-key.pem"},
  "upstreams": {"fake": {"shape": "openai", "base_url": "%s/v1", "auth": {"from": "client"}, "timeouts": {"idle": "1h"}}},
  "routes": [{"name": "chat", "match": {"host": "api.openai.com", "path": "/v1/chat/completions"}, "chain": ["fake"]}]
}`, vsrv.URL)
	polPath := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(polPath, []byte(pol), 0o644); err != nil {
		return err
	}
	startAll := func() ([]*variant, error) {
		bc, err := startChild([]string{bareBin, "bare", "-upstream", vsrv.URL}, dir, cfg.cpu, func(line []byte) (string, string, bool) {
			a, ok := bytes.CutPrefix(line, []byte(bareReadyLine))
			return string(a), "", ok
		})
		if err != nil {
			return nil, fmt.Errorf("bare proxy: %w", err)
		}
		vs := []*variant{{name: "bare", child: bc, url: "http://" + bc.listen + "/v1/chat/completions", cl: newClient()}}
		for _, d := range []struct{ name, bin string }{{"detour", *bin}, {"before", *before}} {
			if d.bin == "" {
				continue
			}
			dc, err := startDetour(d.bin, polPath, cfg.cpu, stderr)
			if err != nil {
				for _, v := range vs {
					v.child.stop()
				}
				return nil, fmt.Errorf("%s: %w", d.name, err)
			}
			vs = append(vs, &variant{name: d.name, child: dc, url: "http://" + dc.listen + "/openai/v1/chat/completions", cl: newClient()})
		}
		return vs, nil
	}
	stopAll := func(vs []*variant) {
		for _, v := range vs {
			v.cl.CloseIdleConnections()
			v.child.stop()
		}
	}

	vs, err := startAll()
	if err != nil {
		return err
	}
	defer func() { stopAll(vs) }()
	res := map[string]*figures{}
	for _, v := range vs {
		res[v.name] = &figures{ready: v.child.ready, allocsJSON: allocs["json/"+v.name], allocsStream: allocs["stream/"+v.name]}
	}
	direct := &variant{name: "direct", url: vsrv.URL + "/v1/chat/completions", cl: newClient()}

	run := func(phase string) bool { return slices.Contains(strings.Split(*phases, ","), phase) }
	if run("latency") {
		fmt.Fprintln(stderr, "compare: added latency, c=1")
		if err := latencyPhase(cfg, direct, vs, res); err != nil {
			return err
		}
		vendor.Reset()
	}
	if run("rps") {
		fmt.Fprintln(stderr, "compare: requests per second, c=16 and c=64")
		if err := rpsPhase(cfg, vs, res); err != nil {
			return err
		}
		vendor.Reset()
	}
	if run("stream") {
		fmt.Fprintf(stderr, "compare: time to first token, %d-event streams\n", cfg.events)
		if err := streamPhase(cfg, direct, vs, res, sends, stderr); err != nil {
			return err
		}
		vendor.Reset()
		joined.Reset()
	}
	if !run("rss") {
		md := reportMarkdown(cfg, res, string(bytes.TrimSpace(load)), time.Since(start))
		fmt.Fprint(stdout, md)
		return nil
	}

	// Open streams are measured in fresh processes, so that the heap the
	// load phases grew does not count; their starts are more samples of
	// the time to ready. A proxy's RSS with its streams varies by a few
	// MiB from start to start (where in its collector's cycle the last
	// stream lands), so it is started cfg.rssReps times, in turn with the
	// others, and the median kept.
	vendor.SetDefault(fakevendor.Fault{Kind: fakevendor.StreamStall, Delay: time.Hour})
	fmt.Fprintf(stderr, "compare: RSS with %d open streams, %d starts\n", cfg.streams, cfg.rssReps)
	rss := map[string][]float64{}
	for rep := range cfg.rssReps {
		stopAll(vs)
		if vs, err = startAll(); err != nil {
			return err
		}
		for _, v := range vs {
			res[v.name].ready = min(res[v.name].ready, v.child.ready)
		}
		idle := map[string]sample{}
		for _, v := range vs {
			s, err := v.child.sample()
			if err != nil {
				return err
			}
			idle[v.name] = s
		}
		// The proxies take turns at holding their streams first.
		order := append(slices.Clone(vs[rep%len(vs):]), vs[:rep%len(vs)]...)
		for _, v := range order {
			s, err := holdStreams(v, cfg.streams)
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			rss[v.name] = append(rss[v.name], s.rssMiB)
			i := idle[v.name]
			fmt.Fprintf(stderr, "compare: %s: idle %.1f MiB (anonymous %.1f, file %.1f), %d streams %.1f MiB (anonymous %.1f, file %.1f)\n",
				v.name, i.rssMiB, i.anonMiB, i.fileMiB, cfg.streams, s.rssMiB, s.anonMiB, s.fileMiB)
		}
	}
	for _, v := range vs {
		res[v.name].rssMiB = median(rss[v.name])
	}

	md := reportMarkdown(cfg, res, string(bytes.TrimSpace(load)), time.Since(start))
	fmt.Fprint(stdout, md)
	if *readme != "" {
		return rewriteMeasured(*readme, md)
	}
	return nil
}

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 128, DisableCompression: true}}
}

const (
	chatBody   = `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`
	streamBody = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Say hello."}]}`
)

// sendLog keeps, per stream (by its X-Compare-Id header), when the
// vendor's handler was entered and when it wrote each content event: the
// vendor and the client share this process's clock, so a request's way in
// through a proxy is the handler's entry minus the client's send, and an
// event's transit its arrival time minus its send time.
type sendLog struct {
	mu      sync.Mutex
	m       map[string][]time.Time
	entered map[string]time.Time
	remote  map[string]string // the vendor connection's remote address
	// firstPause, when set, holds the vendor's handler after the flush of
	// a stream's first content event, so that its next event comes that
	// much later. The vendor shares the client's process (and core): a
	// proxy whose first content takes longer than the vendor's event gap
	// to arrive (detour's, with the answer's headers in front of it) has
	// the vendor's write of the second event, and the wake of the proxy
	// it causes, run on the client's core while the client still reads
	// the first, which no remote vendor would do. The stream split counts
	// such streams ("2nd event written before the 1st was read").
	firstPause time.Duration
}

func (l *sendLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Compare-Id")
		if id == "" {
			h.ServeHTTP(w, r)
			return
		}
		tw := &timedWriter{ResponseWriter: w, pause: l.firstPause}
		l.mu.Lock()
		l.entered[id] = time.Now()
		l.remote[id] = r.RemoteAddr
		l.mu.Unlock()
		h.ServeHTTP(tw, r)
		l.mu.Lock()
		l.m[id] = tw.sent
		l.mu.Unlock()
	})
}

func (l *sendLog) take(id string) (entered time.Time, sent []time.Time, remote string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	entered, sent, remote = l.entered[id], l.m[id], l.remote[id]
	delete(l.m, id)
	delete(l.entered, id)
	delete(l.remote, id)
	return entered, sent, remote
}

// timedWriter notes the time of every content event written through it,
// and makes sendLog's first pause.
type timedWriter struct {
	http.ResponseWriter
	sent   []time.Time
	pause  time.Duration
	paused bool
}

func (t *timedWriter) Write(p []byte) (int, error) {
	now := time.Now()
	for range bytes.Count(p, contentMark) {
		t.sent = append(t.sent, now)
	}
	return t.ResponseWriter.Write(p)
}

func (t *timedWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	if t.pause > 0 && !t.paused && len(t.sent) > 0 {
		t.paused = true
		time.Sleep(t.pause)
	}
}

func (t *timedWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// call makes one non-streaming chat request and reads the answer whole.
func (v *variant) call(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, v.url, strings.NewReader(chatBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-compare")
	resp, err := v.cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", v.name, resp.StatusCode)
	}
	return nil
}

// contentMark is in every content event of the fake's OpenAI stream.
var contentMark = []byte(`"delta":{"content":"`)

// stream makes one streaming request, tagged id for the vendor's send
// log, and returns when it was sent and the arrival time of every content
// event; c gets the client's other times (streamsplit.go). join asks for
// the vendor that writes its opening event and first content together.
func (v *variant) stream(id string, join bool, c *streamClock) (start time.Time, arrived []time.Time, err error) {
	req, _ := http.NewRequestWithContext(c.trace(context.Background()), http.MethodPost, v.url, strings.NewReader(streamBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-compare")
	req.Header.Set("X-Compare-Id", id)
	if join {
		req.Header.Set(joinHeader, "1")
	}
	start = time.Now()
	resp, err := v.cl.Do(req)
	if err != nil {
		return start, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return start, nil, fmt.Errorf("%s: status %d", v.name, resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadSlice('\n')
		if bytes.Contains(line, contentMark) {
			arrived = append(arrived, time.Now())
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return start, nil, err
		}
	}
	if len(arrived) == 0 {
		return start, nil, fmt.Errorf("%s: stream without content", v.name)
	}
	return start, arrived, nil
}

// latencyPhase calls direct and every proxy once per round, in a new
// random order each round, and keeps what each proxy adds over direct.
func latencyPhase(cfg compareConfig, direct *variant, vs []*variant, res map[string]*figures) error {
	all := append([]*variant{direct}, vs...)
	lat := map[string][]time.Duration{}
	rng := rand.New(rand.NewPCG(1, 2))
	for r := -50; r < cfg.rounds; r++ { // 50 warm-up rounds
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		for _, v := range all {
			t := time.Now()
			if err := v.call(context.Background()); err != nil {
				return err
			}
			if r >= 0 {
				lat[v.name] = append(lat[v.name], time.Since(t))
			}
		}
	}
	for _, v := range vs {
		res[v.name].p50 = pct(lat[v.name], 50) - pct(lat["direct"], 50)
		res[v.name].p99 = pct(lat[v.name], 99) - pct(lat["direct"], 99)
	}
	return nil
}

// rpsPhase runs closed-loop load at c=16 and c=64 against each proxy in
// turn (cfg.rpsReps times each, alternating), and its CPU time from /proc.
func rpsPhase(cfg compareConfig, vs []*variant, res map[string]*figures) error {
	cpu := map[string]time.Duration{}
	reqs := map[string]int64{}
	wall := map[string]time.Duration{}
	for _, c := range []int{16, 64} {
		got := map[string][]float64{}
		for range max(cfg.rpsReps, 1) {
			for _, v := range vs {
				before, err := cpuTime(v.child.pid())
				if err != nil {
					return err
				}
				n, d, err := closedLoop(v, c, cfg.rpsFor)
				if err != nil {
					return err
				}
				after, err := cpuTime(v.child.pid())
				if err != nil {
					return err
				}
				cpu[v.name] += after - before
				reqs[v.name] += n
				wall[v.name] += d
				got[v.name] = append(got[v.name], float64(n)/d.Seconds())
			}
		}
		for _, v := range vs {
			if res[v.name].rpsRuns == nil {
				res[v.name].rpsRuns = map[int][]float64{}
			}
			res[v.name].rpsRuns[c] = got[v.name]
		}
	}
	for _, v := range vs {
		res[v.name].cpuPerReq = cpu[v.name] / time.Duration(reqs[v.name])
		res[v.name].busy = cpu[v.name].Seconds() / wall[v.name].Seconds()
	}
	return nil
}

// closedLoop runs c workers calling v back to back for d, and returns how
// many calls finished and how long it took.
func closedLoop(v *variant, c int, d time.Duration) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := v.call(ctx); err != nil {
					if ctx.Err() == nil {
						firstErr.CompareAndSwap(nil, err)
						cancel()
					}
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if err, ok := firstErr.Load().(error); ok {
		return 0, 0, err
	}
	return n.Load(), el, nil
}

// streamPhase streams cfg.events content events through direct and every
// proxy, interleaved, from both kinds of vendor stream (streamKinds), and
// keeps each proxy's time to first content and per-event transit (the
// median over a stream's events of arrival minus send) over direct's.
func streamPhase(cfg compareConfig, direct *variant, vs []*variant, res map[string]*figures, sends *sendLog, stderr io.Writer) error {
	all := append([]*variant{direct}, vs...)
	type key struct{ kind, name string }
	ttft := map[key][]time.Duration{}
	clientTTFT := map[key][]time.Duration{}
	wayIn := map[key][]time.Duration{}
	per := map[key][]time.Duration{}
	first := map[key][]time.Duration{}
	splits := map[string]*streamSplit{}
	for _, k := range streamKinds {
		splits[k.name] = newStreamSplit()
	}
	kinds := slices.Clone(streamKinds)
	usage, err := startStreamUsage(vs)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for r := -5; r < cfg.streamRounds; r++ {
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, k := range kinds {
			rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
			for _, v := range all {
				id := fmt.Sprintf("%s-%s-%d", v.name, k.name, r)
				if cfg.streamWarm {
					// A proxy idle since its last stream (two other streams
					// ago, on average) serves the next one with cold caches on
					// a core other processes used meanwhile; this call shows
					// how much of its way in that is.
					if err := v.call(context.Background()); err != nil {
						return err
					}
				}
				var clock streamClock
				start, arrived, err := v.stream(id, k.join, &clock)
				if err != nil {
					return err
				}
				entered, sent, remote := sends.take(id)
				if len(arrived) != cfg.events || len(sent) != cfg.events {
					return fmt.Errorf("%s: %d content events sent, %d arrived; want %d", v.name, len(sent), len(arrived), cfg.events)
				}
				if r < 0 {
					continue
				}
				transit := make([]time.Duration, len(sent))
				for i := range sent {
					transit[i] = arrived[i].Sub(sent[i])
				}
				// What a proxy adds to the time to first token is its
				// part of the way in and of the first content's way back.
				// The vendor's own time between the two is not the
				// proxy's: here it shares a process with the client, so
				// its 200 µs pauses (Go timers that an idle process
				// serves late, at the 1 ms grain of epoll_wait) end sooner
				// when the proxy sends the client something during them,
				// as a proxy that does not hold the opening events does.
				in := entered.Sub(start)
				kv := key{k.name, v.name}
				wayIn[kv] = append(wayIn[kv], in)
				ttft[kv] = append(ttft[kv], in+transit[0])
				clientTTFT[kv] = append(clientTTFT[kv], arrived[0].Sub(start))
				per[kv] = append(per[kv], pct(transit, 50))
				first[kv] = append(first[kv], transit[0])
				splits[k.name].add(v.name, start, entered, &clock, sent, arrived, remote)
			}
		}
	}
	for _, k := range streamKinds {
		d := key{k.name, "direct"}
		for _, v := range vs {
			kv := key{k.name, v.name}
			f := k.figs(res[v.name])
			f.ttft = pct(ttft[kv], 50) - pct(ttft[d], 50)
			f.clientTTFT = pct(clientTTFT[kv], 50) - pct(clientTTFT[d], 50)
			f.wayIn = pct(wayIn[kv], 50) - pct(wayIn[d], 50)
			f.perEvent = pct(per[kv], 50) - pct(per[d], 50)
			f.firstTransit = pct(first[kv], 50) - pct(first[d], 50)
		}
		splits[k.name].print(stderr, k.name)
	}
	return usage.print(stderr, (cfg.streamRounds+5)*cfg.events*len(streamKinds), (cfg.streamRounds+5)*len(streamKinds))
}

// holdStreams opens n streams through v, waits until each has its first
// content event, and samples the child's RSS while they are all held.
func holdStreams(v *variant, n int) (sample, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: every stream is closed before the next proxy's turn
	committed := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, v.url, strings.NewReader(streamBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-compare")
			resp, err := client.Do(req)
			if err != nil {
				committed <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				committed <- fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			r := bufio.NewReader(resp.Body)
			for {
				line, err := r.ReadSlice('\n')
				if bytes.Contains(line, contentMark) {
					break
				}
				if err != nil && err != bufio.ErrBufferFull {
					committed <- fmt.Errorf("stream ended before its first content: %w", err)
					return
				}
			}
			committed <- nil
			_, _ = io.Copy(io.Discard, r) // hold until cancelled
		}()
	}
	deadline := time.After(time.Minute)
	for i := range n {
		select {
		case err := <-committed:
			if err != nil {
				return sample{}, fmt.Errorf("stream %d: %w", i, err)
			}
		case <-deadline:
			return sample{}, fmt.Errorf("only %d of %d streams committed within 1m", i, n)
		}
	}
	defer cancel()
	return v.child.sample()
}

// cpuTime is a process's user plus system CPU time, from /proc/pid/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces; fields count from
	// after it. utime and stime are fields 14 and 15 of the line.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on every Linux build Go supports
	return time.Duration(ut+st) * time.Second / clkTck, nil
}

// benchLine matches one line of the allocation benchmark's output.
var benchLine = regexp.MustCompile(`^BenchmarkAllocsPerRequest/(\w+)/(\w+)\S*\s+\d+\s+[\d.]+ ns/op\s+\d+ B/op\s+(\d+) allocs/op`)

// allocBenchmark runs proxy's BenchmarkAllocsPerRequest once, pinned to the
// proxies' core (allocation counts do not vary between runs, unlike times),
// and returns, per "kind/proxy", the allocations per request beyond a
// direct call's.
func allocBenchmark(cfg compareConfig) (map[string]float64, error) {
	args := []string{"go", "test", "-run=^$", "-bench=AllocsPerRequest", "-benchtime=" + strconv.Itoa(cfg.benchN) + "x", "-count=1", "./proxy/"}
	if cfg.cpu != "" {
		args = append([]string{"taskset", "-c", cfg.cpu}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	runs := map[string][]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.ParseFloat(m[3], 64)
		runs[m[1]+"/"+m[2]] = append(runs[m[1]+"/"+m[2]], n)
	}
	res := map[string]float64{}
	for _, kind := range []string{"json", "stream"} {
		d := median(runs[kind+"/direct"])
		for _, p := range []string{"bare", "detour"} {
			if len(runs[kind+"/"+p]) == 0 {
				return nil, fmt.Errorf("no %s/%s figure in the benchmark's output:\n%s", kind, p, out)
			}
			res[kind+"/"+p] = median(runs[kind+"/"+p]) - d
		}
	}
	return res, nil
}

func pct(l []time.Duration, p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// reportMarkdown formats the figures as the README's generated section.
func reportMarkdown(cfg compareConfig, res map[string]*figures, load string, took time.Duration) string {
	d, b := res["detour"], res["bare"]
	var w strings.Builder
	us := func(t time.Duration) string {
		return strconv.FormatFloat(float64(t.Nanoseconds())/1e3, 'f', 0, 64) + " µs"
	}
	ratio := func(x, y float64) string {
		if y <= 0 || x < 0 { // a ratio of a figure within noise of zero means nothing
			return "–"
		}
		return strconv.FormatFloat(x/y, 'f', 2, 64)
	}
	check := func(x, y, limit float64, atLeast bool) string {
		if y == 0 {
			return "–"
		}
		r := x / y
		ok := r <= limit
		if atLeast {
			ok = r >= limit
		}
		op := "≤"
		if atLeast {
			op = "≥"
		}
		if ok {
			return op + " " + strconv.FormatFloat(limit, 'f', 2, 64) + ": met"
		}
		return op + " " + strconv.FormatFloat(limit, 'f', 2, 64) + ": **not met**"
	}
	bf := res["before"]
	// row writes one figure of each proxy (x of its figures, formatted by
	// f), their ratio and its target; with -b, the before binary's figure
	// and its ratio to the bare proxy's follow.
	row := func(name string, x func(*figures) float64, f func(float64) string, target func(x, y float64) string) {
		t := ""
		if target != nil {
			t = target(x(d), x(b))
		}
		fmt.Fprintf(&w, "| %s | %s | %s | %s | %s |", name, f(x(d)), f(x(b)), ratio(x(d), x(b)), t)
		if bf != nil {
			if v := x(bf); v != 0 {
				fmt.Fprintf(&w, " %s | %s |", f(v), ratio(v, x(b)))
			} else {
				w.WriteString(" – | – |")
			}
		}
		w.WriteString("\n")
	}
	atMost := func(limit float64) func(x, y float64) string {
		return func(x, y float64) string { return check(x, y, limit, false) }
	}
	atLeast := func(limit float64) func(x, y float64) string {
		return func(x, y float64) string { return check(x, y, limit, true) }
	}
	dur := func(t func(*figures) time.Duration) func(*figures) float64 {
		return func(f *figures) float64 { return float64(t(f)) }
	}
	usf := func(x float64) string { return us(time.Duration(x)) }
	f1 := func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
	f0 := func(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }
	mib := func(x float64) string { return f1(x) + " MiB" }
	fmt.Fprintln(&w, measuredBegin)
	fmt.Fprintln(&w, "<!-- generated by `go run ./internal/loadharness compare -readme README.md`; do not edit by hand -->")
	fmt.Fprintln(&w)
	fmt.Fprintf(&w, "detour (base-URL mode, log at info, metrics on) beside a bare `httputil.ReverseProxy` with a BufferPool, "+
		"both as child processes pinned to core %s, each run from an executable file of its own (the bare proxy from a copy of "+
		"the harness's, whose code the harness would otherwise keep warm for it), plain HTTP to one fake OpenAI vendor on "+
		"loopback; the vendor and the load generator run in the harness, pinned to core %s. Added figures are over a direct call to the vendor in the same run. "+
		"Machine: %d cores, load average at start %s (other work running); run took %s.\n\n",
		cfg.cpu, cfg.genCPU, runtime.NumCPU(), load, took.Round(time.Second))
	if bf != nil {
		fmt.Fprintln(&w, "| | detour | bare proxy | detour/bare | target | before (-b) | before/bare |")
		fmt.Fprintln(&w, "|---|---|---|---|---|---|---|")
	} else {
		fmt.Fprintln(&w, "| | detour | bare proxy | detour/bare | target |")
		fmt.Fprintln(&w, "|---|---|---|---|---|")
	}
	row("added latency p50, c=1", dur(func(f *figures) time.Duration { return f.p50 }), usf, nil)
	row("added latency p99, c=1", dur(func(f *figures) time.Duration { return f.p99 }), usf, nil)
	row("requests/s, c=16", func(f *figures) float64 { return median(f.rpsRuns[16]) }, f0, atLeast(1.0))
	row("requests/s, c=64", func(f *figures) float64 { return median(f.rpsRuns[64]) }, f0, atLeast(1.0))
	row("CPU per request", dur(func(f *figures) time.Duration { return f.cpuPerReq }), usf, nil)
	row("allocations per request, JSON", func(f *figures) float64 { return f.allocsJSON }, f0, atMost(1.1))
	row(fmt.Sprintf("allocations per request, %d-event stream", cfg.events), func(f *figures) float64 { return f.allocsStream }, f0, atMost(1.1))
	j := func(t func(*streamFigures) time.Duration) func(*figures) float64 {
		return dur(func(f *figures) time.Duration { return t(&f.joined) })
	}
	p := func(t func(*streamFigures) time.Duration) func(*figures) float64 {
		return dur(func(f *figures) time.Duration { return t(&f.paused) })
	}
	ttft := func(s *streamFigures) time.Duration { return s.ttft }
	wayIn := func(s *streamFigures) time.Duration { return s.wayIn }
	firstTransit := func(s *streamFigures) time.Duration { return s.firstTransit }
	clientTTFT := func(s *streamFigures) time.Duration { return s.clientTTFT }
	perEvent := func(s *streamFigures) time.Duration { return s.perEvent }
	row(fmt.Sprintf("added time to first token, %d-event stream, opening and first content written together (p50)", cfg.events), j(ttft), usf, atMost(1.1))
	row("… its way in of the request (p50)", j(wayIn), usf, nil)
	row("… its transit of the first content event (p50)", j(firstTransit), usf, nil)
	row("… its per-event transit (p50)", j(perEvent), usf, nil)
	row("informational, the vendor pausing after its opening event: added time to first token (p50)", p(ttft), usf, nil)
	row("… its way in of the request (p50)", p(wayIn), usf, nil)
	row("… its transit of the first content event (p50)", p(firstTransit), usf, nil)
	row("… its time to first token as the client saw it, vendor's time included (p50)", p(clientTTFT), usf, nil)
	row("… its per-event transit (p50)", p(perEvent), usf, nil)
	row(fmt.Sprintf("RSS with %d open streams (median of %d starts)", cfg.streams, cfg.rssReps), func(f *figures) float64 { return f.rssMiB }, mib, atMost(1.15))
	row("time to ready", dur(func(f *figures) time.Duration { return f.ready }), usf, nil)
	fmt.Fprintln(&w)
	fmt.Fprintf(&w, "Latency: %d rounds, one call per variant each in a new random order. Requests/s: closed loop, "+
		"%d runs of %s per level and proxy, alternating, median%s; the proxies used %.0f%% (detour) and %.0f%% (bare) of their core "+
		"over those runs, which CPU per request is measured over (/proc utime+stime). Allocations: "+
		"`go test -bench=AllocsPerRequest ./proxy/` (%d requests; the counts do not vary between runs), the same two proxies in one process, "+
		"minus a direct call's allocations (client and vendor). Streams: %d per variant and kind of stream, the vendor pausing %s between events; an event's transit is "+
		"its arrival at the client minus its write by the vendor (one clock), the median over a stream's %d events, then over streams; "+
		"the added time to first token is the sum, per stream, of the request's way in (the client's send to the vendor's handler) and the first content event's transit. "+
		"detour holds the answer's headers and opening event until the first content event arrives (its commit point: a failure before any content "+
		"can still fall over unseen), and the app then gets them together, no later than it would have seen that content itself. "+
		"The target row's vendor writes its opening event and first content event together, with one flush, so that both proxies deliver the headers "+
		"and the first content together and nothing is held: its figure is what detour adds beyond that designed hold. "+
		"The informational rows' vendor pauses after its opening event as between all its events, as a vendor that answers before its first token is ready; "+
		"there the vendor's own time between the two is left out of the added time to first token: in this harness the vendor shares the client's process, whose idle Go timers fire late "+
		"(epoll_wait's 1 ms grain), so its pauses end sooner while a proxy forwards something during them, as the bare proxy forwards the opening event "+
		"that detour holds; the row \"as the client saw it\" keeps that time in. RSS: fresh processes, each stream held after its first "+
		"content event, the median of %d starts of each proxy, taking turns. Time to ready: process start to its listening line, the fastest of its starts.\n",
		cfg.rounds, max(cfg.rpsReps, 1), cfg.rpsFor, rpsSpread(d, b), 100*d.busy, 100*b.busy, cfg.benchN, cfg.streamRounds, cfg.eventGap, cfg.events, cfg.rssReps)
	fmt.Fprintln(&w)
	fmt.Fprintln(&w, "```sh")
	fmt.Fprintln(&w, "go run ./internal/loadharness compare            # prints this section")
	fmt.Fprintln(&w, "go run ./internal/loadharness compare -readme README.md")
	fmt.Fprintln(&w, "```")
	fmt.Fprintln(&w, measuredEnd)
	return w.String()
}

// rewriteMeasured replaces the section between the markers in path.
func rewriteMeasured(path, md string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i := strings.Index(s, measuredBegin)
	j := strings.Index(s, measuredEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section", path, measuredBegin, measuredEnd)
	}
	s = s[:i] + strings.TrimSuffix(md, "\n") + s[j+len(measuredEnd):]
	return os.WriteFile(path, []byte(s), 0o644)
}

// rpsSpread tells how far apart detour's and the bare proxy's runs were:
// the lowest and highest ratio of runs that were next to each other in
// time, per level. On a shared machine one run can be a quarter off its
// neighbour, and a median of a few says less than it seems.
func rpsSpread(d, b *figures) string {
	var parts []string
	for _, c := range []int{16, 64} {
		dr, br := d.rpsRuns[c], b.rpsRuns[c]
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := range min(len(dr), len(br)) {
			if br[i] <= 0 {
				continue
			}
			r := dr[i] / br[i]
			lo, hi = math.Min(lo, r), math.Max(hi, r)
		}
		if lo <= hi {
			parts = append(parts, fmt.Sprintf("c=%d %.2f–%.2f", c, lo, hi))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (detour/bare of runs next to each other: " + strings.Join(parts, ", ") + ")"
}
