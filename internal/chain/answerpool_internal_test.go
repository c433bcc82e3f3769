package chain

import (
	"bytes"
	"strings"
	"testing"
)

// TestReadPooledAnswer: an answer read into a pooled buffer is the answer
// readAnswer reads, whatever length it declares (its own, less, more,
// none), and only answers that declare a length that fits a class get a
// pooled buffer.
func TestReadPooledAnswer(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 1, 100, 1535, 1536, 1537, 4000, 60000, 65000, 70000} {
		body := strings.Repeat("a", size)
		for _, declared := range []int64{int64(size), -1, int64(size) / 2, int64(size) + 10} {
			want, werr := readAnswer(strings.NewReader(body), declared)
			got, buf, err := readPooledAnswer(strings.NewReader(body), declared)
			if !bytes.Equal(got, want) || (err == nil) != (werr == nil) {
				t.Fatalf("size %d, declared %d: %d bytes, %v; readAnswer reads %d, %v", size, declared, len(got), err, len(want), werr)
			}
			fits := declared >= 0 && declared+bytes.MinRead <= answerClasses[len(answerClasses)-1]
			if (buf != nil) != fits {
				t.Fatalf("size %d, declared %d: pooled %v; want %v", size, declared, buf != nil, fits)
			}
			if buf != nil && int64(cap(buf.b)) != answerClasses[buf.class] {
				t.Fatalf("size %d: a buffer of %d bytes in class %d", size, cap(buf.b), buf.class)
			}
			buf.release()
		}
	}
}
