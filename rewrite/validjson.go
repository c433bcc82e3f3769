package rewrite

import "github.com/detour-proxy/detour/rewrite/internal/jsonscan"

// ValidJSON reports whether b is exactly one JSON value, with whitespace
// around it allowed: json.Valid's verdict (jsonscan's fuzz targets hold
// it to encoding/json), from detour's own scanner, which allocates nothing
// and reads a long string eight bytes at a time. policy.Classify checks
// every 2xx answer with it (a truncated or HTML 200 is a bad_response),
// where encoding/json's state machine cost more than anything else the
// chain does to an answer.
func ValidJSON(b []byte) bool { return jsonscan.Valid(b) == nil }

// AppendLogString appends s to dst as zerolog writes a string value (the
// Zerolog dialect of detour's one string escaper): the chain encodes the
// repeated parts of its log line itself and hands them to zerolog as raw
// JSON, which must be the bytes zerolog would have written.
func AppendLogString(dst []byte, s string) []byte {
	return jsonscan.AppendStringIn(dst, s, jsonscan.Zerolog)
}
