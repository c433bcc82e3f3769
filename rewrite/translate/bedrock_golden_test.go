package translate

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
)

// generatedID matches the ids detour makes for an answer that has none
// (OpenAI chatcmpl-detour…, Anthropic msg_…).
var generatedID = regexp.MustCompile(`detour[0-9a-f]{16,}|msg_[0-9A-Z]{26}`)

// bedrockGoldenModel is the Converse model the Bedrock goldens encode for.
const bedrockGoldenModel = "anthropic.claude-3-5-haiku-20241022-v1:0"

// TestGoldenBedrock pins the three app → Bedrock pairs on the same app
// fixtures as the other pairs: the Converse request (path, notes, body),
// and what each app gets from a Converse answer (text and tool).
func TestGoldenBedrock(t *testing.T) {
	t.Parallel()
	for _, app := range rewrite.Shapes {
		dir := filepath.Join("testdata", string(app)+"_to_bedrock")
		for _, stream := range []bool{false, true} {
			name := "request"
			if stream {
				name = "request_stream"
			}
			t.Run(string(app)+"/"+name, func(t *testing.T) {
				req := decodeApp(t, app, stream)
				var notes []string
				up, err := EncodeRequest(req, rewrite.Bedrock, ir.EncodeOptions{
					Model: bedrockGoldenModel, Notes: func(n string) { notes = append(notes, n) },
				})
				if err != nil {
					t.Fatalf("EncodeRequest: %v", err)
				}
				if !json.Valid(up.Body) || strings.Contains(string(up.Body), `"model"`) {
					t.Fatalf("EncodeRequest: invalid JSON or a model in the body: %s", up.Body)
				}
				if want := "/model/" + bedrockGoldenModel + map[bool]string{false: "/converse", true: "/converse-stream"}[stream]; up.Path != want {
					t.Errorf("path %q; want %q", up.Path, want)
				}
				checkGolden(t, filepath.Join(dir, name+".golden"), indent(t, upstreamRequest{Path: up.Path, Notes: notes, Body: up.Body}))
			})
		}
		for kind, body := range map[string]string{"text": bedrockTextAnswer, "tool": bedrockToolAnswer} {
			t.Run(string(app)+"/response_"+kind, func(t *testing.T) {
				since := time.Now()
				out, err := Response(decodeApp(t, app, false), app, rewrite.Bedrock, []byte(body))
				if err != nil {
					t.Fatal(err)
				}
				// Converse sends no id: the app's encoder makes a random one.
				out = generatedID.ReplaceAll(pinCreated(t, out, since), []byte("detour0000000000000000"))
				checkGolden(t, filepath.Join(dir, "response_"+kind+".golden"), indent(t, json.RawMessage(out)))
			})
		}
	}
}
