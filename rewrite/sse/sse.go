// Package sse reads and writes Server-Sent Events the way detour needs them:
// every event keeps the exact bytes it arrived as, so that a same-shape stream
// can be forwarded byte for byte while detour still looks inside each event
// (to find the commit point, an in-stream error, or the usage figures).
//
// The reader follows the WHATWG "event stream" parsing rules (lines end in
// "\n", "\r\n" or "\r"; a blank line ends an event; "data" lines are joined
// with "\n"; "field:value" loses one leading space), with two additions that
// the vendors' streams need: a final event that the server never terminated
// with a blank line is still returned, and a line that is raw JSON rather than
// a field is returned as data and flagged (see Event.Bare).
//
// sse knows nothing about any vendor's JSON; package rewrite interprets the
// events. It must not import any other detour package.
package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
)

// DefaultMaxEventSize is the largest event (its raw bytes, terminator
// included) a Reader accepts unless SetMaxEventSize says otherwise. Real
// events are a few hundred bytes; the biggest legitimate ones are Gemini
// chunks carrying an inline image, which stay well under this.
const DefaultMaxEventSize = 4 << 20

// initialBufferSize is the Reader's first buffer. The vendors' events are a
// few hundred bytes, so they fit and the buffer normally never grows; a
// bigger one would only cost every open stream its memory, since the
// transport under the Reader buffers the network reads already.
const initialBufferSize = 1024

// burstBufferSize is what the buffer grows to once a read fills all the room
// it had: the upstream sends faster than the events are taken, and bigger
// reads mean fewer of them, and fewer flushes for a forwarder that flushes
// when no whole event is buffered (EventBuffered). A stream that trickles,
// as a model's tokens do, keeps the small buffer.
const burstBufferSize = 4096

// maxConsecutiveEmptyReads matches bufio: a reader that keeps returning
// (0, nil) is broken, and spinning on it forever would hang the stream.
const maxConsecutiveEmptyReads = 100

// maxInternedNames bounds the table of event names a Reader keeps so that a
// hostile stream with ever-new names cannot grow it without limit. Vendors
// use about a dozen names.
const maxInternedNames = 64

// ErrEventTooLarge is returned by Reader.Next when an event is longer than the
// Reader's maximum event size. It is sticky: the event cannot be skipped
// without losing the stream's framing, so the stream is unusable after it.
var ErrEventTooLarge = errors.New("sse: event too large")

// utf8BOM may start a stream; the SSE spec says to ignore it.
var utf8BOM = []byte("\xEF\xBB\xBF")

// Event is one SSE event as read by Reader.Next.
//
// Data and Raw point into the Reader's buffer and are valid only until the
// next call to Next (or Reset): the Reader reuses that memory so that reading
// a stream does not allocate per event. Use Clone to keep an event longer.
type Event struct {
	// Name is the value of the event's last "event:" field, or "" when the
	// event has none.
	Name string
	// Data is the values of the event's "data:" lines (and Bare lines),
	// joined with "\n", without a trailing newline. It is empty when the
	// event has no data lines.
	Data []byte
	// Raw is the exact bytes of the event as received, including the blank
	// line that terminated it (absent only for a final event the server did
	// not terminate). The Raw of all events, concatenated, is the stream.
	// "id:" and "retry:" lines, comments and unknown fields are kept here and
	// nowhere else.
	Raw []byte
	// Comment reports that the event consisted only of comment lines
	// (": keep-alive", ": OPENROUTER PROCESSING").
	Comment bool
	// Bare reports that at least one line of the event started with '{' or
	// '[' and was taken as data. By the SSE spec such a line is a field whose
	// name is the whole line, which a spec reader would drop. Gemini sends
	// in-stream errors as raw JSON lines with no "data:" prefix, and go-genai
	// reads exactly those lines as API errors, so detour must see them.
	Bare bool
}

