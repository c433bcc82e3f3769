// Package resp is detour's own Redis client: the RESP2 wire protocol, a
// small connection pool, scripts sent by SHA, pipelines and a pub/sub
// subscription that reconnects by itself. It is what internal/fleet needs
// from Redis and no more.
//
// detour carries its own client rather than go-redis for the sidecar's
// footprint: go-redis added some 2 MB to the stripped binary and 1 MiB to
// its idle memory, for a handful of commands (EVALSHA/EVAL, GET, SET, DEL,
// DECR, ZREM, EXISTS, SCAN, PUBLISH, SUBSCRIBE) on one server. What is
// left out on purpose: RESP3 and HELLO, client-side caching, Sentinel and
// Cluster, and retries (a command that fails is the caller's to fall back
// on; retrying would only add its timeout again).
//
// Every reply is read within a byte budget (Options.MaxReply), so a reply
// larger than that, or a length that lies, costs at most the budget and
// never an allocation of the length it claims.
//
// resp imports only the standard library; only internal/fleet imports it.
package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Kind is the type of a reply.
type Kind uint8

// The RESP2 reply types. A null bulk string ($-1) and a null array (*-1)
// are both KindNull: no caller tells them apart.
const (
	KindNull   Kind = iota // $-1 or *-1: a key that is not there, a script's false
	KindSimple             // +OK
	KindError              // -ERR ...: kept as a value only inside arrays and pipelines
	KindInt                // :42
	KindBulk               // $3 foo
	KindArray              // *2 ...
)

func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindSimple:
		return "simple string"
	case KindError:
		return "error"
	case KindInt:
		return "integer"
	case KindBulk:
		return "bulk string"
	case KindArray:
		return "array"
	}
	return "kind " + strconv.Itoa(int(k))
}

// Value is one reply.
type Value struct {
	Kind Kind
	// Int is a KindInt's value.
	Int int64
	// Str is a KindSimple's, KindError's or KindBulk's text.
	Str string
	// Elems are a KindArray's elements (nil for an empty array).
	Elems []Value
}

// ErrNil is what a conversion of a null reply returns: GET of a key that is
// not there, a script that returned false.
var ErrNil = errors.New("resp: nil reply")

// IsNull says whether v is a null reply.
func (v Value) IsNull() bool { return v.Kind == KindNull }

// Err is v's error when v is an error reply (an element of an array or of
// a pipeline's replies), else nil.
func (v Value) Err() error {
	if v.Kind == KindError {
		return &Error{msg: v.Str}
	}
	return nil
}

// Int64 is an integer reply, or a string reply holding an integer.
func (v Value) Int64() (int64, error) {
	switch v.Kind {
	case KindInt:
		return v.Int, nil
	case KindSimple, KindBulk:
		n, err := strconv.ParseInt(v.Str, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("resp: %q is not an integer", v.Str)
		}
		return n, nil
	case KindNull:
		return 0, ErrNil
	case KindError:
		return 0, v.Err()
	}
	return 0, fmt.Errorf("resp: %s reply is not an integer", v.Kind)
}

// Float64 is a string reply holding a number (INCRBYFLOAT's, GET of a
// counter), or an integer reply.
func (v Value) Float64() (float64, error) {
	switch v.Kind {
	case KindInt:
		return float64(v.Int), nil
	case KindSimple, KindBulk:
		f, err := strconv.ParseFloat(v.Str, 64)
		if err != nil {
			return 0, fmt.Errorf("resp: %q is not a number", v.Str)
		}
		return f, nil
	case KindNull:
		return 0, ErrNil
	case KindError:
		return 0, v.Err()
	}
	return 0, fmt.Errorf("resp: %s reply is not a number", v.Kind)
}

