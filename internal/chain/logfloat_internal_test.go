package chain

import (
	"bytes"
	"math"
	"testing"

	"github.com/rs/zerolog"
)

// TestAppendLogFloatIsZerologs: appendLogFloat writes what zerolog's
// Float64 writes, for both zeros (the line's cost_usd of most requests is
// 0, written without formatting) and the values around them.
func TestAppendLogFloatIsZerologs(t *testing.T) {
	t.Parallel()
	values := []float64{0, math.Copysign(0, -1), math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
		1e-7, 0.000123, 1, -1, 12.5, 1e21, math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, v := range values {
		var line bytes.Buffer
		l := zerolog.New(&line)
		l.Log().Float64("f", v).Send()
		want := bytes.TrimSuffix(bytes.TrimPrefix(line.Bytes(), []byte(`{"f":`)), []byte("}\n"))
		if got := appendLogFloat(nil, v); !bytes.Equal(got, want) {
			t.Errorf("%v: got %s, want %s", v, got, want)
		}
	}
}