// Clone returns a copy of e whose Data and Raw no longer share memory with
// the Reader, so that it stays valid after the next call to Next. Data and
// Raw share one new allocation.
func (e Event) Clone() Event {
	buf := make([]byte, len(e.Raw)+len(e.Data))
	n := copy(buf, e.Raw)
	copy(buf[n:], e.Data)
	c := e
	c.Raw = buf[:n:n]
	if e.Data != nil {
		c.Data = buf[n:]
	}
	return c
}

// Reader reads SSE events from an io.Reader, keeping each event's raw bytes.
// It buffers its input itself (like bufio.Reader) so that an event's Raw and,
// usually, its Data are slices of one reused buffer.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	rd      io.Reader
	buf     []byte
	r, w    int   // buf[r:w] is read from rd but not yet returned as events
	err     error // first error from rd; io.EOF stays, others are returned once
	max     int
	started bool // an event was returned: a BOM is no longer special
	// filled: the last read filled all the room it was given, so more
	// input was probably waiting behind it (fill).
	filled bool

	data  []byte            // joined Data when an event has several data lines
	names map[string]string // interned event names, so Name costs no allocation

	// mark is 1 + where the events since Mark start in buf; 0 when no
	// run is marked (so that a zero Reader has none).
	mark int

	// idleRelease: the buffer goes back to its pool while the Reader
	// waits for input with nothing to keep (SetIdleRelease); probe is
	// what that wait reads into, and size the buffer's size to take
	// again.
	idleRelease bool
	probe       [1]byte
	size        int
}

// NewReader returns a Reader that reads events from rd, with the default
// maximum event size.
func NewReader(rd io.Reader) *Reader {
	return &Reader{rd: rd, max: DefaultMaxEventSize}
}

// Reset makes r read a new stream from rd, keeping its buffers (and its
// maximum event size), so that a pooled Reader costs no allocation per
// stream. Events returned before Reset become invalid.
func (r *Reader) Reset(rd io.Reader) {
	r.rd = rd
	r.r, r.w = 0, 0
	r.err = nil
	r.started = false
	r.filled = false
	r.mark = 0
	r.size = 0
	r.data = r.data[:0]
}

// Mark starts a run of events: from now on, until Unmark, Marked returns
// the raw bytes of every event Next has returned since Mark, as one slice.
// A forwarder that passes events on unchanged can then write a run of
// events that arrived together with one Write. While a run is marked the
// buffer keeps its bytes, so a run should end before a read that may block:
// EventBuffered says when Next will not read.
func (r *Reader) Mark() { r.mark = r.r + 1 }

// Marked returns the raw bytes of the events returned since Mark (nil when
// no run is marked), which are those events' Raw concatenated. It points
// into the Reader's buffer and is valid until the next call to Next, Reset
// or Unmark.
func (r *Reader) Marked() []byte {
	if r.mark == 0 {
		return nil
	}
	return r.buf[r.mark-1 : r.r : r.r]
}

// Unmark ends the run Mark started.
func (r *Reader) Unmark() { r.mark = 0 }

// SetMaxEventSize sets the largest event, in raw bytes including its
// terminating blank line, that Next accepts; larger events make Next return
// ErrEventTooLarge. n <= 0 restores DefaultMaxEventSize.
func (r *Reader) SetMaxEventSize(n int) {
	if n <= 0 {
		n = DefaultMaxEventSize
	}
	r.max = n
}

// SetIdleRelease makes the Reader give its buffer back to the pool while
// it waits for input with nothing buffered: it reads the first byte of
// the next input into the Reader itself, and takes a buffer again for the
// rest. A stream that stays open for minutes, as a model's answer does,
// spends nearly all of that time waiting, and so keeps no buffer of its
// own for it; the price is a second read each time input arrives after
// such a wait. Events and runs (Mark) are kept exactly as without it: the
// buffer is given back only when none of its bytes is still needed.
func (r *Reader) SetIdleRelease(on bool) { r.idleRelease = on }

// Buffered returns the number of bytes read from the underlying reader but
// not yet returned in an event's Raw. After Next returns an error other than
// io.EOF, these are the bytes of the incomplete event.
func (r *Reader) Buffered() int { return r.w - r.r }

