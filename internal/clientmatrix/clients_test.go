package clientmatrix

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/javatest"
	"github.com/detour-proxy/detour/rewrite"
)

// The dummy keys the apps send: detour's upstreams in the matrix send none
// (auth none), and the fake vendors take any.
const (
	openaiKey    = "sk-test-not-a-real-key"
	anthropicKey = "sk-ant-test-not-a-real-key"
	geminiKey    = "test-not-a-real-key"
)

// systemPython is Debian's python3, the one python3-requests installs for.
// The python3 first in PATH may be another (pyenv's) without requests.
const systemPython = "/usr/bin/python3"

// client is one unmodified app of the matrix.
type client struct {
	// name names the subtests: curl, python-urllib, node-openai…
	name string
	// shape is the API the app calls (and its fake vendors speak).
	shape rewrite.Shape
	// command is the app's argv for its calls, in turn: each a kind
	// ("answer" or "stream") and a model. fx holds what the runtimes need
	// (the compiled Java class…). An app announces each call with a
	// "case MODEL" line, except curl, whose calls end at their
	// "status=NNN" line. nil for an app of a group.
	command func(fx *fixtures, calls [][2]string) []string
	// group, when set, runs the app in one process with the other apps of
	// its group (per way in), by the group's command.
	group *appGroup
	// normalize turns what the app printed into the matrix's lines
	// ("answer TEXT", "delta JSON", "done", "error …"); nil: as printed.
	normalize func(kind string, lines []string) []string
	// isDelta reports whether a line the app printed shows one streamed
	// piece; nil: lines starting "delta ".
	isDelta func(line string) bool
	// wantError is the line the app prints for the vendor's 400.
	wantError string
	// missing reports what is not installed for the app, and how to
	// install it; "" when it can run.
	missing func(fx *fixtures) string
	// headerless: the app prints no "case MODEL" line (curl).
	headerless bool
	// trustVar is the one variable through which the runtime is told to
	// trust detour's CA in transparent mode, where nothing else is given:
	// a bundle file (CURL_CA_BUNDLE, SSL_CERT_FILE, REQUESTS_CA_BUNDLE),
	// detour's CA alone (NODE_EXTRA_CA_CERTS), or a trust store's system
	// properties (JAVA_TOOL_OPTIONS).
	trustVar string
}

// The error lines: the fake vendors' 400 invalid_request bodies
// (internal/fakevendor/errors.go) as each app shows them. An SDK app names
// the SDK's typed error: the vendor's error must reach it as that vendor's
// error, not as a proxy's.
const (
	rawOpenAIError = "error 400 invalid_request_error Missing required parameter: 'messages'."
)

