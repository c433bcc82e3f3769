package policy

import (
	"bytes"
	"hash/maphash"
	"sync/atomic"

	"github.com/detour-proxy/detour/rewrite"
)

// maxMemoErrorBody is the largest error body parseErrorMemo remembers.
// Vendor error envelopes are a few hundred bytes.
const maxMemoErrorBody = 4 << 10

// errorMemo is one error body and what rewrite.ParseError read from it.
type errorMemo struct {
	body []byte
	info rewrite.ErrorInfo
}

var (
	errorMemoSeed = maphash.MakeSeed()
	// lastErrorBody is the hash of the last error body parsed; a body seen
	// twice in a row is remembered in lastErrorInfo.
	lastErrorBody atomic.Uint64
	lastErrorInfo atomic.Pointer[errorMemo]
)

// parseErrorMemo is rewrite.ParseError with a memo of one body: an upstream
// that fails fails the same way for every request (an exhausted quota, an
// overloaded region), and during that failover storm each attempt's error
// body was decoded again with encoding/json, most of the CPU Classify spent.
//
// ParseError is a pure function of the body, so a remembered body answers
// as ParseError would. A body is remembered only when it comes twice in a
// row (by hash, so that a stream of different bodies costs no allocation)
// and its info has no QuotaIDs (so that no slice is shared between
// verdicts). Concurrent callers at worst replace each other's memo.
func parseErrorMemo(body []byte) rewrite.ErrorInfo {
	if len(body) > maxMemoErrorBody {
		return rewrite.ParseError(body)
	}
	if m := lastErrorInfo.Load(); m != nil && bytes.Equal(m.body, body) {
		return m.info
	}
	info := rewrite.ParseError(body)
	h := maphash.Bytes(errorMemoSeed, body)
	if lastErrorBody.Swap(h) == h && info.QuotaIDs == nil {
		lastErrorInfo.Store(&errorMemo{body: bytes.Clone(body), info: info})
	}
	return info
}