// EventBuffered reports whether a whole event is already buffered, so that
// the next call to Next returns it without reading from the underlying
// reader. A writer forwarding events one by one can then flush only when
// EventBuffered is false: events that arrived together leave together, and
// none waits behind a read that may block.
//
// It looks only for a blank line written as "\n\n" or "\r\n\r\n" (what the
// vendors send); an event ended otherwise is reported as not buffered, which
// at worst costs a flush.
func (r *Reader) EventBuffered() bool {
	b := r.buf[r.r:r.w]
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\r\n\r\n"))
}

// Next reads and returns the next event.
//
// At the clean end of the stream it returns io.EOF. If the stream ends (with
// io.EOF) in the middle of an event, that final event is returned first with
// whatever it has, and io.EOF on the following call: some servers close the
// connection right after the last data line. Any other read error is
// returned as is, without the partial event, whose bytes stay buffered (see
// Buffered); like bufio, Next tries to read again on the following call.
//
// An event may be empty: a blank line that ends no fields (for example a
// third newline after an event) is returned as an event with only Raw set,
// so that no byte of the stream is lost.
//
// A lone "\r" at the very end of what has arrived so far may be the first
// half of a "\r\n", so an event whose terminating blank line is a bare "\r"
// is returned only when the next byte (or the end of the stream) arrives.
// Servers that end lines with a bare "\r" are not known to exist.
//
// The returned Event's slices are valid until the next call to Next.
func (r *Reader) Next() (Event, error) {
	var (
		ev       Event
		off      int // start of the current line, relative to r.r
		from     int // where to resume looking for the end of the line
		nData    int
		dataA    int // first data value, relative to r.r, while nData == 1
		dataB    int
		comments int
		fields   int // non-comment lines, whatever their field
	)
	for {
		b := r.buf[r.r:r.w]
		atEOF := r.err == io.EOF
		end, next, ok := lineEnd(b, off, from, atEOF)
		if !ok {
			if r.err != nil && !atEOF {
				err := r.err
				r.err = nil
				return Event{}, err
			}
			if atEOF {
				// Everything buffered has been parsed into lines.
				if off == 0 {
					return Event{}, io.EOF
				}
				return r.finish(ev, off, nData, dataA, dataB, comments, fields), nil
			}
			if len(b) > r.max {
				return Event{}, ErrEventTooLarge
			}
			from = next
			r.fill()
			continue
		}
		if next > r.max {
			// The event is already longer than the limit, whether or not
			// this line ends it.
			return Event{}, ErrEventTooLarge
		}
		line := b[off:end]
		lineStart := off
		off, from = next, next
		if !r.started && lineStart == 0 {
			if bytes.HasPrefix(line, utf8BOM) {
				line = line[len(utf8BOM):]
				lineStart += len(utf8BOM)
			}
		}
		if len(line) == 0 {
			// A blank line ends the event.
			return r.finish(ev, off, nData, dataA, dataB, comments, fields), nil
		}

		var name, value []byte
		valueStart := lineStart
		switch line[0] {
		case ':':
			comments++
			continue
		case '{', '[':
			// Raw JSON where a field should be: see Event.Bare.
			ev.Bare = true
			name = dataField
			value = line
		default:
			if i := bytes.IndexByte(line, ':'); i >= 0 {
				name, value = line[:i], line[i+1:]
				valueStart += i + 1
				if len(value) > 0 && value[0] == ' ' {
					value = value[1:]
					valueStart++
				}
			} else {
				name = line
			}
		}
		fields++
		switch string(name) {
		case "data":
			nData++
			switch nData {
			case 1:
				dataA, dataB = valueStart, valueStart+len(value)
			case 2:
				// A second data line: join into r.data. Copy now, because
				// the buffer may move before the event is complete.
				r.data = append(r.data[:0], b[dataA:dataB]...)
				fallthrough
			default:
				r.data = append(r.data, '\n')
				r.data = append(r.data, value...)
			}
		case "event":
			ev.Name = r.intern(value)
		}
		// "id", "retry" and unknown fields stay in Raw only.
	}
}

