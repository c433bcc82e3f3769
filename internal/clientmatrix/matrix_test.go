package clientmatrix

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/devrun"
	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/rewrite"
)

// roleEnv, set in a child's environment, makes this test binary play
// another part instead of running tests: the Go app ("go-app"), or, inside
// a network namespace, detour serving transparently ("serve") or `detour
// redirect` ("redirect"). Re-executing the test binary, which is linked
// anyway, saves building other programs on every run.
const roleEnv = "DETOUR_CLIENTMATRIX_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		testsupport.Main(m)
	case "go-app":
		os.Exit(goApp(os.Args[1:]))
	default:
		os.Exit(namespaceRole(os.Getenv(roleEnv), os.Args[1:]))
	}
}

// kase is one column of the matrix.
type kase struct {
	name string
	kind string // what the app is asked for: "answer" or "stream"
	// primary is the primary vendor's fault; the backup always answers.
	primary fakevendor.Fault
}

// cases: a failover (the primary's quota is exhausted: OpenAI's 429
// insufficient_quota, and each other vendor's own way of saying it), a
// stream delivered incrementally, and the vendor's 400 passed to the app as
// it is (invalid_request stops the chain).
var cases = []kase{
	{name: "failover", kind: "answer", primary: fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassInsufficientQuota}},
	{name: "stream", kind: "stream"},
	{name: "error", kind: "answer", primary: fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassInvalidRequest}},
}

// streamLines is what every app prints for the primary's stream: the fake's
// "Hello from primary." in its three deltas.
var streamLines = []string{`delta "Hello"`, `delta " from"`, `delta " primary."`, "done"}

// want is what the app must print for case k.
func (c *client) want(k kase) []string {
	switch k.name {
	case "failover":
		return []string{"answer Hello from backup."}
	case "stream":
		return streamLines
	}
	return []string{c.wantError}
}

// stallAfter is how long the stream case waits, after one delta, for the
// app to print the next before it calls the stream stalled: far beyond the
// milliseconds between two deltas on a busy machine, well within the apps'
// own 60s timeouts.
const stallAfter = 30 * time.Second

// cell is one app × case of a way in, with its own fake vendors: each cell
// sees only its own calls, and the primary's cooldown after a quota failure
// touches no other cell.
type cell struct {
	client          *client
	kase            kase
	model           string // the model the app asks for, which selects the cell's upstreams
	primary, backup *fakevendor.Vendor
	gate            *fakevendor.Gate // the primary's, for the stream case
	primaryName     string
	backupName      string
	primaryBase     string
	backupBase      string
}

// world is the fake vendors of one way in: every cell's primary and backup
// behind one TLS server (a path prefix per upstream), and detour's CA.
type world struct {
	dir      string // policy files and detour's CA
	caCert   string
	caKey    string
	ca       *mitm.CA
	vendorCA string // the fake vendors' CA, for the upstreams' ca_file
	cells    []*cell
}

