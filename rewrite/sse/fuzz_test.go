package sse

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// refEvent is what the reference parser below makes of one event.
type refEvent struct {
	name    string
	data    string
	raw     string
	comment bool
	bare    bool
}

// refParse is a deliberately simple, whole-input implementation of the same
// rules as Reader: split into lines, group at blank lines. FuzzReader checks
// that Reader, fed in any chunking, agrees with it.
func refParse(in []byte) []refEvent {
	var (
		evs   []refEvent
		cur   refEvent
		data  []string
		start int
		first = true
		lines int
		other int
		comms int
	)
	flush := func(end int) {
		cur.raw = string(in[start:end])
		if len(data) > 0 {
			cur.data = string(bytes.Join(bytesOf(data), []byte("\n")))
		}
		cur.comment = comms > 0 && other == 0
		evs = append(evs, cur)
		cur, data, start, lines, other, comms = refEvent{}, nil, end, 0, 0, 0
	}
	i := 0
	for i < len(in) {
		j := i
		for j < len(in) && in[j] != '\n' && in[j] != '\r' {
			j++
		}
		line := in[i:j]
		next := j
		if j < len(in) {
			next = j + 1
			if in[j] == '\r' && j+1 < len(in) && in[j+1] == '\n' {
				next = j + 2
			}
		}
		if first {
			first = false
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		i = next
		if len(line) == 0 {
			flush(next)
			continue
		}
		lines++
		var name, value []byte
		switch {
		case line[0] == ':':
			comms++
			continue
		case line[0] == '{' || line[0] == '[':
			cur.bare = true
			name, value = []byte("data"), line
		default:
			if k := bytes.IndexByte(line, ':'); k >= 0 {
				name, value = line[:k], line[k+1:]
				value = bytes.TrimPrefix(value, []byte(" "))
			} else {
				name = line
			}
		}
		other++
		switch string(name) {
		case "data":
			data = append(data, string(value))
		case "event":
			cur.name = string(value)
		}
	}
	if start < len(in) {
		flush(len(in))
	}
	return evs
}

func bytesOf(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n",
		"event: x\r\ndata: a\r\n\r\n",
		"event: x\rdata: a\r\r",
		": keep-alive\n\ndata: [DONE]\n\n",
		"{\"error\":{\"code\":503}}\n",
		"\xEF\xBB\xBFdata:a\ndata\nid: 1\nretry: 2\n\n\n",
		"data: a\r",
		"data: a\r\n\r",
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		want := refParse(in)
		var rd io.Reader = bytes.NewReader(in)
		if chunk > 0 {
			rd = &chunkReader{s: string(in), n: int(chunk)}
		}
		if chunk%3 == 1 {
			rd = iotest.OneByteReader(rd)
		}
		r := NewReader(rd)
		var raw []byte
		var got []refEvent
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			raw = append(raw, ev.Raw...)
			got = append(got, refEvent{ev.Name, string(ev.Data), string(ev.Raw), ev.Comment, ev.Bare})
		}
		if !bytes.Equal(raw, in) {
			t.Fatalf("concatenated Raw %q != input %q", raw, in)
		}
		if len(got) != len(want) {
			t.Fatalf("got %d events %+v; reference has %d %+v", len(got), got, len(want), want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("event %d = %+v; reference %+v", i, got[i], want[i])
			}
		}

		// With a small size limit the Reader either agrees or stops with
		// ErrEventTooLarge at the first event over the limit.
		const limit = 16
		r = NewReader(bytes.NewReader(in))
		r.SetMaxEventSize(limit)
		for i := 0; ; i++ {
			ev, err := r.Next()
			if err == io.EOF {
				if i != len(want) {
					t.Fatalf("EOF after %d events; want %d", i, len(want))
				}
				break
			}
			if err == ErrEventTooLarge {
				if i >= len(want) || len(want[i].raw) <= limit {
					t.Fatalf("ErrEventTooLarge at event %d of %+v", i, want)
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(ev.Raw) != want[i].raw || len(ev.Raw) > limit {
				t.Fatalf("limited event %d = %q; want %q", i, ev.Raw, want[i].raw)
			}
		}
	})
}
