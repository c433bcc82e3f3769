package anthropic

import (
	"strconv"

	"github.com/detour-proxy/detour/rewrite"
)

// appendString appends s to dst as a JSON string (rewrite.AppendJSONString).
func appendString(dst []byte, s string) []byte { return rewrite.AppendJSONString(dst, s) }

// appendInt appends n in decimal.
func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
