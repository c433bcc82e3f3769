// Package eventstream reads and writes AWS's binary event stream framing
// (application/vnd.amazon.eventstream), in which Bedrock's ConverseStream
// and InvokeModelWithResponseStream answer: each message is a prelude
// (total length, headers length, the prelude's CRC32), typed headers, a
// payload and the message's CRC32, all big-endian
// (https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html#streaming-event-stream).
//
// internal/cloud decodes Bedrock's streams with it and internal/fakevendor
// encodes them; a differential test holds both directions to the AWS SDK's
// encoder and decoder, which the binaries do not link. Unlike the SDK's
// decoder, this one refuses a frame longer than MaxHeadersLen plus
// MaxPayloadLen, and grows its buffer only as the bytes arrive, so a lying
// length costs no more memory than the bytes actually sent.
//
// eventstream imports only the standard library.
package eventstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The bounds of one message: AWS documents 128 KiB of headers and 16 MiB
// of payload as the most a message may carry.
const (
	MaxHeadersLen = 128 << 10
	MaxPayloadLen = 16 << 20
	// MaxHeaderValueLen bounds a string or byte-array header value (its
	// length is a 16-bit field, and the SDK refuses more than 2^15-1).
	MaxHeaderValueLen = 1<<15 - 1
	// preludeLen is total length, headers length and the prelude's CRC.
	preludeLen = 12
	// minMessageLen is a message with no headers and no payload.
	minMessageLen = preludeLen + 4
)

// ErrChecksum is a prelude or message whose CRC32 does not match.
var ErrChecksum = errors.New("eventstream: checksum mismatch")

// errNameCut is a header block that ends inside a header name. The SDK's
// decoder takes a block ending before the first byte of a name as complete
// (the name's read gets io.EOF, which it reads as the block's end); this
// one refuses it.
var errNameCut = errors.New("eventstream: header name cut short")

// ErrTooLarge is a frame whose lengths exceed the bounds above.
var ErrTooLarge = errors.New("eventstream: message too large")

// ValueType is a header value's type byte.
type ValueType uint8

// The header value types of the format.
const (
	True      ValueType = iota // no value bytes
	False                      // no value bytes
	Byte                       // int8
	Short                      // int16
	Integer                    // int32
	Long                       // int64
	ByteArray                  // 16-bit length, then the bytes
	String                     // 16-bit length, then UTF-8
	Timestamp                  // int64 milliseconds since the epoch
	UUID                       // 16 bytes
)

// fixedLen is the value length of the fixed-size types; -1 for the two
// with a length prefix.
var fixedLen = [...]int{True: 0, False: 0, Byte: 1, Short: 2, Integer: 4, Long: 8, ByteArray: -1, String: -1, Timestamp: 8, UUID: 16}

// Value is one header value: Int holds Byte, Short, Integer, Long and
// Timestamp (milliseconds); Bytes holds ByteArray, String and UUID.
type Value struct {
	Type  ValueType
	Int   int64
	Bytes []byte
}

// StringValue is a String header value.
func StringValue(s string) Value { return Value{Type: String, Bytes: []byte(s)} }

// Header is one named header of a message.
type Header struct {
	Name  string
	Value Value
}

// Message is one decoded message. Its slices belong to the Decoder and
// are valid until its next call to Next.
type Message struct {
	Payload []byte
	headers []byte // the validated header block
}

// Header returns the value of the header named name. A name that appears
// more than once has its last value, as with the SDK's decoder.
func (m Message) Header(name string) (Value, bool) {
	var found Value
	ok := false
	for b := m.headers; len(b) > 0; {
		n, v, rest := nextHeader(b)
		if string(n) == name {
			found, ok = v, true
		}
		b = rest
	}
	return found, ok
}

// HeaderString returns the header named name if it is a String, else "".
func (m Message) HeaderString(name string) string {
	return string(m.HeaderBytes(name))
}

// HeaderBytes is HeaderString without the copy: the bytes alias the
// Decoder's buffer.
func (m Message) HeaderBytes(name string) []byte {
	if v, ok := m.Header(name); ok && v.Type == String {
		return v.Bytes
	}
	return nil
}

// AppendHeaders appends every header of m, in order and repeats included;
// the values' Bytes alias the Decoder's buffer.
func (m Message) AppendHeaders(dst []Header) []Header {
	for b := m.headers; len(b) > 0; {
		n, v, rest := nextHeader(b)
		dst = append(dst, Header{Name: string(n), Value: v})
		b = rest
	}
	return dst
}

// nextHeader splits the first header off a block that checkHeaders has
// accepted.
func nextHeader(b []byte) (name []byte, v Value, rest []byte) {
	n := int(b[0])
	v, size, _ := parseValue(b[1+n:])
	return b[1 : 1+n], v, b[1+n+size:]
}

// parseValue reads one type byte and value from b, returning the bytes it
// took.
func parseValue(b []byte) (Value, int, error) {
	if len(b) < 1 {
		return Value{}, 0, errors.New("eventstream: header without a value type")
	}
	t := ValueType(b[0])
	if int(t) >= len(fixedLen) {
		return Value{}, 0, fmt.Errorf("eventstream: unknown header value type %d", t)
	}
	b = b[1:]
	n := fixedLen[t]
	if n < 0 {
		if len(b) < 2 {
			return Value{}, 0, errors.New("eventstream: header value length cut short")
		}
		l := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+l {
			return Value{}, 0, errors.New("eventstream: header value cut short")
		}
		return Value{Type: t, Bytes: b[2 : 2+l]}, 3 + l, nil
	}
	if len(b) < n {
		return Value{}, 0, errors.New("eventstream: header value cut short")
	}
	v := Value{Type: t}
	switch t {
	case Byte:
		v.Int = int64(int8(b[0]))
	case Short:
		v.Int = int64(int16(binary.BigEndian.Uint16(b)))
	case Integer:
		v.Int = int64(int32(binary.BigEndian.Uint32(b)))
	case Long, Timestamp:
		v.Int = int64(binary.BigEndian.Uint64(b))
	case UUID:
		v.Bytes = b[:16]
	}
	return v, 1 + n, nil
}

