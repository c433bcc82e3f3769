package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/detour-proxy/detour/internal/admin"
	"github.com/detour-proxy/detour/internal/chain"
	"github.com/detour-proxy/detour/internal/health"
	"github.com/detour-proxy/detour/policy"
	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/translate"
)

const policySynopsis = `detour policy check FILE
       detour policy explain FILE --request REQ.json [--host HOST] [--path PATH] [--tier TIER] [--admin ADDR]`

// Policy runs `detour policy check | explain`.
func Policy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "detour policy: which one? check or explain\nusage: %s\n", policySynopsis)
		return ErrUsage
	}
	switch sub, args := args[0], args[1:]; {
	case isHelp(sub):
		// The full usage: each subcommand's synopsis and flags, as its own
		// --help prints them.
		fmt.Fprint(stdout, "detour policy: validate a policy file, or show what a request would go through.\n\n")
		if err := policyCheck([]string{"--help"}, stdout, stderr); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		return policyExplain([]string{"--help"}, stdout, stderr)
	case sub == "check":
		return policyCheck(args, stdout, stderr)
	case sub == "explain":
		return policyExplain(args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "detour policy: unknown subcommand %q (check, explain)\nusage: %s\n", sub, policySynopsis)
		return ErrUsage
	}
}

// splitFileArg accepts the policy file before or after the flags.
func splitFileArg(args []string) (file string, rest []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

func compileFile(path string) (*policy.Compiled, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("policy file %s does not exist (check the path; the README has an example policy)", path)
	}
	if err != nil {
		return nil, err
	}
	return policy.Compile(path, data, policy.Options{})
}

func policyCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("policy check", "detour policy check FILE", stderr)
	file, rest := splitFileArg(args)
	if help, err := parse(fs, rest, stdout); help || err != nil {
		return err
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 || file == "" {
		return usageError(fs, stderr, "name one policy file")
	}
	c, err := compileFile(file)
	var es policy.Errors
	if errors.As(err, &es) {
		// Every problem, one per line, each with line:column and field.
		for _, e := range es {
			fmt.Fprintln(stderr, e)
		}
		fmt.Fprintf(stderr, "%s: %d problem(s); detour serve would refuse this policy\n", file, len(es))
		return ExitError{Code: 1}
	}
	if err != nil {
		return err
	}
	hosts := make([]string, 0)
	seen := map[string]bool{}
	for _, r := range c.Routes {
		if !seen[r.Host] {
			seen[r.Host] = true
			hosts = append(hosts, r.Host)
		}
	}
	for _, w := range c.Warnings() {
		fmt.Fprintf(stdout, "%s: warning: %s\n", file, w)
	}
	fmt.Fprintf(stdout, "%s: ok — version %s, %d upstreams, %d routes; intercepts %s; %s\n",
		file, c.Version, len(c.Upstreams), len(c.Routes), strings.Join(hosts, ", "), egressSummary(c))
	return nil
}

// egressSummary says what happens to the hosts no route names.
func egressSummary(c *policy.Compiled) string {
	if c.Egress.Tunnel == policy.EgressDeny {
		return `everything else is refused (egress.tunnel "deny")`
	}
	cidrs := make([]string, len(c.Egress.DenyCIDRs))
	for i, p := range c.Egress.DenyCIDRs {
		cidrs[i] = p.String()
	}
	denied := "no egress.deny_cidrs"
	if len(cidrs) > 0 {
		denied = "egress.deny_cidrs " + strings.Join(cidrs, ", ")
	}
	return "everything else is tunnelled untouched, except link-local and cloud metadata addresses, detour's own listeners and " + denied
}