// clients is the matrix's list of apps.
func clients() []*client {
	python := func(script string) func(*fixtures, [][2]string) []string {
		return func(fx *fixtures, calls [][2]string) []string {
			return withCalls([]string{systemPython, filepath.Join(fx.testdata, "python", script)}, calls)
		}
	}
	// The Node apps run in one node process per way in (sdks.mjs): node's
	// start and the SDKs' common code are most of each app's CPU, and each
	// app still makes its calls by its own SDK, configured by its own
	// variables. They all read detour's CA from NODE_EXTRA_CA_CERTS.
	nodeSDKs := &appGroup{name: "node", command: func(fx *fixtures, cells []*cell) []string {
		argv := []string{fx.node, filepath.Join(fx.testdata, "node", "sdks.mjs")}
		for _, cl := range cells {
			argv = append(argv, strings.TrimPrefix(cl.client.name, "node-"), cl.kase.kind, cl.model)
		}
		return argv
	}}
	nodeMissing := func(pkg string) func(*fixtures) string {
		return func(fx *fixtures) string {
			if fx.node == "" {
				return "node (Node 20) is not installed: .ci/run installs nodejs and npm"
			}
			if _, err := os.Stat(filepath.Join(fx.testdata, "node", "node_modules", pkg, "package.json")); err != nil {
				return pkg + " is not installed: run `npm ci --no-audit --no-fund` in internal/clientmatrix/testdata/node (.ci/run does)"
			}
			return ""
		}
	}
	return []*client{
		{
			name: "curl", trustVar: "CURL_CA_BUNDLE", shape: rewrite.OpenAI, wantError: rawOpenAIError,
			command: func(_ *fixtures, calls [][2]string) []string {
				argv := []string{"curl", "-q"}
				for i, call := range calls {
					if i > 0 {
						// --next starts the next transfer with fresh options.
						argv = append(argv, "--next")
					}
					argv = append(argv, "-sS", "-N", "--max-time", "60")
					body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Say hello."}]%s}`, call[1], map[bool]string{true: `,"stream":true`}[call[0] == "stream"])
					argv = append(argv, "-H", "Authorization: Bearer "+openaiKey, "-H", "Content-Type: application/json",
						"-d", body, "-w", "\nstatus=%{http_code}\n", "https://api.openai.com/v1/chat/completions")
				}
				return argv
			},
			headerless: true,
			normalize:  normalizeRawOpenAI,
			isDelta:    func(line string) bool { _, ok := openAIDelta(line); return ok },
			missing: func(*fixtures) string {
				if _, err := exec.LookPath("curl"); err != nil {
					return "curl is not installed: .ci/run installs it (apt-get install curl)"
				}
				return ""
			},
		},
		{
			name: "python-urllib", trustVar: "SSL_CERT_FILE", shape: rewrite.OpenAI, wantError: rawOpenAIError,
			command: python("urllib_client.py"),
			missing: func(*fixtures) string {
				if _, err := os.Stat(systemPython); err != nil {
					return systemPython + " is not installed: .ci/run installs python3 (apt-get install python3-requests brings it)"
				}
				return ""
			},
		},
		{
			name: "python-requests", trustVar: "REQUESTS_CA_BUNDLE", shape: rewrite.OpenAI, wantError: rawOpenAIError,
			command: python("requests_client.py"),
			missing: func(fx *fixtures) string { return fx.pythonMissing("requests", "python3-requests") },
		},
		{
			name: "python-httpx", trustVar: "SSL_CERT_FILE", shape: rewrite.OpenAI, wantError: rawOpenAIError,
			command: python("httpx_client.py"),
			missing: func(fx *fixtures) string { return fx.pythonMissing("httpx", "python3-httpx") },
		},
		{
			name: "node-openai", trustVar: "NODE_EXTRA_CA_CERTS", shape: rewrite.OpenAI,
			wantError: "error BadRequestError 400 invalid_request_error Missing required parameter: 'messages'.",
			group:     nodeSDKs, missing: nodeMissing("openai"),
		},
		{
			name: "node-anthropic", trustVar: "NODE_EXTRA_CA_CERTS", shape: rewrite.Anthropic,
			wantError: "error BadRequestError 400 invalid_request_error messages: Field required",
			group:     nodeSDKs, missing: nodeMissing("@anthropic-ai/sdk"),
		},
		{
			name: "node-genai", trustVar: "NODE_EXTRA_CA_CERTS", shape: rewrite.Gemini,
			wantError: "error ApiError 400 INVALID_ARGUMENT Request contains an invalid argument.",
			group:     nodeSDKs, missing: nodeMissing("@google/genai"),
		},
		{
			name: "java", trustVar: "JAVA_TOOL_OPTIONS", shape: rewrite.OpenAI, wantError: rawOpenAIError,
			command: func(fx *fixtures, calls [][2]string) []string {
				// The JVM options only shorten its start (C1 only, serial
				// GC, the classes shared from an archive of an earlier
				// run): a JVM starts slowly on a shared 2-core machine.
				opts, done := javatest.RunOptions(fx.javaClasses)
				fx.atEnd(done)
				return withCalls(append(append([]string{fx.java}, opts...), "Client"), calls)
			},
			missing: func(fx *fixtures) string { return fx.javaMissing() },
		},
		{
			name: "go", trustVar: "SSL_CERT_FILE", shape: rewrite.OpenAI, wantError: rawOpenAIError,
			command: func(fx *fixtures, calls [][2]string) []string {
				return withCalls([]string{fx.self}, calls)
			},
			missing: func(*fixtures) string { return "" },
		},
	}
}

