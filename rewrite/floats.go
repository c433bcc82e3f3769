package rewrite

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unsafe"
)

// AppendFloat32Array appends v as a JSON array, each float32 in its
// shortest form that reads back as the same float32 — what OpenAI and
// Gemini print for embedding values, so a vector carried across vendors
// keeps its digits. JSON has no NaN or infinity; such a value (a broken
// vector) is written as 0 rather than as invalid JSON.
func AppendFloat32Array(b []byte, v []float32) []byte {
	b = append(b, '[')
	for i, f := range v {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			b = append(b, '0')
			continue
		}
		b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
	}
	return append(b, ']')
}

// ParseFloat32Array reads a JSON array of numbers as float32s. It is the
// embeddings answer's hot spot — 1,536 to 3,072 numbers per vector — and
// reads the array in one pass, where encoding/json's reflection into a
// []float32 costs several times as much.
func ParseFloat32Array(raw []byte) ([]float32, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, errors.New("not a JSON array")
	}
	i = skipSpace(raw, i+1)
	out := make([]float32, 0, len(raw)/10)
	if i < len(raw) && raw[i] == ']' {
		return out, trailing(raw, i+1)
	}
	for {
		j := i
		for j < len(raw) && isNumberByte(raw[j]) {
			j++
		}
		if j == i {
			return nil, fmt.Errorf("not a number at offset %d", i)
		}
		// ParseFloat keeps no reference to its argument (its errors copy
		// it), so the bytes need no string copy.
		f, err := strconv.ParseFloat(unsafe.String(&raw[i], j-i), 32)
		if err != nil || !validJSONNumber(raw[i:j]) {
			return nil, fmt.Errorf("bad number %q", raw[i:j])
		}
		out = append(out, float32(f))
		i = skipSpace(raw, j)
		if i >= len(raw) {
			return nil, errors.New("unterminated array")
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return out, trailing(raw, i+1)
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d", raw[i], i)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

func trailing(b []byte, i int) error {
	if skipSpace(b, i) != len(b) {
		return errors.New("data after the array")
	}
	return nil
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// validJSONNumber checks the JSON number grammar, which is stricter than
// ParseFloat's (no "+1", ".5", "1.", hex, or underscores).
func validJSONNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i == len(b)
}
