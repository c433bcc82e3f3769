package fakevendor

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/rewrite"
)

// geminiAnswer is the part of a GenerateContentResponse the tests read,
// decoded the way a client without the genai SDK would.
type geminiAnswer struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
}

// text is the concatenated text of the first candidate.
func (a geminiAnswer) text() string {
	var b strings.Builder
	if len(a.Candidates) > 0 {
		for _, p := range a.Candidates[0].Content.Parts {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// finish is the first candidate's finishReason.
func (a geminiAnswer) finish() string {
	if len(a.Candidates) == 0 {
		return ""
	}
	return a.Candidates[0].FinishReason
}

const geminiPrompt = `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}]}`

func TestGeminiGenerateContent(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Gemini, Options{Name: "gamma"})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1beta/models/gemini-2.5-pro:generateContent", strings.NewReader(geminiPrompt))
	req.Header.Set("x-goog-api-key", "AIza-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json; charset=UTF-8" {
		t.Fatalf("status %d content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var a geminiAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	if a.text() != "Hello from gamma." || a.finish() != "STOP" || a.Candidates[0].Content.Role != "model" {
		t.Errorf("answer %q finish %q", a.text(), a.finish())
	}
	if a.ModelVersion != "gemini-2.5-pro" {
		t.Errorf("modelVersion = %q; want the URL's model", a.ModelVersion)
	}
	u := a.UsageMetadata
	if u.CandidatesTokenCount != 3 || u.PromptTokenCount < 1 || u.TotalTokenCount != u.PromptTokenCount+3 {
		t.Errorf("usage = %+v", u)
	}
	r := v.Requests()[0]
	if r.Model != "gemini-2.5-pro" || r.Stream || r.Header.Get("x-goog-api-key") != "AIza-test" {
		t.Errorf("recorded model %q stream %v headers %v", r.Model, r.Stream, r.Header)
	}
}

func TestGeminiStreamSSE(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Gemini, Options{Name: "gamma", Chunks: 4, Text: "one two three four five"})
	got := mustPost(t, srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=AIza-test", geminiPrompt)
	if got.status != 200 || got.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d content-type %q", got.status, got.header.Get("Content-Type"))
	}
	// go-genai accepts nothing but `data: <one line of JSON>` and blank lines.
	events := parseSSE(t, got.body)
	if len(events) != 4 {
		t.Fatalf("%d events; want 4", len(events))
	}
	var text strings.Builder
	var last geminiAnswer
	for i, e := range events {
		if e.name != "" {
			t.Errorf("event %d has an event: line %q", i, e.name)
		}
		var a geminiAnswer
		if err := json.Unmarshal([]byte(e.data), &a); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if f := a.finish(); (f == "STOP") != (i == len(events)-1) {
			t.Errorf("event %d finishReason %q", i, f)
		}
		text.WriteString(a.text())
		last = a
	}
	if text.String() != "one two three four five" {
		t.Errorf("text = %q", text.String())
	}
	if last.UsageMetadata.CandidatesTokenCount != 5 || last.ModelVersion != "gemini-2.5-flash" {
		t.Errorf("last chunk usage %+v model %q", last.UsageMetadata, last.ModelVersion)
	}
	if r := v.Requests()[0]; !r.Stream || r.RawQuery != "alt=sse&key=AIza-test" {
		t.Errorf("recorded stream %v query %q", r.Stream, r.RawQuery)
	}
}

func TestGeminiStreamJSONArray(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, rewrite.Gemini, Options{Name: "gamma"})
	got := mustPost(t, srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", geminiPrompt)
	if got.header.Get("Content-Type") != "application/json; charset=UTF-8" {
		t.Errorf("content-type %q", got.header.Get("Content-Type"))
	}
	var chunks []geminiAnswer
	if err := json.Unmarshal(got.body, &chunks); err != nil {
		t.Fatalf("body is not a JSON array: %v\n%s", err, got.body)
	}
	var text strings.Builder
	for _, c := range chunks {
		text.WriteString(c.text())
	}
	if len(chunks) != 3 || text.String() != "Hello from gamma." || chunks[2].finish() != "STOP" {
		t.Errorf("%d chunks, text %q", len(chunks), text.String())
	}
}

func TestGeminiErrorDetails(t *testing.T) {
	t.Parallel()
	type detail struct {
		Type       string `json:"@type"`
		Reason     string `json:"reason"`
		RetryDelay string `json:"retryDelay"`
		Violations []struct {
			QuotaID         string            `json:"quotaId"`
			QuotaDimensions map[string]string `json:"quotaDimensions"`
		} `json:"violations"`
	}
	type body struct {
		Error struct {
			Code    int      `json:"code"`
			Message string   `json:"message"`
			Status  string   `json:"status"`
			Details []detail `json:"details"`
		} `json:"error"`
	}
	for _, tc := range []struct {
		name        string
		fault       Fault
		wantStatus  int
		wantQuota   string // substring of the QuotaFailure's quotaId
		wantDelay   string
		wantReason  string
		wantHeader  string
		wantRPCCode string
	}{
		{"per minute", Fault{Kind: Status, Class: ClassRateLimit}, 429, "PerMinute", "26s", "", "", "RESOURCE_EXHAUSTED"},
		{"per day", Fault{Kind: Status, Class: ClassQuotaPerDay, RetryAfter: "7"}, 429, "PerDay", "7s", "", "7", "RESOURCE_EXHAUSTED"},
		{"bad key", Fault{Kind: Status, Class: ClassAuth}, 400, "", "", "API_KEY_INVALID", "", "INVALID_ARGUMENT"},
		{"generic 401", Fault{Kind: Status, Status: 401}, 401, "", "", "", "", "UNAUTHENTICATED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, srv := serve(t, rewrite.Gemini, Options{})
			v.Script(tc.fault)
			got := ask(t, srv, rewrite.Gemini, false)
			if got.status != tc.wantStatus || got.header.Get("retry-after") != tc.wantHeader {
				t.Fatalf("status %d retry-after %q; want %d %q", got.status, got.header.Get("retry-after"), tc.wantStatus, tc.wantHeader)
			}
			var b body
			if err := json.Unmarshal(got.body, &b); err != nil {
				t.Fatal(err)
			}
			if b.Error.Code != tc.wantStatus || b.Error.Status != tc.wantRPCCode {
				t.Errorf("code %d status %q; want %d %q", b.Error.Code, b.Error.Status, tc.wantStatus, tc.wantRPCCode)
			}
			var quota, delay, reason string
			for _, d := range b.Error.Details {
				switch d.Type {
				case "type.googleapis.com/google.rpc.QuotaFailure":
					quota = d.Violations[0].QuotaID
					if m := d.Violations[0].QuotaDimensions["model"]; m != "gemini-2.5-flash" {
						t.Errorf("quotaDimensions.model = %q", m)
					}
				case "type.googleapis.com/google.rpc.RetryInfo":
					delay = d.RetryDelay
				case "type.googleapis.com/google.rpc.ErrorInfo":
					reason = d.Reason
				}
			}
			if !strings.Contains(quota, tc.wantQuota) || (tc.wantQuota == "") != (quota == "") {
				t.Errorf("quotaId = %q; want one containing %q", quota, tc.wantQuota)
			}
			if delay != tc.wantDelay || reason != tc.wantReason {
				t.Errorf("retryDelay %q reason %q; want %q %q", delay, reason, tc.wantDelay, tc.wantReason)
			}
		})
	}
}

func TestGeminiStreamJSONArrayError(t *testing.T) {
	t.Parallel()
	v, srv := serve(t, rewrite.Gemini, Options{})
	v.Script(Fault{Kind: StreamErrorMid}, Fault{Kind: StreamErrorEarly})
	for _, wantChunks := range []int{2, 0} {
		got := mustPost(t, srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", geminiPrompt)
		var elems []json.RawMessage
		if err := json.Unmarshal(got.body, &elems); err != nil {
			t.Fatalf("body is not a JSON array: %v\n%s", err, got.body)
		}
		if len(elems) != wantChunks+1 || !strings.HasPrefix(string(elems[wantChunks]), `{"error":{"code":503,`) {
			t.Errorf("array = %s; want %d chunks, then the 503 error", got.body, wantChunks)
		}
	}
}
