package telemetry

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"strings"
	"unicode/utf8"
)

// This file is the protobuf wire format, as much of it as OTLP needs:
// detour writes its one request and reads its two answers (the export
// response, an error's google.rpc.Status) by hand rather than link
// google.golang.org/protobuf and the generated OTLP packages. The format is
// the protobuf encoding guide's
// (https://protobuf.dev/programming-guides/encoding/).

// The wire types detour writes and reads.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// protoEncoder appends one message's fields to b. A nested message is
// written in place: begin writes its tag and a one-byte length, the
// caller writes its fields, and end puts the real length in front, moving
// the body up only when the length needs more than one byte. Nothing is
// sized twice and nothing is built apart and copied in, so a whole export
// request is one buffer; the bodies moved are the few messages longer than
// 127 bytes (a span, the scope's and resource's lists), once each.
type protoEncoder struct {
	b []byte
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// varintLen is the length of v as a varint: 7 bits a byte.
func varintLen(v uint64) int {
	return (bits.Len64(v|1) + 6) / 7
}

func (e *protoEncoder) tag(field, wire int) {
	e.b = appendVarint(e.b, uint64(field)<<3|uint64(wire))
}

// varint writes field as a varint, even zero (a oneof member is written
// whatever its value; the callers leave out the zero of a plain field).
func (e *protoEncoder) varint(field int, v uint64) {
	e.tag(field, wireVarint)
	e.b = appendVarint(e.b, v)
}

func (e *protoEncoder) fixed64(field int, v uint64) {
	e.tag(field, wireFixed64)
	e.b = binary.LittleEndian.AppendUint64(e.b, v)
}

func (e *protoEncoder) fixed32(field int, v uint32) {
	e.tag(field, wireFixed32)
	e.b = binary.LittleEndian.AppendUint32(e.b, v)
}

// string writes s, with each invalid UTF-8 sequence replaced by U+FFFD: a
// protobuf string must be UTF-8, and a decoder that checks (Go's does)
// refuses the whole request over one bad byte, say in a Host header that
// became an attribute.
func (e *protoEncoder) string(field int, s string) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	e.tag(field, wireBytes)
	e.b = appendVarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *protoEncoder) bytes(field int, p []byte) {
	e.tag(field, wireBytes)
	e.b = appendVarint(e.b, uint64(len(p)))
	e.b = append(e.b, p...)
}

// begin opens a nested message as field and returns where its body starts,
// for end.
func (e *protoEncoder) begin(field int) int {
	e.tag(field, wireBytes)
	e.b = append(e.b, 0)
	return len(e.b)
}

// end closes the message begin opened at start.
func (e *protoEncoder) end(start int) {
	n := len(e.b) - start
	if n < 0x80 {
		e.b[start-1] = byte(n)
		return
	}
	k := varintLen(uint64(n))
	e.b = append(e.b, make([]byte, k-1)...)
	copy(e.b[start-1+k:], e.b[start:start+n])
	binary.PutUvarint(e.b[start-1:], uint64(n))
}

// errMalformed is a message that does not parse as protobuf.
var errMalformed = errors.New("malformed protobuf message")

// protoField is one field read by nextField: its number and wire type,
// its value (varint and fixed types) or its bytes (length-delimited).
type protoField struct {
	num   int
	wire  int
	value uint64
	bytes []byte
}

// nextField reads the field at the start of b and returns it with the
// rest of b. Fields of every wire type are read, so that the caller can
// skip the ones it does not know; the deprecated groups are refused.
func nextField(b []byte) (protoField, []byte, error) {
	var f protoField
	key, n := binary.Uvarint(b)
	if n <= 0 || key>>3 == 0 || key>>3 > 1<<29-1 {
		return f, nil, errMalformed
	}
	b = b[n:]
	f.num, f.wire = int(key>>3), int(key&7)
	switch f.wire {
	case wireVarint:
		f.value, n = binary.Uvarint(b)
		if n <= 0 {
			return f, nil, errMalformed
		}
		return f, b[n:], nil
	case wireFixed64:
		if len(b) < 8 {
			return f, nil, errMalformed
		}
		f.value = binary.LittleEndian.Uint64(b)
		return f, b[8:], nil
	case wireFixed32:
		if len(b) < 4 {
			return f, nil, errMalformed
		}
		f.value = uint64(binary.LittleEndian.Uint32(b))
		return f, b[4:], nil
	case wireBytes:
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return f, nil, errMalformed
		}
		f.bytes = b[n : n+int(l)]
		return f, b[n+int(l):], nil
	}
	return f, nil, errMalformed
}