// Text is a simple or bulk string reply, or an integer in decimal.
func (v Value) Text() (string, error) {
	switch v.Kind {
	case KindSimple, KindBulk:
		return v.Str, nil
	case KindInt:
		return strconv.FormatInt(v.Int, 10), nil
	case KindNull:
		return "", ErrNil
	case KindError:
		return "", v.Err()
	}
	return "", fmt.Errorf("resp: %s reply is not a string", v.Kind)
}

// Error is an error reply: the command reached Redis, which refused it.
// The connection is fine. Anything else a command returns (a timeout, a
// connection refused or reset, a protocol error) means no answer came,
// and the connection it was on is discarded.
type Error struct{ msg string }

// Error is the reply as Redis wrote it, after the leading '-'.
func (e *Error) Error() string { return e.msg }

// Code is the reply's first word, by convention its kind: ERR, NOSCRIPT,
// WRONGTYPE, LOADING, NOAUTH, ...
func (e *Error) Code() string {
	code, _, _ := strings.Cut(e.msg, " ")
	return code
}

// Is matches the sentinels below by code: errors.Is(err, resp.ErrNoScript).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.msg == e.Code()
}

// Error replies detour acts on or names, by code, for errors.Is.
var (
	// ErrNoScript: EVALSHA of a script the server does not have (a
	// restart, SCRIPT FLUSH, a failover); Script.Run sends EVAL then.
	ErrNoScript = &Error{msg: "NOSCRIPT"}
	// ErrWrongType: a key holds another type than the command works on.
	ErrWrongType = &Error{msg: "WRONGTYPE"}
	// ErrLoading: the server is loading its dataset after a restart.
	ErrLoading = &Error{msg: "LOADING"}
	// ErrNoAuth: the server wants AUTH and got none.
	ErrNoAuth = &Error{msg: "NOAUTH"}
	// ErrWrongPass: AUTH with a wrong user or password.
	ErrWrongPass = &Error{msg: "WRONGPASS"}
	// ErrReadOnly: a write sent to a replica.
	ErrReadOnly = &Error{msg: "READONLY"}
	// ErrBusy: a script has been running longer than the server's limit.
	ErrBusy = &Error{msg: "BUSY"}
)

// IsReply says whether err is an error reply from Redis (somewhere in its
// chain) rather than a failure to get one.
func IsReply(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// Protocol errors. Each leaves the connection unusable.
var (
	// ErrReplyTooLarge: a reply would take more than the reader's budget.
	ErrReplyTooLarge = errors.New("resp: reply larger than the limit")
	// ErrProtocol: bytes that are not a RESP2 reply.
	ErrProtocol = errors.New("resp: protocol error")
)

// Bounds of a reply besides its byte budget.
const (
	// DefaultMaxReply is a reply's byte budget when Options.MaxReply is 0.
	// detour's replies are a few hundred bytes; SCAN's pages (256 keys)
	// and events stay far below it.
	DefaultMaxReply = 4 << 20
	// maxDepth bounds the nesting of arrays: a reply nested deeper is an
	// attack on the reader's stack, not anything Redis sends detour.
	maxDepth = 32
	// maxLine bounds a simple string, error or length line.
	maxLine = 64 << 10
	// bulkChunk is how much of a bulk string is allocated before its bytes
	// arrive: a length that lies costs what was actually sent.
	bulkChunk = 64 << 10
	// minElem is the fewest bytes an array element takes (":0\r\n" is 4,
	// "+\r\n" 3): an array cannot have more elements than its remaining
	// budget over this.
	minElem = 3
)

// Reader reads replies from a connection.
type Reader struct {
	br     *bufio.Reader
	max    int
	budget int // left for the reply being read
}

// NewReader reads replies of at most maxReply bytes each from r
// (DefaultMaxReply when maxReply <= 0).
func NewReader(r io.Reader, maxReply int) *Reader {
	if maxReply <= 0 {
		maxReply = DefaultMaxReply
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 4096)
	}
	return &Reader{br: br, max: maxReply}
}

