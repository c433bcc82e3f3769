package rewrite

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

func TestFloat32ArrayRoundTrip(t *testing.T) {
	v := []float32{0, -0.5, 1e-05, 0.012345678, 3.4028235e+38, -1.1754944e-38}
	b := AppendFloat32Array(nil, v)
	if want := `[0,-0.5,1e-05,0.012345678,3.4028235e+38,-1.1754944e-38]`; string(b) != want {
		t.Errorf("AppendFloat32Array = %s; want %s", b, want)
	}
	got, err := ParseFloat32Array(b)
	if err != nil || !reflect.DeepEqual(got, v) {
		t.Errorf("ParseFloat32Array(%s) = %v, %v", b, got, err)
	}
	if b := AppendFloat32Array(nil, []float32{float32(math.NaN()), float32(math.Inf(1))}); string(b) != "[0,0]" {
		t.Errorf("NaN and Inf written as %s; want [0,0]", b)
	}
	for _, bad := range []string{``, `{}`, `[1,]`, `[,1]`, `[1 2]`, `[+1]`, `[.5]`, `[1.]`, `[01]`, `[1e]`, `[0x10]`, `[1]x`, `[1`, `["1"]`, `[1_0]`, `[inf]`} {
		if _, err := ParseFloat32Array([]byte(bad)); err == nil {
			t.Errorf("ParseFloat32Array(%q): no error", bad)
		}
	}
}

// FuzzParseFloat32Array holds the fast parser to encoding/json: the same
// numbers for every array json accepts into a []float32, and an error for
// everything it refuses.
func FuzzParseFloat32Array(f *testing.F) {
	for _, s := range []string{`[]`, ` [ 1 , -2.5e3 ] `, `[0.1,1e-45,1e39]`, `[-0,0.0]`, `[1,]`, `[01]`, "[1\t,\n2]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseFloat32Array(b)
		var want []float32
		werr := json.Unmarshal(b, &want)
		if werr != nil {
			// json refuses out-of-range float32s too; the fast parser
			// must refuse whatever json refuses.
			if err == nil {
				t.Fatalf("%q: parsed %v; json refuses it: %v", b, got, werr)
			}
			return
		}
		if want == nil {
			// null decodes to a nil slice without error; not an array.
			if err == nil {
				t.Fatalf("%q: parsed %v", b, got)
			}
			return
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %v, %v; json %v", b, got, err, want)
		}
	})
}
