package resp

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestReadReplies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		wire string
		want Value
	}{
		{"+OK\r\n", Value{Kind: KindSimple, Str: "OK"}},
		{"+\r\n", Value{Kind: KindSimple}},
		{"-NOSCRIPT No matching script. Please use EVAL.\r\n", Value{Kind: KindError, Str: "NOSCRIPT No matching script. Please use EVAL."}},
		{":0\r\n", Value{Kind: KindInt}},
		{":-42\r\n", Value{Kind: KindInt, Int: -42}},
		{":9223372036854775807\r\n", Value{Kind: KindInt, Int: 1<<63 - 1}},
		{":-9223372036854775808\r\n", Value{Kind: KindInt, Int: -1 << 63}},
		{"$3\r\nfoo\r\n", Value{Kind: KindBulk, Str: "foo"}},
		{"$0\r\n\r\n", Value{Kind: KindBulk}},
		{"$4\r\na\r\nb\r\n", Value{Kind: KindBulk, Str: "a\r\nb"}},
		{"$-1\r\n", Value{Kind: KindNull}},
		{"*-1\r\n", Value{Kind: KindNull}},
		{"*0\r\n", Value{Kind: KindArray}},
		{"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$-1\r\n", Value{Kind: KindArray, Elems: []Value{{Kind: KindBulk, Str: "message"}, {Kind: KindBulk, Str: "ch"}, {Kind: KindNull}}}},
		{"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n", Value{Kind: KindArray, Elems: []Value{
			{Kind: KindBulk, Str: "0"},
			{Kind: KindArray, Elems: []Value{{Kind: KindBulk, Str: "a"}, {Kind: KindBulk, Str: "b"}}},
		}}},
		{"*2\r\n:1\r\n-ERR in a pipeline\r\n", Value{Kind: KindArray, Elems: []Value{{Kind: KindInt, Int: 1}, {Kind: KindError, Str: "ERR in a pipeline"}}}},
	} {
		got, err := NewReader(strings.NewReader(tc.wire), 0).Read()
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Read(%q) = %+v, %v; want %+v", tc.wire, got, err, tc.want)
		}
	}
}

func TestReadRefusesWhatIsNotRESP2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		wire string
		want error
	}{
		{"OK\r\n", ErrProtocol},
		{"+OK\n", ErrProtocol},
		{"\r\n", ErrProtocol},
		{":\r\n", ErrProtocol},
		{":+1\r\n", ErrProtocol},
		{": 1\r\n", ErrProtocol},
		{":9223372036854775808\r\n", ErrProtocol},
		{":-9223372036854775809\r\n", ErrProtocol},
		{":99999999999999999999\r\n", ErrProtocol},
		{"$-2\r\n", ErrProtocol},
		{"$3\r\nfoobar\r\n", ErrProtocol},
		{"*-2\r\n", ErrProtocol},
		{"%1\r\n+a\r\n+b\r\n", ErrProtocol}, // a RESP3 map: never asked for
		{strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n", ErrProtocol},
		{"+" + strings.Repeat("a", maxLine) + "\r\n", ErrProtocol},
		{"$3\r\nfo", io.ErrUnexpectedEOF},
		{"+OK", io.ErrUnexpectedEOF},
		{"*2\r\n:1\r\n", io.EOF},
		{"", io.EOF},
	} {
		_, err := NewReader(strings.NewReader(tc.wire), 0).Read()
		if !errors.Is(err, tc.want) {
			t.Errorf("Read(%.40q): %v; want %v", tc.wire, err, tc.want)
		}
	}
}

// TestReplyBudget: a reply is refused as soon as what it claims, or what
// it has taken, passes the budget.
func TestReplyBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		wire string
		max  int
		want error
	}{
		{"$5\r\nhello\r\n", 11, nil},
		{"$5\r\nhello\r\n", 10, ErrReplyTooLarge},
		{"$2147483647\r\n", 0, ErrReplyTooLarge},
		{"$9223372036854775807\r\n", 0, ErrReplyTooLarge},
		{"*9223372036854775807\r\n", 0, ErrReplyTooLarge},
		{"*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", 20, nil},
		{"*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", 19, ErrReplyTooLarge},
		{"*2\r\n+" + strings.Repeat("a", 5000) + "\r\n+b\r\n", 5000, ErrReplyTooLarge},
	} {
		_, err := NewReader(strings.NewReader(tc.wire), tc.max).Read()
		if !errors.Is(err, tc.want) {
			t.Errorf("Read(%.30q) with budget %d: %v; want %v", tc.wire, tc.max, err, tc.want)
		}
	}
	// The budget is per reply: the next one starts afresh.
	r := NewReader(strings.NewReader(strings.Repeat("$5\r\nhello\r\n", 3)), 11)
	for i := range 3 {
		if v, err := r.Read(); err != nil || v.Str != "hello" {
			t.Errorf("reply %d: %+v, %v", i, v, err)
		}
	}
}

