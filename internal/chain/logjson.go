package chain

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// The canonical log line's attempts, usage and durations are encoded here
// and handed to zerolog as raw JSON, in exactly the bytes zerolog's own
// Dict, Arr and Float64 would write (logjson_test.go holds them to the
// zerolog-built line): built field by field, each attempt's dictionary and
// the array are events of their own, copied into the line, and every
// duration is formatted by the shortest-float algorithm, which together
// cost more than the rest of the line.

// logBufs pools the buffers the raw parts are built in.
var logBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendLineFields is zerolog's encoding of the line's fields from the
// id's value to the prompt, as Record.Log wrote them field by field: the
// value of "id" first, then each further field with its key. One zerolog
// call for the lot instead of one per field (and the event's key and
// length checks of each) is a third of what the line cost.
func appendLineFields(dst []byte, r *Record) []byte {
	dst = rewrite.AppendLogString(dst, r.ID)
	dst = appendStrField(dst, `,"mode":`, r.Mode)
	dst = appendStrField(dst, `,"host":`, r.Host)
	dst = appendStrField(dst, `,"method":`, r.Method)
	dst = appendStrField(dst, `,"path":`, r.Path)
	dst = appendStrField(dst, `,"route":`, r.Route)
	dst = appendStrField(dst, `,"policy":`, r.Policy)
	dst = appendStrField(dst, `,"tier":`, r.Tier)
	dst = append(dst, `,"reasons":[`...)
	for i, s := range r.Reasons {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = rewrite.AppendLogString(dst, s)
	}
	dst = append(dst, `],"stream":`...)
	dst = strconv.AppendBool(dst, r.Stream)
	dst = appendStrField(dst, `,"model":`, r.Model)
	dst = append(dst, `,"attempts":`...)
	dst = appendAttempts(dst, r.Attempts)
	dst = appendStrField(dst, `,"answered_by":`, r.AnsweredBy)
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(r.Status), 10)
	dst = appendStrField(dst, `,"error":`, r.Error)
	dst = append(dst, `,"ttfb_ms":`...)
	dst = appendMS(dst, r.TTFB)
	dst = append(dst, `,"total_ms":`...)
	dst = appendMS(dst, r.Total)
	dst = append(dst, `,"usage":`...)
	dst = appendUsage(dst, r.Usage.Input, r.Usage.Output)
	dst = appendStrField(dst, `,"cache":`, r.Cache)
	dst = append(dst, `,"cost_usd":`...)
	dst = appendLogFloat(dst, r.CostUSD)
	dst = appendStrField(dst, `,"priority":`, r.Priority)
	if r.Prompt != "" {
		dst = appendStrField(dst, `,"prompt":`, r.Prompt)
	}
	return dst
}

// appendStrField appends a string field: its comma and quoted key, then
// the value as zerolog writes a string.
func appendStrField(dst []byte, key, s string) []byte {
	return rewrite.AppendLogString(append(dst, key...), s)
}

// appendAttempts is zerolog's encoding of the attempts array Record.Log
// writes: one dictionary per attempt, its fields in the line's order.
func appendAttempts(dst []byte, attempts []AttemptRecord) []byte {
	dst = append(dst, '[')
	for i := range attempts {
		a := &attempts[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"upstream":`...)
		dst = rewrite.AppendLogString(dst, a.Upstream)
		dst = append(dst, `,"model":`...)
		dst = rewrite.AppendLogString(dst, a.Model)
		dst = append(dst, `,"status":`...)
		dst = strconv.AppendInt(dst, int64(a.Status), 10)
		dst = append(dst, `,"class":`...)
		dst = rewrite.AppendLogString(dst, a.Class)
		dst = append(dst, `,"outcome":`...)
		dst = rewrite.AppendLogString(dst, a.Outcome)
		dst = append(dst, `,"ms":`...)
		dst = appendMS(dst, a.Duration)
		dst = append(dst, `,"retry":`...)
		dst = strconv.AppendInt(dst, int64(a.Retry), 10)
		if a.Reason != "" {
			dst = append(dst, `,"reason":`...)
			dst = rewrite.AppendLogString(dst, a.Reason)
		}
		if a.Hedge {
			dst = append(dst, `,"hedge":true`...)
		}
		if a.Translated {
			dst = append(dst, `,"translated":true`...)
			if len(a.Notes) > 0 {
				dst = append(dst, `,"notes":[`...)
				for j, n := range a.Notes {
					if j > 0 {
						dst = append(dst, ',')
					}
					dst = rewrite.AppendLogString(dst, n)
				}
				dst = append(dst, ']')
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendUsage is zerolog's encoding of the line's usage dictionary.
func appendUsage(dst []byte, input, output int64) []byte {
	dst = append(dst, `{"input":`...)
	dst = strconv.AppendInt(dst, input, 10)
	dst = append(dst, `,"output":`...)
	dst = strconv.AppendInt(dst, output, 10)
	return append(dst, '}')
}

// maxExactMS bounds the durations appendMS formats itself: below it a
// float64 of whole microseconds over 1000 is so much finer than 0.001 that
// the shortest decimal that reads back as it is the three-decimal one,
// trailing zeros dropped (any other decimal with as few digits is at least
// 0.001 away). About 35 years; anything longer, or negative, goes the
// float's way.
const maxExactMS = 1 << 40

// appendMS is zerolog's Float64 of ms(d): the duration in milliseconds
// with microsecond resolution, as the shortest decimal that reads back as
// the same float64.
func appendMS(dst []byte, d time.Duration) []byte {
	us := d.Microseconds()
	if us < 0 || us >= maxExactMS {
		return appendLogFloat(dst, ms(d))
	}
	dst = strconv.AppendInt(dst, us/1000, 10)
	frac := us % 1000
	if frac == 0 {
		return dst
	}
	digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for digits[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, digits[:n]...)
}

// appendLogFloat is zerolog's encoding of a float64 field (at its default
// precision, -1): NaN and infinities as strings, the exponent form below
// 1e-6 and from 1e21 on, with one exponent digit where one is enough.
func appendLogFloat(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(dst, `"+Inf"`...)
	case math.IsInf(v, -1):
		return append(dst, `"-Inf"`...)
	}
	if v == 0 && !math.Signbit(v) {
		// The cost of an answer no price matches, on most lines.
		return append(dst, '0')
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, v, format, -1, 64)
	if n := len(dst); format == 'e' && n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
		// e-09 to e-9
		dst[n-2] = dst[n-1]
		dst = dst[:n-1]
	}
	return dst
}