// checkHeaders validates a header block: every name and value whole, no
// unknown type, nothing left over.
func checkHeaders(b []byte) error {
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n {
			return errNameCut
		}
		_, size, err := parseValue(b[1+n:])
		if err != nil {
			return err
		}
		b = b[1+n+size:]
	}
	return nil
}

// Decoder reads messages from a stream. It reads each message whole (two
// reads: prelude, rest), so give it a buffered reader when the source
// makes small reads costly.
type Decoder struct {
	r   io.Reader
	pre [preludeLen]byte
	buf []byte
	err error
}

// NewDecoder returns a Decoder reading r.
func NewDecoder(r io.Reader) *Decoder { return &Decoder{r: r} }

// Next returns the next message. It returns io.EOF at a clean end (between
// messages), io.ErrUnexpectedEOF for a stream cut inside a message, and
// ErrChecksum, ErrTooLarge or a format error for a broken frame; after an
// error every call returns it again.
func (d *Decoder) Next() (Message, error) {
	if d.err != nil {
		return Message{}, d.err
	}
	m, err := d.next()
	if err != nil {
		d.err = err
	}
	return m, err
}

func (d *Decoder) next() (Message, error) {
	if _, err := io.ReadFull(d.r, d.pre[:]); err != nil {
		return Message{}, err // io.EOF only when no byte came
	}
	total := binary.BigEndian.Uint32(d.pre[0:4])
	hlen := binary.BigEndian.Uint32(d.pre[4:8])
	if crc32.ChecksumIEEE(d.pre[:8]) != binary.BigEndian.Uint32(d.pre[8:12]) {
		return Message{}, ErrChecksum
	}
	if total < minMessageLen || hlen > total-minMessageLen {
		return Message{}, fmt.Errorf("eventstream: message length %d cannot hold %d bytes of headers", total, hlen)
	}
	if hlen > MaxHeadersLen || total-minMessageLen-hlen > MaxPayloadLen {
		return Message{}, ErrTooLarge
	}
	rest, err := d.read(int(total) - preludeLen)
	if err != nil {
		return Message{}, err
	}
	body := rest[:len(rest)-4]
	if crc32.Update(crc32.ChecksumIEEE(d.pre[:]), crc32.IEEETable, body) != binary.BigEndian.Uint32(rest[len(rest)-4:]) {
		return Message{}, ErrChecksum
	}
	m := Message{headers: body[:hlen], Payload: body[hlen:]}
	if err := checkHeaders(m.headers); err != nil {
		return Message{}, err
	}
	return m, nil
}

// read fills d.buf with need bytes, growing it only as bytes arrive.
func (d *Decoder) read(need int) ([]byte, error) {
	buf := d.buf[:0]
	for len(buf) < need {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(need, max(2*cap(buf), 32<<10)))
			copy(grown, buf)
			buf = grown
		}
		n, err := io.ReadFull(d.r, buf[len(buf):min(cap(buf), need)])
		buf = buf[:len(buf)+n]
		if err != nil {
			d.buf = buf
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	d.buf = buf
	return buf, nil
}

// Append appends the encoding of one message to dst. It refuses a header
// name over 255 bytes, a value over MaxHeaderValueLen, a UUID that is not
// 16 bytes, an unknown type, and a message over the bounds.
func Append(dst []byte, headers []Header, payload []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, preludeLen)...)
	for _, h := range headers {
		if len(h.Name) > 255 {
			return dst[:start], fmt.Errorf("eventstream: header name of %d bytes", len(h.Name))
		}
		dst = append(dst, byte(len(h.Name)))
		dst = append(dst, h.Name...)
		var err error
		if dst, err = appendValue(dst, h.Value); err != nil {
			return dst[:start], err
		}
	}
	hlen := len(dst) - start - preludeLen
	if hlen > MaxHeadersLen || len(payload) > MaxPayloadLen {
		return dst[:start], ErrTooLarge
	}
	dst = append(dst, payload...)
	total := len(dst) - start + 4
	binary.BigEndian.PutUint32(dst[start:], uint32(total))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(hlen))
	binary.BigEndian.PutUint32(dst[start+8:], crc32.ChecksumIEEE(dst[start:start+8]))
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:])), nil
}

func appendValue(dst []byte, v Value) ([]byte, error) {
	if int(v.Type) >= len(fixedLen) {
		return dst, fmt.Errorf("eventstream: unknown header value type %d", v.Type)
	}
	dst = append(dst, byte(v.Type))
	switch v.Type {
	case Byte:
		return append(dst, byte(v.Int)), nil
	case Short:
		return binary.BigEndian.AppendUint16(dst, uint16(v.Int)), nil
	case Integer:
		return binary.BigEndian.AppendUint32(dst, uint32(v.Int)), nil
	case Long, Timestamp:
		return binary.BigEndian.AppendUint64(dst, uint64(v.Int)), nil
	case ByteArray, String:
		if len(v.Bytes) > MaxHeaderValueLen {
			return dst, fmt.Errorf("eventstream: header value of %d bytes", len(v.Bytes))
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(v.Bytes)))
		return append(dst, v.Bytes...), nil
	case UUID:
		if len(v.Bytes) != 16 {
			return dst, fmt.Errorf("eventstream: UUID of %d bytes", len(v.Bytes))
		}
		return append(dst, v.Bytes...), nil
	}
	return dst, nil // True, False: the type is the value
}
