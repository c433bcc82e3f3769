package eventstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	sdk "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// toSDK is v as the SDK's header value.
func toSDK(v Value) sdk.Value {
	switch v.Type {
	case True:
		return sdk.BoolValue(true)
	case False:
		return sdk.BoolValue(false)
	case Byte:
		return sdk.Int8Value(int8(v.Int))
	case Short:
		return sdk.Int16Value(int16(v.Int))
	case Integer:
		return sdk.Int32Value(int32(v.Int))
	case Long:
		return sdk.Int64Value(v.Int)
	case ByteArray:
		return sdk.BytesValue(append([]byte(nil), v.Bytes...))
	case String:
		return sdk.StringValue(string(v.Bytes))
	case Timestamp:
		return sdk.TimestampValue(time.UnixMilli(v.Int))
	case UUID:
		var u sdk.UUIDValue
		copy(u[:], v.Bytes)
		return u
	}
	panic("unknown type")
}

// sdkHeaders is what the SDK's decoder makes of hs: a repeated name keeps
// its first place and its last value.
func sdkHeaders(hs []Header) sdk.Headers {
	out := sdk.Headers{}
	for _, h := range hs {
		out.Set(h.Name, toSDK(h.Value))
	}
	return out
}

func sameHeaders(a, b sdk.Headers) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Value.String() != b[i].Value.String() {
			return false
		}
		if ta, ok := a[i].Value.(sdk.TimestampValue); ok && time.Time(ta).UnixMilli() != time.Time(b[i].Value.(sdk.TimestampValue)).UnixMilli() {
			return false
		}
	}
	return true
}

func randHeaders(r *rand.Rand) []Header {
	var hs []Header
	names := []string{":event-type", ":message-type", ":content-type", ":exception-type", "x", ""}
	for range r.IntN(7) {
		t := ValueType(r.IntN(10))
		v := Value{Type: t}
		switch t {
		case Byte:
			v.Int = int64(int8(r.Int()))
		case Short:
			v.Int = int64(int16(r.Int()))
		case Integer:
			v.Int = int64(int32(r.Int()))
		case Long:
			v.Int = int64(r.Uint64())
		case Timestamp:
			v.Int = r.Int64N(1 << 42) // the SDK's time.Time overflows after 2262
		case ByteArray, String:
			v.Bytes = make([]byte, r.IntN(40))
			for i := range v.Bytes {
				v.Bytes[i] = byte('a' + r.IntN(26))
			}
		case UUID:
			v.Bytes = make([]byte, 16)
			for i := range v.Bytes {
				v.Bytes[i] = byte(r.Int())
			}
		}
		name := names[r.IntN(len(names))]
		if r.IntN(4) == 0 {
			name = string(bytes.Repeat([]byte{'n'}, r.IntN(256)))
		}
		hs = append(hs, Header{Name: name, Value: v})
	}
	return hs
}

// TestEncodingMatchesSDK: for generated messages (every value type,
// repeated and empty names, empty and large payloads) Append writes the
// SDK encoder's bytes, and each side decodes the other's as itself.
func TestEncodingMatchesSDK(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	enc := sdk.NewEncoder()
	sdkDec := sdk.NewDecoder()
	// One random buffer, sliced: under -race a byte-by-byte fill per
	// message would dominate the test.
	random := make([]byte, 70<<10)
	rand.NewChaCha8([32]byte{7}).Read(random)
	for range 1000 {
		hs := randHeaders(r)
		n := []int{0, 1, 17, 300, 70 << 10}[r.IntN(5)]
		off := r.IntN(len(random) - n + 1)
		payload := random[off : off+n]
		ours, err := Append(nil, hs, payload)
		if err != nil {
			t.Fatal(err)
		}
		var theirs bytes.Buffer
		sm := sdk.Message{Payload: payload}
		for _, h := range hs {
			sm.Headers = append(sm.Headers, sdk.Header{Name: h.Name, Value: toSDK(h.Value)})
		}
		if err := enc.Encode(&theirs, sm); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs.Bytes()) {
			t.Fatalf("encoding of %+v differs from the SDK's:\n%x\n%x", hs, ours, theirs.Bytes())
		}
		m, err := NewDecoder(bytes.NewReader(theirs.Bytes())).Next()
		if err != nil {
			t.Fatalf("decoding the SDK's message: %v", err)
		}
		if got := m.AppendHeaders(nil); !sameHeaders(sdkHeaders(got), sdkHeaders(hs)) || !bytes.Equal(m.Payload, payload) {
			t.Fatalf("decoded %+v; want %+v", got, hs)
		}
		sdkm, err := sdkDec.Decode(bytes.NewReader(ours), nil)
		if err != nil {
			t.Fatalf("the SDK decoding ours: %v", err)
		}
		if !sameHeaders(sdkm.Headers, sdkHeaders(hs)) || !bytes.Equal(sdkm.Payload, payload) {
			t.Fatalf("the SDK decoded %v; want %v", sdkm.Headers, hs)
		}
	}
}