// Read reads one reply. An error reply is a KindError value, not an error:
// the error is for what leaves the connection unusable (the stream ended,
// a timeout, ErrReplyTooLarge, ErrProtocol).
func (r *Reader) Read() (Value, error) {
	r.budget = r.max
	return r.value(0)
}

// Buffered is how many bytes have been read from the connection and not
// yet parsed: on an idle connection, anything is a protocol violation.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// line reads up to CRLF and returns the line without it, counted against
// the budget.
func (r *Reader) line() ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// A line longer than the buffer: gathered, within maxLine.
		long := append([]byte(nil), b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(long) > maxLine || len(long) > r.budget {
				break
			}
			b, err = r.br.ReadSlice('\n')
			long = append(long, b...)
		}
		b = long
	}
	if len(b) > r.budget {
		return nil, ErrReplyTooLarge
	}
	if len(b) > maxLine {
		return nil, fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, maxLine)
	}
	if err != nil {
		if err == io.EOF && len(b) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	r.budget -= len(b)
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return nil, fmt.Errorf("%w: line %q does not end in CRLF", ErrProtocol, b)
	}
	return b[:len(b)-2], nil
}

func (r *Reader) value(depth int) (Value, error) {
	line, err := r.line()
	if err != nil {
		return Value{}, err
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return Value{Kind: KindSimple, Str: string(body)}, nil
	case '-':
		return Value{Kind: KindError, Str: string(body)}, nil
	case ':':
		n, err := parseInt(body)
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: KindInt, Int: n}, nil
	case '$':
		n, err := parseInt(body)
		if err != nil {
			return Value{}, err
		}
		if n == -1 {
			return Value{Kind: KindNull}, nil
		}
		if n < 0 {
			return Value{}, fmt.Errorf("%w: bulk length %d", ErrProtocol, n)
		}
		if n > int64(r.budget)-2 {
			return Value{}, ErrReplyTooLarge
		}
		s, err := r.bulk(int(n))
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: KindBulk, Str: s}, nil
	case '*':
		n, err := parseInt(body)
		if err != nil {
			return Value{}, err
		}
		if n == -1 {
			return Value{Kind: KindNull}, nil
		}
		if n < 0 {
			return Value{}, fmt.Errorf("%w: array length %d", ErrProtocol, n)
		}
		if depth >= maxDepth {
			return Value{}, fmt.Errorf("%w: arrays nested deeper than %d", ErrProtocol, maxDepth)
		}
		if n > int64(r.budget/minElem) {
			return Value{}, ErrReplyTooLarge
		}
		if n == 0 {
			return Value{Kind: KindArray}, nil
		}
		// Grown as elements arrive: even within the budget, a count
		// that lies costs only the elements actually sent.
		elems := make([]Value, 0, min(int(n), 64))
		for range n {
			e, err := r.value(depth + 1)
			if err != nil {
				return Value{}, err
			}
			elems = append(elems, e)
		}
		return Value{Kind: KindArray, Elems: elems}, nil
	}
	return Value{}, fmt.Errorf("%w: unexpected reply type %q", ErrProtocol, line[0])
}

// bulk reads n bytes and the CRLF after them.
func (r *Reader) bulk(n int) (string, error) {
	r.budget -= n + 2 // checked by the caller
	var buf []byte
	if n+2 <= bulkChunk {
		buf = make([]byte, n+2)
		if _, err := io.ReadFull(r.br, buf); err != nil {
			return "", unexpectedEOF(err)
		}
	} else {
		buf = make([]byte, 0, bulkChunk)
		for len(buf) < n+2 {
			chunk := min(n+2-len(buf), max(bulkChunk, len(buf))) // doubling, never past n+2
			start := len(buf)
			buf = slices.Grow(buf, chunk)[:start+chunk]
			if _, err := io.ReadFull(r.br, buf[start:]); err != nil {
				return "", unexpectedEOF(err)
			}
		}
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return "", fmt.Errorf("%w: bulk string of %d bytes not followed by CRLF", ErrProtocol, n)
	}
	return string(buf[:n]), nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseInt parses a length or integer line strictly: an optional '-' and
// decimal digits, no '+', no spaces, no overflow.
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, fmt.Errorf("%w: bad integer %q", ErrProtocol, b)
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, fmt.Errorf("%w: bad integer %q", ErrProtocol, "-")
		}
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: bad integer %q", ErrProtocol, b)
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, fmt.Errorf("%w: integer %q overflows", ErrProtocol, b)
		}
		n = n*10 + d
	}
	switch {
	case !neg && n > math.MaxInt64:
		return 0, fmt.Errorf("%w: integer %q overflows", ErrProtocol, b)
	case neg && n > 1<<63:
		return 0, fmt.Errorf("%w: integer -%q overflows", ErrProtocol, b)
	case neg && n == 1<<63:
		return math.MinInt64, nil
	case neg:
		return -int64(n), nil
	}
	return int64(n), nil
}

