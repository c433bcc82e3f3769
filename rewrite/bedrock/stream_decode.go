package bedrock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/ir"
	"github.com/detour-proxy/detour/rewrite/sse"
)

// maxBlocks bounds the content block indexes a stream may use, so a
// hostile index cannot make the decoder allocate without bound.
const maxBlocks = 4096

// streamWire is every ConverseStream event payload's fields at once; the
// event name says which are meaningful.
type streamWire struct {
	ContentBlockIndex int `json:"contentBlockIndex"`
	Start             struct {
		ToolUse *struct {
			ToolUseID string `json:"toolUseId"`
			Name      string `json:"name"`
		} `json:"toolUse"`
	} `json:"start"`
	Delta struct {
		Text    *string `json:"text"`
		ToolUse *struct {
			Input string `json:"input"`
		} `json:"toolUse"`
		ReasoningContent *struct {
			Text            string `json:"text"`
			Signature       string `json:"signature"`
			RedactedContent string `json:"redactedContent"`
		} `json:"reasoningContent"`
	} `json:"delta"`
	StopReason string   `json:"stopReason"`
	Usage      *inUsage `json:"usage"`
	Message    string   `json:"message"`
}

type decodedBlock struct {
	tool    int // the tool call's Index, or -1
	args    bool
	stopped bool
}

// StreamDecoder decodes one ConverseStream's events (as SSE events: see the
// package comment). Not safe for concurrent use; one per stream.
type StreamDecoder struct {
	ev     streamWire
	out    []ir.StreamEvent
	blocks []decodedBlock
	tools  int
}

// NewStreamDecoder returns a decoder for one stream.
func NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{out: make([]ir.StreamEvent, 0, 4)}
}

// Decode decodes one event into IR stream events (often none). The result
// is valid until the next call.
func (d *StreamDecoder) Decode(ev sse.Event) ([]ir.StreamEvent, error) {
	d.out = d.out[:0]
	if ev.Comment {
		return d.out, nil
	}
	data := bytes.TrimSpace(ev.Data)
	if ev.Name == "contentBlockDelta" {
		if text, ok := fastTextDelta(data); ok {
			if text != "" {
				d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamText, Text: text})
			}
			return d.out, nil
		}
	}
	d.ev = streamWire{}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &d.ev); err != nil {
			if IsException(ev.Name) {
				return d.exception(ev.Name, ""), nil
			}
			return nil, fmt.Errorf("bedrock: stream event %s: %w", ev.Name, err)
		}
	}
	w := &d.ev
	switch ev.Name {
	case "messageStart":
		d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamStart})
	case "contentBlockStart":
		b, err := d.block(w.ContentBlockIndex)
		if err != nil {
			return nil, err
		}
		if tu := w.Start.ToolUse; tu != nil && b.tool < 0 {
			b.tool = d.tools
			d.tools++
			d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamToolStart, ID: ir.OriginalToolID(tu.ToolUseID), Name: tu.Name, Index: b.tool})
		}
	case "contentBlockDelta":
		dl := &w.Delta
		switch {
		case dl.Text != nil:
			if *dl.Text != "" {
				d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamText, Text: *dl.Text})
			}
		case dl.ToolUse != nil:
			b, err := d.block(w.ContentBlockIndex)
			if err != nil {
				return nil, err
			}
			if b.tool < 0 {
				return nil, fmt.Errorf("bedrock: toolUse delta for content block %d, which started no tool", w.ContentBlockIndex)
			}
			if !b.args && strings.TrimSpace(dl.ToolUse.Input) == "" {
				return d.out, nil
			}
			b.args = true
			d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: b.tool, Text: dl.ToolUse.Input})
		case dl.ReasoningContent != nil:
			rc := dl.ReasoningContent
			switch {
			case rc.Text != "":
				d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamThinking, Text: rc.Text})
			case rc.Signature != "":
				d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamThinking, Signature: rc.Signature})
			case rc.RedactedContent != "":
				d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamThinking, Signature: rc.RedactedContent})
			}
		}
	case "contentBlockStop":
		if b, err := d.block(w.ContentBlockIndex); err == nil {
			d.stop(b)
		}
	case "messageStop":
		for i := range d.blocks {
			d.stop(&d.blocks[i])
		}
		d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamFinish, Finish: finishReason(w.StopReason, d.tools > 0)})
	case "metadata":
		if w.Usage != nil {
			d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamUsage, Usage: w.Usage.ir()})
		}
	default:
		if IsException(ev.Name) {
			return d.exception(ev.Name, w.Message), nil
		}
	}
	return d.out, nil
}

func (d *StreamDecoder) block(i int) (*decodedBlock, error) {
	if i < 0 || i >= maxBlocks {
		return nil, fmt.Errorf("bedrock: content block index %d out of range", i)
	}
	for len(d.blocks) <= i {
		d.blocks = append(d.blocks, decodedBlock{tool: -1})
	}
	return &d.blocks[i], nil
}

func (d *StreamDecoder) stop(b *decodedBlock) {
	if b.stopped {
		return
	}
	b.stopped = true
	if b.tool >= 0 && !b.args {
		b.args = true
		d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamToolArgs, Index: b.tool, Text: "{}"})
	}
}

func (d *StreamDecoder) exception(name, msg string) []ir.StreamEvent {
	class, status := ExceptionClass(name)
	d.out = append(d.out, ir.StreamEvent{Kind: ir.StreamError, Err: &rewrite.AppError{Status: status, Class: class, Message: msg}})
	return d.out
}

// IsException reports whether an event (or x-amzn-ErrorType) names an
// exception: Bedrock's exception shapes all end in "Exception".
func IsException(name string) bool {
	return strings.HasSuffix(name, "Exception")
}

// ExceptionClass returns detour's class and the HTTP status of one of
// Bedrock's exceptions, by name in either case ("throttlingException" in a
// stream, "ThrottlingException" in x-amzn-ErrorType).
func ExceptionClass(name string) (class string, status int) {
	switch strings.ToLower(name) {
	case "throttlingexception":
		return "rate_limited", http.StatusTooManyRequests
	case "servicequotaexceededexception":
		return "quota_exhausted", http.StatusBadRequest
	case "modelnotreadyexception":
		return "overloaded", http.StatusTooManyRequests
	case "serviceunavailableexception":
		return "overloaded", http.StatusServiceUnavailable
	case "modeltimeoutexception":
		return "timeout", http.StatusRequestTimeout
	case "validationexception":
		return "invalid_request", http.StatusBadRequest
	case "resourcenotfoundexception":
		return "invalid_request", http.StatusNotFound
	case "accessdeniedexception":
		return "auth", http.StatusForbidden
	case "modelerrorexception", "modelstreamerrorexception":
		return "server_error", http.StatusFailedDependency
	}
	return "server_error", http.StatusInternalServerError
}