// dataField is the field name given to a Bare line.
var dataField = []byte("data")

// finish consumes the event's n raw bytes and fills in what the line loop
// gathered.
func (r *Reader) finish(ev Event, n, nData, dataA, dataB, comments, fields int) Event {
	b := r.buf[r.r : r.r+n : r.r+n]
	ev.Raw = b
	switch {
	case nData == 1:
		ev.Data = b[dataA:dataB:dataB]
	case nData > 1:
		ev.Data = r.data
	}
	ev.Comment = comments > 0 && fields == 0
	r.r += n
	r.started = true
	return ev
}

// lineEnd finds the end of the line that starts at b[off]. It returns the
// index where the line's content ends and the index where the next line
// starts. The search for a terminator starts at from (>= off): the bytes
// before it are known to hold none. When b holds no complete line, ok is
// false and next is where a later search may resume.
//
// At EOF an unterminated line ends at len(b), and a trailing "\r" is a
// terminator on its own.
func lineEnd(b []byte, off, from int, atEOF bool) (end, next int, ok bool) {
	s := b[from:]
	lf := bytes.IndexByte(s, '\n')
	var cr int
	if lf >= 0 {
		cr = bytes.IndexByte(s[:lf], '\r')
	} else {
		cr = bytes.IndexByte(s, '\r')
	}
	switch {
	case cr >= 0:
		i := from + cr
		if i+1 < len(b) {
			if b[i+1] == '\n' {
				return i, i + 2, true
			}
			return i, i + 1, true
		}
		if atEOF {
			return i, i + 1, true
		}
		return 0, i, false // may be the first half of "\r\n"
	case lf >= 0:
		i := from + lf
		return i, i + 1, true
	case atEOF && off < len(b):
		return len(b), len(b), true
	}
	return 0, len(b), false
}