// AppendValue appends v's RESP2 encoding to dst (a null as $-1). Strings
// are written as they are: a simple string or error holding CR or LF does
// not round-trip (Redis never sends one, and a reader never returns one
// holding LF).
func AppendValue(dst []byte, v Value) []byte {
	switch v.Kind {
	case KindNull:
		return append(dst, "$-1\r\n"...)
	case KindSimple:
		return append(append(append(dst, '+'), v.Str...), '\r', '\n')
	case KindError:
		return append(append(append(dst, '-'), v.Str...), '\r', '\n')
	case KindInt:
		return append(strconv.AppendInt(append(dst, ':'), v.Int, 10), '\r', '\n')
	case KindBulk:
		dst = append(strconv.AppendInt(append(dst, '$'), int64(len(v.Str)), 10), '\r', '\n')
		return append(append(dst, v.Str...), '\r', '\n')
	case KindArray:
		dst = append(strconv.AppendInt(append(dst, '*'), int64(len(v.Elems)), 10), '\r', '\n')
		for _, e := range v.Elems {
			dst = AppendValue(dst, e)
		}
		return dst
	}
	return dst
}

// AppendCommand appends a command as Redis reads it, an array of bulk
// strings, to dst. Arguments are strings, byte slices, integers or
// floats (in the shortest decimal that reads back the same, as go-redis
// and redis-cli write them).
func AppendCommand(dst []byte, args ...any) ([]byte, error) {
	dst = append(strconv.AppendInt(append(dst, '*'), int64(len(args)), 10), '\r', '\n')
	var num [32]byte
	for _, a := range args {
		var s []byte
		switch a := a.(type) {
		case string:
			dst = appendBulk(dst, a)
			continue
		case []byte:
			s = a
		case int:
			s = strconv.AppendInt(num[:0], int64(a), 10)
		case int64:
			s = strconv.AppendInt(num[:0], a, 10)
		case int32:
			s = strconv.AppendInt(num[:0], int64(a), 10)
		case uint64:
			s = strconv.AppendUint(num[:0], a, 10)
		case uint32:
			s = strconv.AppendUint(num[:0], uint64(a), 10)
		case float64:
			s = strconv.AppendFloat(num[:0], a, 'f', -1, 64)
		default:
			return dst, fmt.Errorf("resp: cannot send an argument of type %T", a)
		}
		dst = append(strconv.AppendInt(append(dst, '$'), int64(len(s)), 10), '\r', '\n')
		dst = append(append(dst, s...), '\r', '\n')
	}
	return dst, nil
}

func appendBulk(dst []byte, s string) []byte {
	dst = append(strconv.AppendInt(append(dst, '$'), int64(len(s)), 10), '\r', '\n')
	return append(append(dst, s...), '\r', '\n')
}

// wait blocks until a reply's first byte has arrived (or the connection's
// read deadline passes), consuming nothing: a subscription tells "nothing
// was sent" from "a reply was cut off".
func (r *Reader) wait() error {
	_, err := r.br.Peek(1)
	return err
}
