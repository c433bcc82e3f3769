package jsonscan

import (
	"bytes"
	"testing"
)

// lastMemberSeeds are objects whose last member a backward read can get
// wrong: strings holding quotes, backslashes before a quote, braces and
// colons in strings, nested containers, literals, numbers, spaces, and
// keys with escapes.
var lastMemberSeeds = []string{
	`{"a":1}`, ` { "a" : 1 } `, `{"a":1,"b":-2.5e+3}`, `{"a":1,"b":true}`, `{"a":{},"b":null}`,
	`{"a":"x","b":"y\"z"}`, `{"a":"x","b":"y\\"}`, `{"a":"x","b":"\\\"}"}`, `{"b":"}{][,:\"q\\\\"}`,
	`{"a":[1,{"b":"]"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
	`{"x":{"y":[[],{}]},"z":[{"\"":"\\"}]}`, `{"us\u0061ge":{"prompt_tokens":5}}`, `{"a\\":"b"}`,
	`{"a":1,"b\"c":2}`, `{}`, `{ }`, `[]`, `[1]`, `"s"`, `1`, `{"a":[]}`, `{"a":""}`, `{"":0}`,
	`{"a":1,"a":2}`, "{\"a\":\n\t1\r\n}",
}

func TestLastMember(t *testing.T) {
	t.Parallel()
	for _, s := range lastMemberSeeds {
		checkLastMember(t, []byte(s))
	}
}

func FuzzLastMember(f *testing.F) {
	for _, s := range lastMemberSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkLastMember)
}

// checkLastMember holds LastMember to the last member a forward walk
// finds, on valid JSON; on anything else it must only not panic.
func checkLastMember(t *testing.T, v []byte) {
	key, value, escaped, ok := LastMember(v)
	if Valid(v) != nil {
		return
	}
	it, isObj := Object(v)
	var want Member
	found := false
	for m, more := it.Next(); more; m, more = it.Next() {
		want, found = m, true
	}
	if !isObj || !found {
		if ok {
			t.Fatalf("LastMember(%q) = %q: %q, want none", v, key, value)
		}
		return
	}
	if !ok || !bytes.Equal(key, want.Key()) || !bytes.Equal(value, want.Value()) || escaped != want.keyEscaped {
		t.Fatalf("LastMember(%q) = %q: %q (escaped %v, ok %v), want %q: %q (escaped %v)", v, key, value, escaped, ok, want.Key(), want.Value(), want.keyEscaped)
	}
}
