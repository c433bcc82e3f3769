package fakevendor

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// WeightedFault is a fault with the probability of drawing it for a request
// that has no scripted fault.
type WeightedFault struct {
	// Fault is what the drawn request gets.
	Fault Fault
	// P is the probability, in [0, 1]; the probabilities of a set sum to at
	// most 1 and the rest of the mass is the default fault.
	P float64
}

// kindNames maps the names ParseFaults accepts to kinds: every kind's own
// name plus short aliases for the command line.
var kindNames = map[string]FaultKind{
	"ok": OK, "status": Status,
	"hang":        Hang,
	"slow":        SlowFirstByte,
	"error_early": StreamErrorEarly,
	"error_mid":   StreamErrorMid,
	"cut":         StreamCut,
	"eof":         StreamEOF,
	"stall":       StreamStall,
	"html":        HTML200,
	"empty":       Empty200,
	"truncated":   Truncated200,
}

func init() {
	for _, k := range Kinds {
		kindNames[string(k)] = k
	}
}

// ParseFaults parses a fault mix such as
// "429:insufficient_quota=0.2,529=0.1,hang=0.05,html=0.01". Each
// comma-separated item is WHAT=PROBABILITY, where WHAT is
//
//   - STATUS or STATUS:CLASS — an HTTP error (STATUS in 400–599; CLASS one
//     of Classes, else the vendor's generic body for STATUS);
//   - KIND, optionally followed by :CLASS (stream_error_early,
//     stream_error_mid, status) or :DURATION (hang, slow_first_byte,
//     stream_stall) — a kind by its name or alias: ok, status, hang, slow,
//     error_early, error_mid, cut, eof, stall, html, empty, truncated.
//
// Probabilities are in [0, 1] and sum to at most 1. Errors name the bad item.
// An empty spec is no faults.
func ParseFaults(spec string) ([]WeightedFault, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	var out []WeightedFault
	sum := 0.0
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		wf, err := parseItem(item)
		if err != nil {
			return nil, fmt.Errorf("fakevendor: fault %q: %w", item, err)
		}
		sum += wf.P
		out = append(out, wf)
	}
	// A little slack so that "0.7,0.2,0.1" is not refused for rounding.
	if sum > 1+1e-9 {
		return nil, fmt.Errorf("fakevendor: fault probabilities sum to %g, more than 1", sum)
	}
	return out, nil
}

// parseItem parses one WHAT=PROBABILITY item.
func parseItem(item string) (WeightedFault, error) {
	if item == "" {
		return WeightedFault{}, errors.New("empty item")
	}
	what, prob, ok := strings.Cut(item, "=")
	if !ok {
		return WeightedFault{}, errors.New("want WHAT=PROBABILITY")
	}
	p, err := strconv.ParseFloat(strings.TrimSpace(prob), 64)
	if err != nil || math.IsNaN(p) || p < 0 || p > 1 {
		return WeightedFault{}, fmt.Errorf("probability %q is not a number in [0, 1]", prob)
	}
	parts := strings.Split(strings.TrimSpace(what), ":")
	var f Fault
	head := strings.ToLower(strings.TrimSpace(parts[0]))
	if n, err := strconv.Atoi(head); err == nil {
		if n < 400 || n > 599 {
			return WeightedFault{}, fmt.Errorf("status %d is not an error status (400–599)", n)
		}
		f = Fault{Kind: Status, Status: n}
	} else if k, ok := kindNames[head]; ok {
		f = Fault{Kind: k}
	} else if head == "" {
		return WeightedFault{}, errors.New("missing status or kind before '='")
	} else {
		return WeightedFault{}, fmt.Errorf("unknown kind %q (want a status or one of %s)", head, kindList())
	}
	for _, arg := range parts[1:] {
		arg = strings.TrimSpace(arg)
		if err := applyArg(&f, arg); err != nil {
			return WeightedFault{}, err
		}
	}
	return WeightedFault{Fault: f, P: p}, nil
}

// applyArg applies a :CLASS or :DURATION argument to f.
func applyArg(f *Fault, arg string) error {
	if d, err := time.ParseDuration(arg); err == nil {
		switch f.Kind {
		case Hang, SlowFirstByte, StreamStall:
		default:
			return fmt.Errorf("kind %q takes no duration", kindName(f.Kind))
		}
		if d <= 0 {
			return fmt.Errorf("duration %q is not positive", arg)
		}
		f.Delay = d
		return nil
	}
	if arg == "" || !validClass(arg) {
		return fmt.Errorf("unknown class %q (want one of %s)", arg, strings.Join(Classes, ", "))
	}
	switch f.Kind {
	case Status, StreamErrorEarly, StreamErrorMid:
	default:
		return fmt.Errorf("kind %q takes no class", kindName(f.Kind))
	}
	if f.Class != "" {
		return fmt.Errorf("more than one class (%q and %q)", f.Class, arg)
	}
	f.Class = arg
	return nil
}

// kindName is the name of k as ParseFaults spells it.
func kindName(k FaultKind) string {
	if k == OK {
		return "ok"
	}
	return string(k)
}

// kindList lists the kind names for error messages.
func kindList() string {
	names := []string{"ok"}
	for _, k := range Kinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}