func policyExplain(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("policy explain", "detour policy explain FILE --request REQ.json [--host HOST] [--path PATH] [--tier TIER] [--admin ADDR]", stderr)
	file, rest := splitFileArg(args)
	reqFile := fs.String("request", "", "a request body as the app would send it (JSON)")
	host := fs.String("host", "", "vendor host the app calls (default: inferred from the request, else the only route's host)")
	urlPath := fs.String("path", "", "request path (default: the vendor's chat endpoint)")
	admin := fs.String("admin", "", "admin address of a running detour to ask for cooldowns and breakers (default: the policy's admin_listen; \"off\" to not ask)")
	tierFlag := fs.String("tier", "", "the request's x-detour-tier header, which overrides the classifier")
	if help, err := parse(fs, rest, stdout); help || err != nil {
		return err
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 || file == "" {
		return usageError(fs, stderr, "name one policy file")
	}
	if *reqFile == "" {
		return usageError(fs, stderr, "--request REQ.json is required")
	}
	c, err := compileFile(file)
	if err != nil {
		return err
	}
	body, err := os.ReadFile(*reqFile)
	if err != nil {
		return fmt.Errorf("reading the request: %w", err)
	}
	h, p := *host, *urlPath
	if h == "" {
		h = guessHost(c, body)
	}
	if p == "" {
		p = defaultPath(rewrite.ShapeOfHost(h))
	}
	route := c.Route(h, p)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	defer w.Flush()
	if route == nil {
		fmt.Fprintf(w, "no route for %s %s: detour would pass the request through to %s untouched", h, p, h)
		if !c.Intercepts(h) {
			fmt.Fprintf(w, " (and, as HTTPS_PROXY, not even decrypt it: no route names %s)", h)
		}
		fmt.Fprintln(w)
		return nil
	}
	var model string
	stream := false
	if route.Shape == rewrite.Gemini {
		m, method, ok := rewrite.GeminiModelFromPath(p)
		if !ok {
			return fmt.Errorf("%s is not a Gemini model endpoint (want /v1beta/models/MODEL:generateContent)", p)
		}
		model, stream = m, method == "streamGenerateContent"
	} else {
		f, err := rewrite.PeekRequest(body)
		if err != nil {
			return fmt.Errorf("%s: %w (detour would answer 400 in the app's shape and send it nowhere)", *reqFile, err)
		}
		model, stream = f.Model, f.Stream
	}
	fmt.Fprintf(w, "route:\t%s (%s %s), the app speaks %s\n", route.Name, route.Host, p, route.Shape)
	fmt.Fprintf(w, "request:\tmodel %q, stream %v\n", model, stream)
	chain := route.Chain
	if route.Tiers == nil {
		fmt.Fprintf(w, "tier:\t— (the route has one chain)\n")
	} else {
		tier, reasons := explainTier(c, route, body, p, *tierFlag)
		chain = route.ChainFor(tier)
		fmt.Fprintf(w, "tier:\t%s (%s)\n", tier, strings.Join(reasons, "; "))
	}
	fmt.Fprintf(w, "deadline:\t%s for all attempts until an answer is committed\n", c.Deadline)
	if c.HedgeAfter > 0 {
		fmt.Fprintf(w, "hedging:\tthe next upstream starts beside one that sent no headers after %s\n", c.HedgeAfter)
	}
	running, liveErr := askRunning(*admin, c)
	// Cooldowns and breakers are keyed by upstream name, and the same name
	// may mean another upstream in another policy: they are shown only when
	// the running detour runs this very file.
	var live map[string]liveCooldown
	if liveErr == nil && running.hash == c.Hash {
		live = running.upstreams
	}
	fmt.Fprintln(w, "chain:")
	for i, u := range chain {
		if u.Static {
			fmt.Fprintf(w, "  %d. %s\tstatic: answers %q in the app's shape; nothing after it is tried\n", i+1, u.Name, truncateText(u.Text, 60))
			break
		}
		m, ok := u.MapModel(model)
		if !ok {
			fmt.Fprintf(w, "  %d. %s\tskipped: no models entry matches %q\n", i+1, u.Name, model)
			continue
		}
		if u.Shape != route.Shape && u.Auth == policy.AuthClient {
			fmt.Fprintf(w, "  %d. %s\tskipped: it would get the app's key, which never goes to another vendor\n", i+1, u.Name)
			continue
		}
		last := i == len(chain)-1
		if cd, cooling := live[u.Name]; cooling && cd.until != "" {
			if !(last && c.NeverSkipLast) {
				fmt.Fprintf(w, "  %d. %s\tskipped now: cooling down until %s (%s)\n", i+1, u.Name, cd.until, cd.reason)
				continue
			}
			fmt.Fprintf(w, "  %d. %s\tcooling down until %s, but tried anyway as the last upstream (never_skip_last)\n", i+1, u.Name, cd.until)
		}
		if cd := live[u.Name]; c.Breaker.Enabled && cd.breaker != "" && cd.breaker != "closed" {
			if !(last && c.NeverSkipLast) {
				fmt.Fprintf(w, "  %d. %s\tbreaker %s now: skipped unless it admits a probe\n", i+1, u.Name, cd.breaker)
			} else {
				fmt.Fprintf(w, "  %d. %s\tbreaker %s, but tried anyway as the last upstream (never_skip_last)\n", i+1, u.Name, cd.breaker)
			}
		}
		if cd := live[u.Name]; c.Breaker.Enabled && cd.breaker == "closed" && !last {
			if share, until, ok := recoveryNow(cd.since, c.Breaker.Recovery); ok {
				fmt.Fprintf(w, "  %d. %s	recovering now: admitted for %s of requests until %s (breaker.recovery %s), skipped for the others\n",
					i+1, u.Name, share, until.UTC().Format(time.RFC3339), c.Breaker.Recovery)
			}
		}
		how := "fast path: body forwarded as bytes"
		switch {
		case u.Shape != route.Shape:
			how = "translated " + string(route.Shape) + " → " + string(u.Shape)
		case m != model && u.Shape == rewrite.Gemini:
			how = "fast path, model rewritten in the URL"
		case m != model:
			how = "fast path, only \"model\" rewritten"
		}
		limits := ""
		if l := u.Limits; l != (policy.Limits{}) {
			limits = "\tlimits:"
			if l.RPM > 0 {
				limits += fmt.Sprintf(" %d rpm (burst %d)", l.RPM, l.Burst)
			}
			if l.Concurrency > 0 {
				limits += fmt.Sprintf(" %d in flight", l.Concurrency)
			}
			limits += ", skipped beyond them"
		}
		fmt.Fprintf(w, "  %d. %s\t%s %s\tmodel %s\t%s\tauth: %s\ttimeouts: connect %s, first byte %s, idle %s%s\n",
			i+1, u.Name, u.Shape, u.BaseURL, m, how, authText(u, route.Shape), u.Timeouts.Connect, u.Timeouts.FirstByte, u.Timeouts.Idle, limits)
	}
	var windows map[string]health.Window
	if live != nil {
		windows = running.windows
	}
	explainSelection(w, route, chain, p, model, body, windows, liveErr)
	var retries []string
	for _, cl := range policy.Classes {
		if a := c.Action(cl); a.Retries > 0 && a.Then == policy.Fallback {
			retries = append(retries, fmt.Sprintf("%s ×%d", cl, a.Retries))
		}
	}
	if len(retries) > 0 {
		fmt.Fprintf(w, "retries:\t%s (backoff %s…%s with full jitter; a retry-after up to %s is honoured)\n",
			strings.Join(retries, ", "), c.Retry.Base, c.Retry.Max, c.Retry.HonorRetryAfterUpTo)
	}
	if c.Breaker.Enabled {
		fmt.Fprintf(w, "breaker:\topens after %d failures or %d timeouts in a row (or rates %.0f%% / %.0f%% over %d attempts), half-open after %s with %d probes\n",
			c.Breaker.ConsecutiveFailures, c.Breaker.ConsecutiveTimeouts, c.Breaker.FailureRate*100, c.Breaker.TimeoutRate*100, c.Breaker.Window, c.Breaker.OpenFor, c.Breaker.HalfOpenProbes)
		if c.Breaker.Recovery > 0 {
			fmt.Fprintf(w, "\tonce closed, its upstream ramps over %s: 10 %%, 50 %%, then 100 %% of requests (the last upstream of a chain is never ramped away)\n", c.Breaker.Recovery)
		}
	} else {
		fmt.Fprintf(w, "breaker:\toff\n")
	}
	if c.Cache.Enabled {
		fmt.Fprintf(w, "cache:\t%s when every upstream fails (ttl %s; temperature > 0 %s)\n",
			map[bool]string{true: "served", false: "kept but not served"}[c.Cache.ServeStaleOnFailure], c.Cache.TTL,
			map[bool]string{true: "allowed", false: "never cached"}[c.Cache.AllowTemperature])
	}
	var stops, cooldowns []string
	for _, cl := range policy.Classes {
		a := c.Action(cl)
		if a.Then == policy.Stop {
			stops = append(stops, string(cl))
		}
		if a.Cooldown > 0 {
			cooldowns = append(cooldowns, fmt.Sprintf("%s %s", cl, a.Cooldown))
		}
	}
	sort.Strings(stops)
	fmt.Fprintf(w, "stops on:\t%s (the vendor's own error reaches the app)\n", strings.Join(stops, ", "))
	fmt.Fprintf(w, "cools down on:\t%s", strings.Join(cooldowns, ", "))
	if c.NeverSkipLast {
		fmt.Fprintf(w, " (the last upstream is tried even while cooling down)")
	}
	fmt.Fprintln(w)
	switch {
	case liveErr != nil:
		fmt.Fprintf(w, "now:\tno running detour answered (%v); cooldowns not known\n", liveErr)
	case running.hash != c.Hash:
		fmt.Fprintf(w, "now:\tthe detour at %s runs another policy: version %s (hash %s, from %s, %s), not this file (hash %s); its cooldowns and breakers are not shown\n",
			running.addr, running.version, shortHash(running.hash), running.source, running.trigger, shortHash(c.Hash))
	default:
		n := 0
		for _, l := range live {
			if l.until != "" {
				n++
			}
		}
		fmt.Fprintf(w, "now:\tthe detour at %s runs this file (version %s, hash %s): cooldowns and breakers above are its own (%d upstream(s) cooling down)\n",
			running.addr, running.version, shortHash(running.hash), n)
	}
	return nil
}

type liveCooldown struct {
	until, reason, breaker string
	// since is when the breaker entered its state (a closed one: when it
	// closed, for breaker.recovery).
	since time.Time
}

// runningDetour is what a running detour's /status says.
type runningDetour struct {
	addr                           string
	version, hash, source, trigger string
	upstreams                      map[string]liveCooldown
	// windows are the upstreams' selection windows; nil when its /status
	// has none.
	windows map[string]health.Window
}

// askRunning asks a running detour's admin listener which policy it runs
// and which upstreams are cooling down, so that explain can say which
// would be skipped now. It sends the admin token of c's admin.token_file,
// if any: /status needs it unless explain runs on detour's own host.
func askRunning(flagAddr string, c *policy.Compiled) (runningDetour, error) {
	addr := flagAddr
	if addr == "" {
		addr = c.AdminListen
	}
	if addr == "" || addr == "off" {
		return runningDetour{}, errors.New("admin listener off")
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return runningDetour{}, fmt.Errorf("admin address %q: %w", addr, err)
	}
	if c.Admin.TokenFile != "" {
		// Read as the listener would; a file compile accepted is readable,
		// unless it changed since.
		if tok, err := policy.ReadAdminToken(c.Admin.TokenFile); err == nil {
			req.Header.Set("Authorization", "Bearer "+string(tok))
		}
	}
	client := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return runningDetour{}, fmt.Errorf("GET http://%s/status: %w", addr, err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 1<<20)
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(body).Decode(&e)
		if e.Error == "" {
			e.Error = "no JSON error"
		}
		return runningDetour{}, fmt.Errorf("GET http://%s/status: %s: %s", addr, resp.Status, e.Error)
	}
	var st struct {
		Policy struct {
			Version string `json:"version"`
			Hash    string `json:"hash"`
			Source  string `json:"source"`
			Trigger string `json:"trigger"`
		} `json:"policy"`
		Upstreams map[string]struct {
			CooldownUntil  *time.Time `json:"cooldown_until"`
			CooldownReason string     `json:"cooldown_reason"`
			Breaker        *struct {
				State string    `json:"state"`
				Since time.Time `json:"since"`
			} `json:"breaker"`
			Window *admin.WindowJSON `json:"window"`
		} `json:"upstreams"`
	}
	if err := json.NewDecoder(body).Decode(&st); err != nil {
		return runningDetour{}, fmt.Errorf("reading /status: %w", err)
	}
	if st.Policy.Hash == "" {
		return runningDetour{}, fmt.Errorf("http://%s/status names no policy hash: is that a detour?", addr)
	}
	out := runningDetour{addr: addr, version: st.Policy.Version, hash: st.Policy.Hash, source: st.Policy.Source,
		trigger: st.Policy.Trigger, upstreams: map[string]liveCooldown{}}
	for name, u := range st.Upstreams {
		var lc liveCooldown
		if u.CooldownUntil != nil && time.Now().Before(*u.CooldownUntil) {
			lc.until, lc.reason = u.CooldownUntil.UTC().Format(time.RFC3339), u.CooldownReason
		}
		if u.Breaker != nil {
			lc.breaker, lc.since = u.Breaker.State, u.Breaker.Since
		}
		if lc != (liveCooldown{}) {
			out.upstreams[name] = lc
		}
		if u.Window != nil {
			if out.windows == nil {
				out.windows = map[string]health.Window{}
			}
			out.windows[name] = windowOf(u.Window)
		}
	}
	return out, nil
}