// newWorld starts the fake vendors of every client × case on ip and
// creates detour's CA (once, so that detours started in parallel share it).
func newWorld(t *testing.T, ip string, cls []*client) *world {
	t.Helper()
	// Readable by every process of the test, in and out of the namespace.
	dir := t.TempDir()
	w := &world{dir: dir, caCert: filepath.Join(dir, "ca.pem"), caKey: filepath.Join(dir, "ca-key.pem")}
	ca, _, _, err := mitm.LoadOrCreate(w.caCert, w.caKey)
	if err != nil {
		t.Fatal(err)
	}
	w.ca = ca

	// The vendors' own CA and a certificate for ip, signed as detour signs
	// its leaves.
	vca, err := mitm.Generate()
	if err != nil {
		t.Fatal(err)
	}
	w.vendorCA = filepath.Join(dir, "vendor-ca.pem")
	if err := os.WriteFile(w.vendorCA, vca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	signer, err := mitm.NewSigner(vca, 0)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := signer.Certificate(ip)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := &http.Server{Handler: mux}
	srv.TLSConfig = tlsConfig(cert)
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	base := "https://" + ln.Addr().String()

	for _, c := range cls {
		for _, k := range cases {
			cl := &cell{client: c, kase: k, model: "m-" + c.name + "-" + k.name}
			cl.primaryName, cl.backupName = c.name+"-"+k.name+"-primary", c.name+"-"+k.name+"-backup"
			cl.primary = fakevendor.New(c.shape, fakevendor.Options{Name: "primary"})
			cl.primary.SetDefault(k.primary)
			cl.backup = fakevendor.New(c.shape, fakevendor.Options{Name: "backup"})
			var primary http.Handler = cl.primary
			if k.kind == "stream" {
				cl.gate = fakevendor.NewGate(cl.primary)
				t.Cleanup(cl.gate.Open)
				primary = cl.gate
			}
			mux.Handle("/"+cl.primaryName+"/", http.StripPrefix("/"+cl.primaryName, primary))
			mux.Handle("/"+cl.backupName+"/", http.StripPrefix("/"+cl.backupName, cl.backup))
			cl.primaryBase, cl.backupBase = base+"/"+cl.primaryName, base+"/"+cl.backupName
			if c.shape == rewrite.OpenAI {
				cl.primaryBase += "/v1"
				cl.backupBase += "/v1"
			}
			w.cells = append(w.cells, cl)
		}
	}
	return w
}

// routeOf is each vendor's route: the host the app calls and its path.
var routeOf = map[rewrite.Shape][2]string{
	rewrite.OpenAI:    {"api.openai.com", "/v1/chat/completions"},
	rewrite.Anthropic: {"api.anthropic.com", "/v1/messages"},
	rewrite.Gemini:    {"generativelanguage.googleapis.com", "/v1beta/models/*"},
}

// policy writes a policy over cells to name in w.dir and returns its path:
// per vendor host one route whose chain holds each cell's primary and
// backup, in turn. Each upstream maps only its cell's model, so a request
// is tried on its own cell's pair alone (the others are skipped for want of
// a model mapping). extra adds top-level fields (the transparent section).
func (w *world) policy(t *testing.T, name string, cells []*cell, extra map[string]any) string {
	t.Helper()
	upstreams := map[string]any{}
	chains := map[rewrite.Shape][]string{}
	for _, cl := range cells {
		for _, u := range [][2]string{{cl.primaryName, cl.primaryBase}, {cl.backupName, cl.backupBase}} {
			upstreams[u[0]] = map[string]any{
				"shape": string(cl.client.shape), "base_url": u[1], "ca_file": w.vendorCA,
				"auth": map[string]any{"none": true}, "models": map[string]string{cl.model: cl.model},
			}
			chains[cl.client.shape] = append(chains[cl.client.shape], u[0])
		}
	}
	var routes []any
	for _, shape := range []rewrite.Shape{rewrite.OpenAI, rewrite.Anthropic, rewrite.Gemini} {
		if len(chains[shape]) == 0 {
			continue
		}
		r := routeOf[shape]
		routes = append(routes, map[string]any{
			"name": string(shape), "match": map[string]string{"host": r[0], "path": r[1]}, "chain": chains[shape],
		})
	}
	pol := map[string]any{
		"version": "clientmatrix", "admin_listen": "off",
		"ca":        map[string]string{"cert_file": w.caCert, "key_file": w.caKey},
		"upstreams": upstreams, "routes": routes,
	}
	for k, v := range extra {
		pol[k] = v
	}
	data, err := json.MarshalIndent(pol, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(w.dir, name+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// appEnv is the environment every app starts from: nothing of the test
// process's that could point a client elsewhere (proxies, base URLs, CA
// bundles), the dummy keys, and what the runtimes need to run at all.
func appEnv(extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8",
		"OPENAI_API_KEY=" + openaiKey, "ANTHROPIC_API_KEY=" + anthropicKey, "GEMINI_API_KEY=" + geminiKey,
		roleEnv + "=go-app",
		// Under -race the Go app would sleep a second at exit.
		testsupport.ChildGORACE(),
	}
	return append(env, extra...)
}

// way runs an app's argv (with env) through detour. It returns the app's
// exit status and detour's log, once it holds the request lines of every
// cell (a record is written when detour's handler returns, which may be
// after the app has read its answer).
type way struct {
	world *world
	run   func(t *testing.T, c *client, cells []*cell, argv, env []string, stdout io.Writer) (exit int, detourLog string)
	// mode is the record's mode for an app.
	mode func(c *client) string
	// env, when set, returns what is added to appEnv for an app.
	env func(c *client) []string
}

// appRun is what one app process printed for each of its cells, and how
// it ended.
type appRun struct {
	out     map[*cell][]string
	stalled map[*cell]int // deltas printed when a stream stalled
	exit    int
	report  string // the app's argv and output and detour's log, for failures
	// detourLog is detour's log of the run (in transparent mode, its
	// lines and this run's requests).
	detourLog string
}

// runClient runs one app once for its cells of a way in (the failover,
// the stream and the error, one call each, in turn), then checks each cell
// in a subtest of its own: what the app printed for it, what the cell's
// fake vendors saw, and what detour recorded. One process per app and way
// keeps the matrix's time to that of starting each runtime twice.
func runClient(t *testing.T, wy *way, c *client, cells []*cell, fx *fixtures) {
	t.Helper()
	checkCells(t, wy, c, cells, runApp(t, wy, c, cells, fx))
}

// runApp runs the app of c (or of c's group) once through wy, for cells
// (in a group, every app's), and returns what it printed for each.
func runApp(t *testing.T, wy *way, c *client, cells []*cell, fx *fixtures) *appRun {
	t.Helper()
	isDelta := c.isDelta
	if isDelta == nil {
		isDelta = func(l string) bool { return strings.HasPrefix(l, "delta ") }
	}
	byModel := map[string]*cell{}
	calls := make([][2]string, len(cells))
	for i, cl := range cells {
		byModel[cl.model] = cl
		calls[i] = [2]string{cl.kase.kind, cl.model}
	}
	// The app's lines go to the cell of the call they belong to. For the
	// stream cell they also drive the incremental proof: its primary
	// writes delta N+1 only once the app has printed delta N (and the
	// rest once it has printed the last). Anything between them that held
	// the stream back (a proxy buffering it, a client reading it whole)
	// would wait for ever for delta N+1; after stallAfter of silence the
	// gate gives up, opens, and the cell fails saying so.
	lines := newLineWriter()
	out := map[*cell][]string{}
	stalled := map[*cell]int{} // deltas printed when the stream stalled
	routed := make(chan struct{})
	go func() {
		defer close(routed)
		var cur *cell
		next := 0 // headerless apps: the index of the call under way
		if c.headerless {
			cur = cells[0]
		}
		deltas := 0
		var stall <-chan time.Time // timed from each delta
		for {
			select {
			case l, ok := <-lines.c:
				if !ok {
					return
				}
				if m, ok := strings.CutPrefix(l, "case "); ok && !c.headerless {
					cur, deltas, stall = byModel[m], 0, nil
					continue
				}
				if cur == nil {
					continue
				}
				out[cur] = append(out[cur], l)
				if cur.gate != nil && isDelta(l) {
					deltas++
					cur.gate.Release()
					if deltas == len(streamLines)-1 {
						cur.gate.Open()
					}
					stall = time.After(stallAfter)
				}
				if c.headerless && strings.HasPrefix(l, "status=") {
					next++
					cur, deltas, stall = nil, 0, nil
					if next < len(cells) {
						cur = cells[next]
					}
				}
			case <-stall:
				if deltas < len(streamLines)-1 {
					stalled[cur] = deltas
				}
				cur.gate.Open()
				stall = nil
			}
		}
	}()
	var argv []string
	if c.group != nil {
		argv = c.group.command(fx, cells)
	} else {
		argv = c.command(fx, calls)
	}
	var extra []string
	if wy.env != nil {
		extra = wy.env(c)
	}
	exit, detourLog := wy.run(t, c, cells, argv, appEnv(extra...), lines)
	lines.Close()
	<-routed
	raw := lines.Lines()
	report := fmt.Sprintf("app: %s\napp printed:\n%s\ndetour's log:\n%s", strings.Join(argv, " "), strings.Join(raw, "\n"), detourLog)
	return &appRun{out: out, stalled: stalled, exit: exit, report: report, detourLog: detourLog}
}

// checkCells checks what run printed for each of c's cells, and the app's
// exit status.
func checkCells(t *testing.T, wy *way, c *client, cells []*cell, run *appRun) {
	t.Helper()
	out, stalled, report, detourLog := run.out, run.stalled, run.report, run.detourLog
	if run.exit != 0 {
		t.Errorf("app exited %d; want 0\n%s", run.exit, report)
	}
	for _, cl := range cells {
		k := cl.kase
		t.Run(k.name, func(t *testing.T) {
			got := out[cl]
			if c.normalize != nil {
				got = c.normalize(k.kind, got)
			}
			if n, ok := stalled[cl]; ok {
				t.Errorf("the stream did not reach the app incrementally: after %d delta(s) it printed nothing for %v while the vendor held the next event until it did\n%s", n, stallAfter, report)
			}
			if want := c.want(k); !slices.Equal(got, want) {
				t.Fatalf("app printed (normalized) %q; want %q\n%s", got, want, report)
			}
			wantBackup := 0
			if k.name == "failover" {
				wantBackup = 1
			}
			if p, b := cl.primary.Calls(), cl.backup.Calls(); p != 1 || b != wantBackup {
				t.Errorf("calls: primary %d, backup %d; want 1 and %d\n%s", p, b, wantBackup, report)
			}
			records := requestLines(detourLog, cl.model)
			if len(records) != 1 {
				t.Fatalf("detour logged %d requests for model %s; want 1\n%s", len(records), cl.model, report)
			}
			r := records[0]
			wantBy := map[string]string{"failover": cl.backupName, "stream": cl.primaryName, "error": ""}[k.name]
			if r["mode"] != wy.mode(c) || r["answered_by"] != wantBy {
				t.Errorf("detour's record: mode %v, answered_by %v; want %s and %q\n%s", r["mode"], r["answered_by"], wy.mode(c), wantBy, report)
			}
			if k.name == "failover" {
				if a := firstTried(r); a["upstream"] != cl.primaryName || a["class"] != "quota_exhausted" {
					t.Errorf("detour's first attempt: %v; want %s failing with quota_exhausted", a, cl.primaryName)
				}
			}
		})
	}
}

// waitRequestLines waits until log holds a request line for every cell,
// or 15s.
func waitRequestLines(log *testsupport.SyncBuffer, cells []*cell) {
	log.Wait(15*time.Second, func(s string) bool {
		for _, cl := range cells {
			if len(requestLines(s, cl.model)) == 0 {
				return false
			}
		}
		return true
	})
}

// firstTried is a record's first attempt that was sent (the other cells'
// upstreams are skipped for want of a model mapping).
func firstTried(r map[string]any) map[string]any {
	as, _ := r["attempts"].([]any)
	for _, a := range as {
		if m, ok := a.(map[string]any); ok && m["outcome"] != "skipped" {
			return m
		}
	}
	return nil
}

// requestLines returns detour's "request" log lines for model.
func requestLines(log, model string) []map[string]any {
	var out []map[string]any
	for _, s := range strings.Split(log, "\n") {
		// A line that names neither is none of them: parsing it would only
		// cost (the log is read again on each write while a test waits).
		if !strings.Contains(s, `"request"`) || !strings.Contains(s, model) {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil && m["message"] == "request" && m["model"] == model {
			out = append(out, m)
		}
	}
	return out
}

// TestClientMatrix runs every app × case under `detour run` and in
// transparent mode (root only). Every app is unmodified: it calls the real
// vendor host with a dummy key and is told nothing of detour beyond what
// the way in gives it.
func TestClientMatrix(t *testing.T) {
	t.Parallel()
	fx := newFixtures(t)
	t.Cleanup(fx.finish)
	cls := clients()
	ways := []struct {
		name string
		make func(*testing.T, []*client) *way
	}{{"detour_run", detourRunWay}, {"transparent", transparentWay}}
	for _, mk := range ways {
		t.Run(mk.name, func(t *testing.T) {
			t.Parallel()
			wy := mk.make(t, cls)
			groups := map[*appGroup]*groupRun{}
			for _, c := range cls {
				mine := wy.world.cellsOf(c)
				if c.group != nil && groups[c.group] == nil {
					groups[c.group] = &groupRun{}
				}
				g := groups[c.group]
				t.Run(c.name, func(t *testing.T) {
					c.require(t, fx)
					t.Parallel()
					if g == nil {
						runClient(t, wy, c, mine, fx)
						return
					}
					checkCells(t, wy, c, mine, g.get(t, wy, c.group, cls, fx))
				})
			}
		})
	}
}

// cellsOf returns c's cells.
func (w *world) cellsOf(c *client) []*cell {
	var mine []*cell
	for _, cl := range w.cells {
		if cl.client == c {
			mine = append(mine, cl)
		}
	}
	return mine
}

// groupRun is the one run of a group's apps in a way in: the first of
// their subtests makes it, for every app of the group that can run here,
// and the others wait for it and check their own cells in it.
type groupRun struct {
	once sync.Once
	run  *appRun // nil when the run failed: the subtest by says why
	by   string
}

func (g *groupRun) get(t *testing.T, wy *way, group *appGroup, cls []*client, fx *fixtures) *appRun {
	t.Helper()
	g.once.Do(func() {
		g.by = t.Name()
		var first *client
		var cells []*cell
		for _, c := range cls {
			if c.group == group && c.missing(fx) == "" {
				if first == nil {
					first = c
				}
				cells = append(cells, wy.world.cellsOf(c)...)
			}
		}
		// The group's apps share what the way gives an app (the same
		// trust variable, the same mode), so the first stands for all.
		g.run = runApp(t, wy, first, cells, fx)
	})
	if g.run == nil {
		t.Fatalf("the %s apps' process did not run to the end: %s says why", group.name, g.by)
	}
	return g.run
}

// detourRunWay is `detour run -- APP`, as a developer types it: a run per
// app (a run is one detour for one command), all on one world's fake
// vendors and CA. Apps get what `detour run` sets, nothing else.
func detourRunWay(t *testing.T, cls []*client) *way {
	w := newWorld(t, "127.0.0.1", cls)
	wy := &way{world: w}
	wy.mode = func(c *client) string {
		// Node 20's fetch ignores HTTPS_PROXY: `detour run` reaches its
		// SDKs by their base-URL variables.
		if strings.HasPrefix(c.name, "node-") {
			return "base_url"
		}
		return "proxy"
	}
	wy.run = func(t *testing.T, c *client, cells []*cell, argv, env []string, stdout io.Writer) (int, string) {
		pol := w.policy(t, c.name, cells, nil)
		logFile := filepath.Join(t.TempDir(), "detour.log")
		var stderr testsupport.SyncBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := devrun.Run(ctx, devrun.Options{
			Command: argv, PolicyPath: pol, LogFile: logFile, Env: env,
			Stdout: stdout, Stderr: &stderr, Signals: make(chan os.Signal),
		})
		// Run returns once detour has stopped: every record is logged.
		log, _ := os.ReadFile(logFile)
		if err != nil {
			t.Fatalf("detour run: %v\nstderr:\n%s\nlog:\n%s", err, stderr.String(), log)
		}
		for _, cl := range cells {
			// The summary counts as failed over whatever a chain's first
			// upstream did not answer, and here every cell after the
			// first is later in the chain: only the pair is checked.
			if pair := cl.primaryName + "→" + cl.backupName; cl.kase.name == "failover" && (res.Summary.Failovers[pair] != 1 || res.Summary.AnsweredBy[cl.backupName] != 1) {
				t.Errorf("detour run's summary %+v; want one request failed over %s", res.Summary, pair)
			}
		}
		return res.ExitCode, "stderr:\n" + stderr.String() + "\nlog:\n" + string(log)
	}
	return wy
}

func tlsConfig(cert *tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{*cert}}
}

// lineWriter is an app's stdout: complete lines go to c as they are
// written, and are kept.
type lineWriter struct {
	mu      sync.Mutex
	partial bytes.Buffer
	lines   []string
	c       chan string
	closed  bool
}

func newLineWriter() *lineWriter { return &lineWriter{c: make(chan string, 1024)} }

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial.Write(b)
	for {
		i := bytes.IndexByte(w.partial.Bytes(), '\n')
		if i < 0 {
			break
		}
		line := strings.TrimSuffix(string(w.partial.Next(i + 1)[:i]), "\r")
		w.lines = append(w.lines, line)
		if !w.closed {
			w.c <- line
		}
	}
	return len(b), nil
}

// Close ends c; a last line without a newline is kept.
func (w *lineWriter) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.partial.Len() > 0 {
		w.lines = append(w.lines, w.partial.String())
		w.partial.Reset()
	}
	if !w.closed {
		w.closed = true
		close(w.c)
	}
}

// Lines returns every line written.
func (w *lineWriter) Lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}