// fixCRCs recomputes both checksums of a one-message frame, so that a
// mutation tests the structure rather than the CRC.
func fixCRCs(b []byte) {
	if len(b) < minMessageLen {
		return
	}
	binary.BigEndian.PutUint32(b[8:], crc32.ChecksumIEEE(b[:8]))
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
}

// decodeAll decodes every message of b with both decoders, and fails the
// test where they disagree on whether a message is well formed or on what
// it holds.
func decodeAll(t *testing.T, b []byte) {
	t.Helper()
	ours := NewDecoder(bytes.NewReader(b))
	src := bytes.NewReader(b)
	theirs := sdk.NewDecoder()
	for range 100 {
		m, err := ours.Next()
		sm, serr := theirs.Decode(src, nil)
		if errors.Is(err, io.EOF) && serr == io.EOF {
			return
		}
		if errors.Is(err, errNameCut) && serr == nil {
			return // the SDK's one leniency (errNameCut)
		}
		if (err == nil) != (serr == nil) {
			t.Fatalf("decode error %v; the SDK's %v (frame %x)", err, serr, b)
		}
		if err != nil {
			return
		}
		if !sameHeaders(sdkHeaders(m.AppendHeaders(nil)), sm.Headers) || !bytes.Equal(m.Payload, sm.Payload) {
			t.Fatalf("decoded %v %q; the SDK %v %q", m.AppendHeaders(nil), m.Payload, sm.Headers, sm.Payload)
		}
		// What decodes encodes back to the same bytes.
		again, err := Append(nil, m.AppendHeaders(nil), m.Payload)
		if err != nil {
			t.Fatalf("re-encoding a decoded message: %v", err)
		}
		if m2, err := NewDecoder(bytes.NewReader(again)).Next(); err != nil || !bytes.Equal(m2.Payload, m.Payload) || len(m2.headers) != len(m.headers) {
			t.Fatalf("round trip: %v", err)
		}
	}
}

// TestMalformedFramesAgreeWithSDK mutates valid messages (a flipped byte
// anywhere, lengths changed, the frame cut), fixes the checksums, and holds
// the two decoders to the same verdict.
func TestMalformedFramesAgreeWithSDK(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		b, err := Append(nil, randHeaders(r), bytes.Repeat([]byte("p"), r.IntN(50)))
		if err != nil {
			t.Fatal(err)
		}
		switch r.IntN(4) {
		case 0:
			b[12+r.IntN(len(b)-12)] ^= byte(1 + r.IntN(255))
		case 1:
			binary.BigEndian.PutUint32(b[4:], uint32(r.IntN(len(b))))
		case 2:
			binary.BigEndian.PutUint32(b[0:], uint32(r.IntN(len(b)+8)))
		case 3:
			i := 12 + r.IntN(len(b)-12)
			b[i] = byte(r.IntN(12)) // a type byte, maybe unknown
		}
		fixCRCs(b)
		decodeAll(t, b)
	}
}

func TestChecksumsAreChecked(t *testing.T) {
	t.Parallel()
	good, _ := Append(nil, []Header{{Name: ":event-type", Value: StringValue("messageStart")}}, []byte(`{}`))
	for _, i := range []int{0, 5, 9, 14, len(good) - 8, len(good) - 1} {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		if _, err := NewDecoder(bytes.NewReader(b)).Next(); err == nil {
			t.Errorf("byte %d flipped: decoded", i)
		}
	}
}

// TestLyingLengthIsBounded: a prelude announcing more than the bounds is
// refused before any read, and one announcing the most allowed, followed
// by a few bytes, allocates about what arrived, not what it announced.
func TestLyingLengthIsBounded(t *testing.T) {
	t.Parallel()
	prelude := func(total, hlen uint32) []byte {
		b := binary.BigEndian.AppendUint32(nil, total)
		b = binary.BigEndian.AppendUint32(b, hlen)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	}
	if _, err := NewDecoder(bytes.NewReader(prelude(1<<31, 0))).Next(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a 2 GiB frame: err = %v; want ErrTooLarge", err)
	}
	if _, err := NewDecoder(bytes.NewReader(prelude(minMessageLen+MaxHeadersLen+1, MaxHeadersLen+1))).Next(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("headers over the bound: err = %v; want ErrTooLarge", err)
	}
	for _, bad := range [][]byte{prelude(0, 0), prelude(15, 0), prelude(20, 5)} {
		if _, err := NewDecoder(bytes.NewReader(bad)).Next(); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("prelude %x: err = %v; want a format error", bad, err)
		}
	}
	d := NewDecoder(io.MultiReader(bytes.NewReader(prelude(minMessageLen+MaxPayloadLen, 0)), bytes.NewReader(make([]byte, 100))))
	if _, err := d.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut frame: err = %v; want io.ErrUnexpectedEOF", err)
	}
	if c := cap(d.buf); c > 64<<10 {
		t.Errorf("buffer grew to %d bytes for 100 received", c)
	}
}