// shortHash is a policy hash's first 12 hex digits, as the log shows it.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func authText(u *policy.Upstream, app rewrite.Shape) string {
	switch u.Auth {
	case policy.AuthClient:
		if u.Shape != app {
			return "the app's key — but the app speaks another shape, so this upstream would be skipped"
		}
		return "the app's own key"
	case policy.AuthKey:
		return "detour's key for " + u.Name
	default:
		return "none"
	}
}

// guessHost picks the vendor host from the request's look, or the policy's
// only routed host.
func guessHost(c *policy.Compiled, body []byte) string {
	hosts := map[string]bool{}
	for _, r := range c.Routes {
		hosts[r.Host] = true
	}
	if len(hosts) == 1 {
		for h := range hosts {
			return h
		}
	}
	s := string(body)
	switch {
	case strings.Contains(s, `"contents"`):
		return rewrite.Gemini.DefaultHost()
	case strings.Contains(s, `"max_tokens"`) && (strings.Contains(s, `"system"`) || strings.Contains(s, `"anthropic`) || strings.Contains(s, `"claude`)):
		return rewrite.Anthropic.DefaultHost()
	}
	return rewrite.OpenAI.DefaultHost()
}

func defaultPath(s rewrite.Shape) string {
	switch s {
	case rewrite.Anthropic:
		return "/v1/messages"
	case rewrite.Gemini:
		return "/v1beta/models/gemini-2.5-flash:generateContent"
	}
	return "/v1/chat/completions"
}

// explainTier classifies the request exactly as the chain would, adding
// why the prompt could not be read (the log line leaves that out).
func explainTier(c *policy.Compiled, route *policy.Route, body []byte, urlPath, header string) (string, []string) {
	var decodeErr error
	tier, reasons := chain.Tier(c, route, header, func() (*ir.Request, error) {
		app := rewrite.AppShape(route.Shape, urlPath)
		req, err := translate.DecodeRequest(app, body, strings.TrimPrefix(urlPath, app.APIRoot()))
		decodeErr = err
		return req, err
	})
	if decodeErr != nil {
		reasons = append(reasons, decodeErr.Error())
	}
	return tier, reasons
}

func truncateText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
