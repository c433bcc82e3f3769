package openai

import (
	"encoding/base64"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/detour-proxy/detour/rewrite"
	"github.com/detour-proxy/detour/rewrite/internal/jsonscan"
)

// looseText is an optional extension field (reasoning text) that detour
// reads when it is a string and ignores in any other form, so that an
// unexpected variant from some server cannot fail a whole answer.
type looseText string

// UnmarshalJSON implements json.Unmarshaler.
func (t *looseText) UnmarshalJSON(b []byte) error {
	if b[0] != '"' {
		*t = ""
		return nil
	}
	s, err := unquote(b)
	*t = looseText(s)
	return err
}

// unquote decodes one JSON string, already validated by the caller's
// decoder, as encoding/json would (jsonscan.String): strings without
// escapes cost one allocation and no second scan through encoding/json.
func unquote(b []byte) (string, error) {
	if len(b) < 2 || b[0] != '"' {
		return "", errNotString
	}
	return jsonscan.String(b), nil
}

var errNotString = errors.New("want a JSON string")

// appendString appends s to dst as a JSON string (rewrite.AppendJSONString).
func appendString(dst []byte, s string) []byte { return rewrite.AppendJSONString(dst, s) }

// appendInt appends n in decimal.
func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// parseDataURI splits a data: URI (RFC 2397) into its media type and its
// content as standard base64. ok is false when uri is not a data: URI.
// Content that is not base64 in the URI (percent-encoded text) is encoded.
func parseDataURI(uri string) (mediaType, data string, ok bool, err error) {
	rest, found := strings.CutPrefix(uri, "data:")
	if !found {
		if len(uri) >= 5 && strings.EqualFold(uri[:5], "data:") {
			rest = uri[5:]
		} else {
			return "", "", false, nil
		}
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", "", true, errors.New("data URI without a comma")
	}
	isBase64 := false
	if m, cut := strings.CutSuffix(meta, ";base64"); cut {
		meta, isBase64 = m, true
	}
	// Parameters (;charset=…, ;name=…) are not part of the media type the
	// other vendors take.
	mediaType, _, _ = strings.Cut(meta, ";")
	if payload == "" {
		return "", "", true, errors.New("data URI without content")
	}
	if isBase64 {
		return mediaType, payload, true, nil
	}
	text, err := url.PathUnescape(payload)
	if err != nil {
		return "", "", true, err
	}
	return mediaType, base64.StdEncoding.EncodeToString([]byte(text)), true, nil
}

// dataURI is the inverse of parseDataURI for base64 content.
func dataURI(mediaType, data string) string {
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	return "data:" + mediaType + ";base64," + data
}

// isHTTPURL reports whether u is an http(s) URL, the only kind OpenAI
// fetches.
func isHTTPURL(u string) bool {
	i := strings.IndexByte(u, ':')
	if i < 0 {
		return false
	}
	scheme := strings.ToLower(u[:i])
	return (scheme == "http" || scheme == "https") && strings.HasPrefix(u[i:], "://")
}