func TestStreamEnds(t *testing.T) {
	t.Parallel()
	one, _ := Append(nil, nil, []byte("a"))
	two, _ := Append(bytes.Clone(one), []Header{{Name: "n", Value: Value{Type: True}}}, nil)
	d := NewDecoder(bytes.NewReader(two))
	for i := range 2 {
		if _, err := d.Next(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if _, err := d.Next(); err != io.EOF {
		t.Errorf("after the last message: %v; want io.EOF", err)
	}
	if _, err := NewDecoder(bytes.NewReader(two[:len(two)-3])).Next(); err != nil {
		t.Fatalf("first message of a cut stream: %v", err)
	}
	d = NewDecoder(bytes.NewReader(two[:len(one)+5]))
	d.Next()
	if _, err := d.Next(); err != io.ErrUnexpectedEOF {
		t.Errorf("cut in a prelude: %v; want io.ErrUnexpectedEOF", err)
	}
}

func TestAppendRefuses(t *testing.T) {
	t.Parallel()
	for name, hs := range map[string][]Header{
		"long name":    {{Name: string(make([]byte, 256)), Value: StringValue("v")}},
		"long value":   {{Name: "n", Value: Value{Type: String, Bytes: make([]byte, MaxHeaderValueLen+1)}}},
		"short uuid":   {{Name: "n", Value: Value{Type: UUID, Bytes: make([]byte, 15)}}},
		"unknown type": {{Name: "n", Value: Value{Type: 10}}},
	} {
		if b, err := Append([]byte("keep"), hs, nil); err == nil || string(b) != "keep" {
			t.Errorf("%s: %q, %v; want an error and dst unchanged", name, b, err)
		}
	}
}

// FuzzDecode: any bytes decode without a panic, as the SDK's decoder
// decodes them, and every message decoded encodes back to a message that
// decodes the same.
func FuzzDecode(f *testing.F) {
	a, _ := Append(nil, []Header{{Name: ":event-type", Value: StringValue("contentBlockDelta")}, {Name: ":message-type", Value: StringValue("event")}}, []byte(`{"delta":{"text":"Hi"}}`))
	b, _ := Append(nil, []Header{{Name: "t", Value: Value{Type: Timestamp, Int: 1}}, {Name: "u", Value: Value{Type: UUID, Bytes: make([]byte, 16)}}}, nil)
	f.Add(append(a, b...))
	f.Add(a[:len(a)-2])
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeAll(t, b)
		// And with the checksums made right, the structure is what is
		// tested.
		fixed := bytes.Clone(b)
		fixCRCs(fixed)
		decodeAll(t, fixed)
	})
}

// FuzzRoundTrip: what Append accepts decodes to the same headers and
// payload.
func FuzzRoundTrip(f *testing.F) {
	f.Add(":event-type", byte(7), "messageStart", int64(0), []byte(`{}`))
	f.Fuzz(func(t *testing.T, name string, typ byte, s string, n int64, payload []byte) {
		v := Value{Type: ValueType(typ % 10), Int: n, Bytes: []byte(s)}
		switch v.Type {
		case Byte:
			v.Int = int64(int8(n))
		case Short:
			v.Int = int64(int16(n))
		case Integer:
			v.Int = int64(int32(n))
		}
		if v.Type == UUID {
			v.Bytes = append(v.Bytes, make([]byte, 16)...)[:16]
		}
		hs := []Header{{Name: name, Value: v}, {Name: ":message-type", Value: StringValue("event")}}
		enc, err := Append(nil, hs, payload)
		if err != nil {
			return
		}
		m, err := NewDecoder(bytes.NewReader(enc)).Next()
		if err != nil {
			t.Fatalf("decoding what Append wrote: %v", err)
		}
		got := m.AppendHeaders(nil)
		if !sameHeaders(sdkHeaders(got), sdkHeaders(hs)) || !bytes.Equal(m.Payload, payload) {
			t.Fatalf("round trip: %+v %q; want %+v %q", got, m.Payload, hs, payload)
		}
	})
}
