package fakevendor

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		want []WeightedFault
	}{
		{"", nil},
		{"  ", nil},
		{"429:insufficient_quota=0.2,529=0.1,hang=0.05,html=0.01", []WeightedFault{
			{Fault{Kind: Status, Status: 429, Class: ClassInsufficientQuota}, 0.2},
			{Fault{Kind: Status, Status: 529}, 0.1},
			{Fault{Kind: Hang}, 0.05},
			{Fault{Kind: HTML200}, 0.01},
		}},
		{" 503 = 0.5 , ok=0.5", []WeightedFault{
			{Fault{Kind: Status, Status: 503}, 0.5},
			{Fault{}, 0.5},
		}},
		{"hang:5s=0.1,slow:250ms=0.1,stall:1m=0.1", []WeightedFault{
			{Fault{Kind: Hang, Delay: 5 * time.Second}, 0.1},
			{Fault{Kind: SlowFirstByte, Delay: 250 * time.Millisecond}, 0.1},
			{Fault{Kind: StreamStall, Delay: time.Minute}, 0.1},
		}},
		{"stream_error_early:overloaded=0.1,error_mid:rate_limit=0.1,status:auth=0.1", []WeightedFault{
			{Fault{Kind: StreamErrorEarly, Class: ClassOverloaded}, 0.1},
			{Fault{Kind: StreamErrorMid, Class: ClassRateLimit}, 0.1},
			{Fault{Kind: Status, Class: ClassAuth}, 0.1},
		}},
		{"cut=0.1,eof=0.1,empty=0.1,truncated=0.1,truncated_json=0.1,HTML_200=0.1,slow_first_byte=0.1", []WeightedFault{
			{Fault{Kind: StreamCut}, 0.1},
			{Fault{Kind: StreamEOF}, 0.1},
			{Fault{Kind: Empty200}, 0.1},
			{Fault{Kind: Truncated200}, 0.1},
			{Fault{Kind: Truncated200}, 0.1},
			{Fault{Kind: HTML200}, 0.1},
			{Fault{Kind: SlowFirstByte}, 0.1},
		}},
		// Sums to 1 only up to rounding; still accepted.
		{"500=0.7,429=0.2,503=0.1", []WeightedFault{
			{Fault{Kind: Status, Status: 500}, 0.7},
			{Fault{Kind: Status, Status: 429}, 0.2},
			{Fault{Kind: Status, Status: 503}, 0.1},
		}},
	} {
		got, err := ParseFaults(tc.spec)
		if err != nil {
			t.Errorf("ParseFaults(%q): %v", tc.spec, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseFaults(%q) = %+v; want %+v", tc.spec, got, tc.want)
		}
	}
}

func TestParseFaultsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		want []string // substrings of the error
	}{
		{"429", []string{`"429"`, "WHAT=PROBABILITY"}},
		{"429=0.1,,500=0.1", []string{`""`, "empty item"}},
		{"429=lots", []string{`"429=lots"`, `probability "lots"`}},
		{"429=1.5", []string{`"429=1.5"`, "[0, 1]"}},
		{"429=-0.1", []string{`"429=-0.1"`, "[0, 1]"}},
		{"429=NaN", []string{`"429=NaN"`}},
		{"200=0.1", []string{`"200=0.1"`, "not an error status"}},
		{"600=0.1", []string{`"600=0.1"`, "not an error status"}},
		{"429:bogus=0.1", []string{`"429:bogus=0.1"`, `unknown class "bogus"`}},
		{"explode=0.1", []string{`"explode=0.1"`, `unknown kind "explode"`}},
		{"=0.1", []string{`"=0.1"`, "missing status or kind"}},
		{"html:rate_limit=0.1", []string{`"html:rate_limit=0.1"`, "takes no class"}},
		{"429:5s=0.1", []string{`"429:5s=0.1"`, "takes no duration"}},
		{"hang:-5s=0.1", []string{`"hang:-5s=0.1"`, "not positive"}},
		{"429:auth:rate_limit=0.1", []string{"more than one class"}},
		{"429=0.6,500=0.6", []string{"sum to 1.2", "more than 1"}},
	} {
		_, err := ParseFaults(tc.spec)
		if err == nil {
			t.Errorf("ParseFaults(%q) succeeded; want an error", tc.spec)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ParseFaults(%q) error = %q; want it to contain %q", tc.spec, err, w)
			}
		}
	}
}

func TestFaultString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f    Fault
		want string
	}{
		{Fault{}, "ok"},
		{Fault{Kind: Status, Status: 429, Class: ClassInsufficientQuota}, "429:insufficient_quota"},
		{Fault{Kind: Status}, "status"},
		{Fault{Kind: Hang, Delay: 5 * time.Second}, "hang:5s"},
		{Fault{Kind: StreamErrorMid, Class: ClassRateLimit}, "stream_error_mid:rate_limit"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%#v.String() = %q; want %q", tc.f, got, tc.want)
		}
		// What String prints, ParseFaults reads back.
		parsed, err := ParseFaults(tc.want + "=1")
		if err != nil || len(parsed) != 1 || parsed[0].Fault != tc.f {
			t.Errorf("ParseFaults(%q) = %+v, %v; want %+v", tc.want+"=1", parsed, err, tc.f)
		}
	}
}

func TestKindsValid(t *testing.T) {
	t.Parallel()
	for _, k := range append([]FaultKind{OK}, Kinds...) {
		if !k.Valid() {
			t.Errorf("%q is not Valid", k)
		}
		if k != OK {
			if got, _ := ParseFaults(string(k) + "=1"); len(got) != 1 || got[0].Fault.Kind != k {
				t.Errorf("ParseFaults does not know kind %q", k)
			}
		}
	}
	if FaultKind("bogus").Valid() {
		t.Error("bogus kind is Valid")
	}
}
