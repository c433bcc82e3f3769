package chain

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// endless delivers bytes for ever, as a transport that under-declares a
// body's length would.
type endless struct{}

// xs is what endless delivers, copied rather than written byte by byte:
// under -race every byte written in a loop is checked, 64 MiB of them some
// seconds of CPU, where one copy is checked once.
var xs = bytes.Repeat([]byte{'x'}, 64<<10)

func (endless) Read(p []byte) (int, error) {
	for n := 0; n < len(p); {
		n += copy(p[n:], xs)
	}
	return len(p), nil
}

func TestReadAnswerKeepsItsBoundWhatEverTheDeclaredLength(t *testing.T) {
	t.Parallel()
	got, err := readAnswer(endless{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != maxResponseBody {
		t.Fatalf("read %d bytes of a body declared as 10 that never ends; want the bound, %d", len(got), maxResponseBody)
	}
}

func TestReadAnswerReadsExactlyTheBody(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"", "{}", strings.Repeat("a", 4096), strings.Repeat("b", 70000)} {
		for _, declared := range []int64{int64(len(body)), -1} {
			got, err := readAnswer(strings.NewReader(body), declared)
			if err != nil || !bytes.Equal(got, []byte(body)) {
				t.Fatalf("len %d declared %d: got %d bytes, %v", len(body), declared, len(got), err)
			}
		}
		// More than declared is read too, within the bound.
		got, err := readAnswer(strings.NewReader(body+"tail"), int64(len(body)))
		if err != nil || string(got) != body+"tail" {
			t.Fatalf("len %d with a tail: got %d bytes, %v", len(body), len(got), err)
		}
	}
	if _, err := readAnswer(io.MultiReader(strings.NewReader("ab"), errReader{}), 2); err == nil {
		t.Fatal("a read error was lost")
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
