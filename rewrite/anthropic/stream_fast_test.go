package anthropic

import (
	"encoding/json"
	"testing"
)

// slowDelta is what encoding/json makes of a delta event.
func slowDelta(data []byte) (index int, typ, text string, ok bool) {
	var w streamWire
	if json.Unmarshal(data, &w) != nil || w.Type != "content_block_delta" {
		return 0, "", "", false
	}
	switch w.Delta.Type {
	case "text_delta":
		return w.Index, w.Delta.Type, w.Delta.Text, true
	case "input_json_delta":
		return w.Index, w.Delta.Type, w.Delta.PartialJSON, true
	case "thinking_delta":
		return w.Index, w.Delta.Type, w.Delta.Thinking, true
	}
	return 0, "", "", false
}

var deltaSeeds = []string{
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi!"}}`,
	`{"type":"content_block_delta","index":12,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"caf\u00e9 \ud83d\ude00 \n"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ends with a backslash \\"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bad \x"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"b"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"}}`,
	`{"type":"content_block_delta","index":00,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"x":1}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + "\xff" + `"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tab	raw"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}`,
}

// TestFastDeltaAgrees: where the fast path answers, encoding/json agrees;
// and it answers for the layout the API uses.
func TestFastDeltaAgrees(t *testing.T) {
	for _, s := range deltaSeeds {
		checkFastDelta(t, []byte(s))
	}
	for _, s := range deltaSeeds[:4] {
		if _, _, _, ok := fastDelta([]byte(s)); !ok {
			t.Errorf("fast path declined the API's own layout: %s", s)
		}
	}
}

func checkFastDelta(t *testing.T, data []byte) {
	t.Helper()
	fi, ft, fx, ok := fastDelta(data)
	if !ok {
		return
	}
	si, st, sx, sok := slowDelta(data)
	if !sok || fi != si || ft != st || fx != sx {
		t.Errorf("%s:\nfast %d %q %q\nslow %d %q %q (ok %v)", data, fi, ft, fx, si, st, sx, sok)
	}
}

// FuzzFastDelta: the hand-written delta reader never disagrees with
// encoding/json.
func FuzzFastDelta(f *testing.F) {
	for _, s := range deltaSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkFastDelta)
}