// appGroup is apps that run in one process per way in: command is the
// argv that makes the calls of cells (the group's apps' cells), each by
// its own app, announced by "case MODEL".
type appGroup struct {
	name    string
	command func(fx *fixtures, cells []*cell) []string
}

// withCalls appends each call's kind and model to argv.
func withCalls(argv []string, calls [][2]string) []string {
	for _, c := range calls {
		argv = append(argv, c[0], c[1])
	}
	return argv
}

// fixtures are what the apps need, found or built once per test binary.
type fixtures struct {
	testdata string // absolute path of testdata/
	self     string // this test binary, which is also the Go app
	node     string // node's path; "" when absent
	java     string // java's path

	pythonMu  sync.Mutex
	pythonMsg map[string]string // pythonMissing's answer per module

	endMu sync.Mutex
	ends  []func() // run by finish, once every app has exited

	javaOnce    sync.Once
	javaClasses string // directory of the compiled Client.class (javatest's cache)
	javaMsg     string
}

func newFixtures(t *testing.T) *fixtures {
	t.Helper()
	td, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixtures{testdata: td, self: self}
	if p, err := exec.LookPath("node"); err == nil {
		fx.node = p
		if out, err := exec.Command(p, "--version").Output(); err == nil {
			t.Logf("node %s", bytes.TrimSpace(out))
		}
	}
	return fx
}

// pythonMissing checks, once per module, that Debian's python3 finds
// module (which the Debian package pkg installs). It looks the module up
// without importing it: importing httpx costs a python3 a fifth of a
// second of CPU, which the app itself pays anyway.
func (fx *fixtures) pythonMissing(module, pkg string) string {
	fx.pythonMu.Lock()
	defer fx.pythonMu.Unlock()
	if msg, ok := fx.pythonMsg[module]; ok {
		return msg
	}
	msg := ""
	find := "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)"
	if out, err := exec.Command(systemPython, "-c", find, module).CombinedOutput(); err != nil {
		msg = fmt.Sprintf("%s cannot find %s (%v: %s): .ci/run installs it (apt-get install %s)", systemPython, module, err, bytes.TrimSpace(out), pkg)
	}
	if fx.pythonMsg == nil {
		fx.pythonMsg = map[string]string{}
	}
	fx.pythonMsg[module] = msg
	return msg
}

// javaMissing compiles testdata/java/Client.java once, with the JDK's
// javac: the app is built as a user would build it, never by anything of
// detour's. The classes are javatest's, kept between runs for as long as
// the source and the JDK are the same.
func (fx *fixtures) javaMissing() string {
	fx.javaOnce.Do(func() {
		const install = ".ci/run installs it (apt-get install openjdk-17-jdk-headless)"
		javac, err := exec.LookPath("javac")
		if err != nil {
			fx.javaMsg = "javac is not installed: " + install
			return
		}
		if fx.java, err = exec.LookPath("java"); err != nil {
			fx.javaMsg = "java is not installed: " + install
			return
		}
		if fx.javaClasses, err = javatest.Compile(javac, filepath.Join(fx.testdata, "java", "Client.java")); err != nil {
			fx.javaMsg = err.Error()
		}
	})
	return fx.javaMsg
}

// atEnd has finish run f.
func (fx *fixtures) atEnd(f func()) {
	fx.endMu.Lock()
	defer fx.endMu.Unlock()
	fx.ends = append(fx.ends, f)
}

