package fakevendor_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/rewrite"
)

// A fake Anthropic that is overloaded once, then answers.
func ExampleVendor_Script() {
	v := fakevendor.New(rewrite.Anthropic, fakevendor.Options{Name: "backup"})
	v.Script(fakevendor.Fault{Kind: fakevendor.Status, Class: fakevendor.ClassOverloaded})
	srv := httptest.NewServer(v)
	defer srv.Close()

	for range 2 {
		resp, err := http.Post(srv.URL+"/v1/messages", "application/json",
			strings.NewReader(`{"model":"claude-haiku-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body)[:60])
	}
	fmt.Println("calls:", v.Calls())
	// Output:
	// 529 {"type":"error","error":{"type":"overloaded_error","message"
	// 200 {"id":"msg_fake000002","type":"message","role":"assistant","
	// calls: 2
}

// The fault mix of `detour fake-vendor --faults`.
func ExampleParseFaults() {
	fs, err := fakevendor.ParseFaults("429:insufficient_quota=0.2,529=0.1,hang:30s=0.05,html=0.01")
	if err != nil {
		panic(err)
	}
	for _, f := range fs {
		fmt.Printf("%-24s %.2f\n", f.Fault, f.P)
	}
	_, err = fakevendor.ParseFaults("429:overload=0.1")
	fmt.Println(err)
	// Output:
	// 429:insufficient_quota   0.20
	// 529                      0.10
	// hang:30s                 0.05
	// html_200                 0.01
	// fakevendor: fault "429:overload=0.1": unknown class "overload" (want one of rate_limit, insufficient_quota, spend_limit, credit_balance, quota_per_day, overloaded, server_error, invalid_request, auth, context_too_long, not_found, timeout)
}