// fill reads more input into the buffer, sliding the unconsumed bytes to
// its front or growing it when it is full. The caller has checked that the
// pending event is within the size limit.
func (r *Reader) fill() {
	// keep is the first byte to keep: the unconsumed bytes, and before
	// them a marked run's.
	keep := r.r
	if r.mark > 0 {
		keep = r.mark - 1
	}
	if r.idleRelease && keep == r.w && pooled(len(r.buf)) {
		r.waitReleased(keep)
		return
	}
	if r.buf == nil {
		n := r.size
		if n == 0 {
			n = min(initialBufferSize, r.max+1)
		}
		r.buf = newBuffer(n)
	}
	// Slide the kept bytes to the front also when the space behind
	// them is smaller than what was consumed before them: a read into a
	// few bytes at the end would return part of an event, and a forwarder
	// that flushes when no whole event is buffered would flush (a write to
	// its client) once per such sliver.
	if r.filled && len(r.buf) < burstBufferSize && burstBufferSize <= r.max+1 {
		nb := newBuffer(burstBufferSize)
		r.w = copy(nb, r.buf[keep:r.w])
		r.moved(keep)
		putBuffer(r.buf)
		r.buf = nb
	}
	if r.w == len(r.buf) || keep > 0 && len(r.buf)-r.w < keep {
		if keep > 0 {
			r.w = copy(r.buf, r.buf[keep:r.w])
			r.moved(keep)
		} else {
			// Grow to hold one byte more than the limit, so that an event
			// of exactly the limit can be seen with its terminator.
			n := min(2*len(r.buf), r.max+1)
			if n <= len(r.buf) {
				n = len(r.buf) + initialBufferSize
			}
			nb := make([]byte, n)
			r.w = copy(nb, r.buf[:r.w])
			r.buf = nb
		}
	}
	for range maxConsecutiveEmptyReads {
		if r.readMore() {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// readMore makes one read into the buffer's free room. It reports whether
// that read ended the fill: it brought bytes, or an error, which is kept.
func (r *Reader) readMore() bool {
	room := len(r.buf) - r.w
	n, err := r.rd.Read(r.buf[r.w:])
	if n < 0 || n > room {
		r.err = errors.New("sse: reader returned invalid count")
		return true
	}
	r.w += n
	r.filled = n == room
	if err != nil {
		r.err = err
		return true
	}
	return n > 0
}

// waitReleased is fill with nothing to keep (keep, the first byte to keep,
// is where the buffered bytes end; SetIdleRelease): it gives the buffer
// back, reads one byte, takes a buffer of the same size again and fills it
// as fill would. A marked run, empty, starts again at the new buffer's
// front.
func (r *Reader) waitReleased(keep int) {
	r.size = len(r.buf)
	putBuffer(r.buf)
	r.buf = nil
	r.moved(keep)
	r.w = 0
	var n int
	var err error
	for range maxConsecutiveEmptyReads {
		if n, err = r.rd.Read(r.probe[:]); n != 0 || err != nil {
			break
		}
	}
	if n < 0 || n > 1 {
		r.err = errors.New("sse: reader returned invalid count")
		return
	}
	if n == 0 && err == nil {
		r.err = io.ErrNoProgress
		return
	}
	r.buf = newBuffer(r.size)
	if n == 0 {
		r.err = err
		return
	}
	r.buf[0] = r.probe[0]
	r.w = 1
	r.filled = false
	if err != nil {
		r.err = err
		return
	}
	// The rest of what arrived is normally buffered below already, so
	// this read does not wait; it may, and then waits holding the buffer,
	// as without SetIdleRelease. Should it bring nothing, the next fill
	// reads again.
	r.readMore()
}

// moved adjusts the offsets into buf after the kept bytes, from keep on,
// moved to its front.
func (r *Reader) moved(keep int) {
	r.r -= keep
	if r.mark > 0 {
		r.mark -= keep
	}
}

// intern returns name as a string without allocating for names seen before.
func (r *Reader) intern(name []byte) string {
	if s, ok := r.names[string(name)]; ok { // no allocation: see cmd/compile
		return s
	}
	s := string(name)
	if r.names == nil {
		r.names = make(map[string]string)
	}
	if len(r.names) < maxInternedNames {
		r.names[s] = s
	}
	return s
}

// writeBufs holds the scratch buffers WriteEvent formats into, so that it
// writes each event with one Write call and no allocation.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// ErrInvalidName is returned by WriteEvent and AppendEvent for an event name
// that contains a line break, which would split the event.
var ErrInvalidName = errors.New("sse: event name contains a line break")

// WriteEvent writes one event to w with a single Write: "event: name\n" when
// name is not empty, one "data: " line per line of data, and the blank line
// that ends the event. See AppendEvent for how data is split.
func WriteEvent(w io.Writer, name string, data []byte) error {
	bp := writeBufs.Get().(*[]byte)
	b, err := AppendEvent((*bp)[:0], name, data)
	if err == nil {
		_, err = w.Write(b)
	}
	if cap(b) <= 64<<10 { // do not pin huge one-off buffers in the pool
		*bp = b
		writeBufs.Put(bp)
	}
	return err
}

// AppendEvent appends the event WriteEvent would write to dst and returns
// the extended slice. data is split at "\n", "\r\n" and "\r", since each of
// them ends a line for the reader; empty data is written as one empty data
// line, which a reader sees as an event with empty data. Reading the result
// back yields name and data, with every line break in data turned into "\n".
func AppendEvent(dst []byte, name string, data []byte) ([]byte, error) {
	if name != "" {
		if !validName(name) {
			return dst, ErrInvalidName
		}
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, '\n')
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	dst = append(dst, '\n', '\n')
	return dst, nil
}

// validName reports whether name can be written on one line. Any other
// bytes are allowed: the reader takes the rest of the line as the name.
func validName(name string) bool {
	return !strings.ContainsAny(name, "\r\n")
}
