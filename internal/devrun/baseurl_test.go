package devrun

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/policy"
)

// compileRoutes compiles a policy with one static upstream and a route for
// each host.
func compileRoutes(t testing.TB, hosts ...string) *policy.Compiled {
	t.Helper()
	var routes []string
	for i, h := range hosts {
		routes = append(routes, fmt.Sprintf(`{"name": "r%d", "match": {"host": %q}, "chain": ["canned"]}`, i, h))
	}
	data := `{"version": "t", "upstreams": {"canned": {"shape": "static", "text": "hi"}}, "routes": [` + strings.Join(routes, ",") + `]}`
	pol, err := policy.Compile("policy.json", []byte(data), policy.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// Each SDK variable points at detour's base-URL path for its vendor, with
// the prefix that SDK appends its own paths to, only for hosts the policy
// routes, and never over a value the user set.
func TestBaseURLs(t *testing.T) {
	const proxy = "http://127.0.0.1:5000"
	all := compileRoutes(t, "api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com")
	set, notes := baseURLs(all, proxy, []string{"PATH=/usr/bin"})
	want := [][2]string{
		{"OPENAI_BASE_URL", proxy + "/openai/v1"},
		{"ANTHROPIC_BASE_URL", proxy + "/anthropic"},
		{"GOOGLE_GEMINI_BASE_URL", proxy + "/gemini"},
	}
	if !slices.Equal(set, want) || len(notes) != 0 {
		t.Errorf("every vendor routed: set %q, notes %q; want %q and no note", set, notes, want)
	}

	openaiOnly := compileRoutes(t, "api.openai.com")
	if set, notes := baseURLs(openaiOnly, proxy, nil); !slices.Equal(set, want[:1]) || len(notes) != 0 {
		t.Errorf("only OpenAI routed: set %q, notes %q; want OPENAI_BASE_URL alone (detour would only tunnel the others)", set, notes)
	}

	env := []string{"ANTHROPIC_BASE_URL=https://gateway.example/anthropic", "OPENAI_BASE_URL="}
	set, notes = baseURLs(all, proxy, env)
	if !slices.Equal(set, [][2]string{want[0], want[2]}) {
		t.Errorf("with the user's ANTHROPIC_BASE_URL: set %q; want OPENAI_BASE_URL (theirs was empty) and GOOGLE_GEMINI_BASE_URL", set)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "ANTHROPIC_BASE_URL is already set (https://gateway.example/anthropic): left as it is") {
		t.Errorf("notes %q; want one saying the user's ANTHROPIC_BASE_URL was kept", notes)
	}
	// And the child gets the user's value, not detour's.
	got := childEnv(env, vars{Proxy: proxy, BaseURLs: set})
	if v := lookupEnv(got, "ANTHROPIC_BASE_URL"); v != "https://gateway.example/anthropic" {
		t.Errorf("child's ANTHROPIC_BASE_URL = %q; want the user's", v)
	}
	if v := lookupEnv(got, "OPENAI_BASE_URL"); v != proxy+"/openai/v1" {
		t.Errorf("child's OPENAI_BASE_URL = %q; want detour's", v)
	}
	if n := strings.Count(strings.Join(got, "\n"), "OPENAI_BASE_URL="); n != 1 {
		t.Errorf("child's environment has OPENAI_BASE_URL %d times; want once", n)
	}
}