// TestLyingLengthsAllocateLittle: with a budget large enough to let them
// through, a bulk length or an array count that the bytes sent do not
// back costs what was sent, not what was claimed. Not parallel: it reads
// the process's allocation counter.
func TestLyingLengthsAllocateLittle(t *testing.T) {
	for _, wire := range []string{
		"$900000000\r\n" + strings.Repeat("x", 1000),
		"*300000000\r\n:1\r\n:2\r\n",
		"*1000\r\n" + strings.Repeat("*1000\r\n", 20),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := NewReader(strings.NewReader(wire), 1<<30).Read()
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("Read(%.20q) succeeded", wire)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
			t.Errorf("Read(%.20q) allocated %d bytes; want at most a few chunks", wire, got)
		}
	}
}

func TestAppendCommand(t *testing.T) {
	t.Parallel()
	got, err := AppendCommand(nil, "EVALSHA", []byte("ab"), 2, int64(-3), uint64(4), 0.5, 1e21, 250.0)
	want := "*8\r\n$7\r\nEVALSHA\r\n$2\r\nab\r\n$1\r\n2\r\n$2\r\n-3\r\n$1\r\n4\r\n$3\r\n0.5\r\n$22\r\n1000000000000000000000\r\n$3\r\n250\r\n"
	if err != nil || string(got) != want {
		t.Errorf("AppendCommand = %q, %v; want %q", got, err, want)
	}
	if _, err := AppendCommand(nil, "SET", struct{}{}); err == nil {
		t.Error("an argument of an unknown type was sent")
	}
}

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	v, _ := NewReader(strings.NewReader("-NOSCRIPT No matching script. Please use EVAL.\r\n"), 0).Read()
	err := v.Err()
	if !errors.Is(err, ErrNoScript) || errors.Is(err, ErrWrongType) || !IsReply(err) {
		t.Errorf("%v: Is NOSCRIPT %v, Is WRONGTYPE %v, IsReply %v; want true, false, true",
			err, errors.Is(err, ErrNoScript), errors.Is(err, ErrWrongType), IsReply(err))
	}
	if code := err.(*Error).Code(); code != "NOSCRIPT" {
		t.Errorf("Code %q; want NOSCRIPT", code)
	}
	if IsReply(io.EOF) || IsReply(ErrReplyTooLarge) {
		t.Error("a failure to read counted as an error reply")
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url        string
		addr       string
		tls        bool
		user, pass string
		db         int
	}{
		{url: "redis://127.0.0.1:6380", addr: "127.0.0.1:6380"},
		{url: "redis://redis.infra.svc", addr: "redis.infra.svc:6379"},
		{url: "redis://", addr: "localhost:6379"},
		{url: "redis://[::1]:7000/2", addr: "[::1]:7000", db: 2},
		{url: "rediss://cache.example.com:6380/0", addr: "cache.example.com:6380", tls: true},
		{url: "redis://detour@h:1/15", addr: "h:1", user: "detour", db: 15},
		{url: "redis://u:p%40ss@h:1", addr: "h:1", user: "u", pass: "p@ss"},
		{url: "redis://:secret@h:1", addr: "h:1", pass: "secret"},
	} {
		o, err := ParseURL(tc.url)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.url, err)
			continue
		}
		if o.Addr != tc.addr || (o.TLS != nil) != tc.tls || o.Username != tc.user || o.Password != tc.pass || o.DB != tc.db {
			t.Errorf("ParseURL(%q) = %+v; want addr %s, tls %v, user %q, password %q, db %d", tc.url, o, tc.addr, tc.tls, tc.user, tc.pass, tc.db)
		}
		if tc.tls && (o.TLS.ServerName != "cache.example.com" || o.TLS.RootCAs != nil) {
			t.Errorf("ParseURL(%q): TLS %+v; want the host as ServerName and the system roots", tc.url, o.TLS)
		}
	}
	for _, bad := range []string{"http://h:1", "redis://h:0", "redis://h:x", "redis://h:1/a", "redis://h:1/-1", "redis://h:1/01", "redis://h:1?db=2", "redis:h", "redis://h:1/0/1"} {
		if o, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) = %+v; want an error", bad, o)
		}
	}
}

// FuzzReader: no input makes the reader panic, read past its budget, or
// return a value that does not encode back to one it reads the same.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "-ERR x\r\n", ":-1\r\n", "$3\r\nfoo\r\n", "$-1\r\n", "*-1\r\n", "*0\r\n",
		"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\n{\"t\"\r\n",
		"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n",
		"*2\r\n*1\r\n*1\r\n:1\r\n-NOSCRIPT\r\n",
		"$900000000\r\nabc", "*99999\r\n", ":9223372036854775807\r\n",
	} {
		f.Add([]byte(s), 64)
	}
	f.Fuzz(func(t *testing.T, data []byte, budget int) {
		budget = 1 + (budget&0x7fffffff)%4096
		src := bytes.NewReader(data)
		r := NewReader(src, budget)
		for {
			v, err := r.Read()
			if err != nil {
				return
			}
			// The encoding is never longer than what was read (a length
			// or integer may lose leading zeros or a "-0").
			enc := AppendValue(nil, v)
			if len(enc) > budget {
				t.Fatalf("read %+v, %d bytes encoded, within a budget of %d", v, len(enc), budget)
			}
			again, err := NewReader(bytes.NewReader(enc), len(enc)+5).Read()
			if err != nil || !reflect.DeepEqual(again, v) {
				t.Fatalf("%q read as %+v, encoded as %q, read back as %+v, %v", data, v, enc, again, err)
			}
		}
	})
}