// finish runs what atEnd was given: the matrix is over, and every app has
// exited.
func (fx *fixtures) finish() {
	fx.endMu.Lock()
	defer fx.endMu.Unlock()
	for _, f := range fx.ends {
		f()
	}
	fx.ends = nil
}

// require skips the test, or in CI fails it, when the app's runtime is
// not installed: CI must run the whole matrix, a developer's machine may
// lack a runtime.
func (c *client) require(t *testing.T, fx *fixtures) {
	t.Helper()
	msg := c.missing(fx)
	if msg == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s cannot run: %s", c.name, msg)
	}
	t.Skipf("skipped: %s cannot run: %s", c.name, msg)
}

// openAIDelta returns the text of an OpenAI stream chunk line ("data:
// {…}") that carries some.
func openAIDelta(line string) (string, bool) {
	data, ok := strings.CutPrefix(line, "data: ")
	if !ok {
		return "", false
	}
	var chunk struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(data), &chunk) != nil || len(chunk.Choices) == 0 || chunk.Choices[0].Delta.Content == "" {
		return "", false
	}
	return chunk.Choices[0].Delta.Content, true
}

// normalizeRawOpenAI reads curl's output: the body as the vendor sent it
// (JSON, or the SSE stream), then the "status=NNN" line of -w.
func normalizeRawOpenAI(kind string, lines []string) []string {
	status := ""
	var body []string
	for _, l := range lines {
		if s, ok := strings.CutPrefix(l, "status="); ok {
			status = s
			continue
		}
		body = append(body, l)
	}
	if status == "" {
		return append([]string{"failed: no status line"}, lines...)
	}
	whole := strings.Join(body, "\n")
	if status >= "400" {
		var e struct {
			Error struct{ Type, Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(whole), &e); err != nil {
			return []string{"failed: status " + status + ": " + whole}
		}
		return []string{fmt.Sprintf("error %s %s %s", status, e.Error.Type, e.Error.Message)}
	}
	if kind != "stream" {
		var a struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(whole), &a); err != nil || len(a.Choices) == 0 {
			return []string{"failed: " + whole}
		}
		return []string{"answer " + a.Choices[0].Message.Content}
	}
	var out []string
	for _, l := range body {
		if d, ok := openAIDelta(l); ok {
			q, _ := json.Marshal(d)
			out = append(out, "delta "+string(q))
		}
		if l == "data: [DONE]" {
			out = append(out, "done")
		}
	}
	return out
}

// goApp is the Go app: net/http's default client, which reads HTTPS_PROXY
// and (through crypto/x509) SSL_CERT_FILE by itself. The test binary runs
// as this app when roleEnv is "go-app". Its arguments and output are the
// Python apps'.
func goApp(args []string) int {
	if len(args)%2 != 0 {
		fmt.Fprintln(os.Stderr, "usage: CASE MODEL [CASE MODEL]…")
		return 2
	}
	for i := 0; i < len(args); i += 2 {
		fmt.Println("case " + args[i+1])
		goCall(args[i], args[i+1])
	}
	return 0
}

// goCall makes one call of the Go app and prints what it got.
func goCall(kind, model string) {
	body := map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": "Say hello."}}}
	if kind == "stream" {
		body["stream"] = true
	}
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/chat/completions", bytes.NewReader(data))
	if err != nil {
		fmt.Println("failed", err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		fmt.Println("failed", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		var e struct {
			Error struct{ Type, Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		fmt.Printf("error %d %s %s\n", resp.StatusCode, e.Error.Type, e.Error.Message)
		return
	}
	if kind != "stream" {
		var a struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || len(a.Choices) == 0 {
			fmt.Println("failed", err)
			return
		}
		fmt.Println("answer " + a.Choices[0].Message.Content)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := openAIDelta(sc.Text()); ok {
			q, _ := json.Marshal(d)
			fmt.Println("delta " + string(q))
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Println("failed", err)
		return
	}
	fmt.Println("done")
}
