// Package sigv4 signs HTTP requests with AWS Signature Version 4
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html),
// the way the AWS SDK for Go v2's signer does for a non-S3 service: the
// same canonical request (path escaped twice, query sorted after encoding,
// every header signed but the few that proxies rewrite), the same string to
// sign, the same derived key. internal/cloud signs Bedrock requests with it
// and internal/fakevendor checks them with it; a differential test holds it
// to the SDK's signer, which the binaries do not link.
//
// sigv4 imports only the standard library.
package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Algorithm is the signing algorithm named in the Authorization header.
const Algorithm = "AWS4-HMAC-SHA256"

// TimeFormat is X-Amz-Date's layout; the credential scope takes its first
// eight characters.
const TimeFormat = "20060102T150405Z"

// EmptyPayloadHash is the hex SHA-256 of an empty body.
const EmptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Credentials are what a request is signed with. SessionToken is set for
// temporary credentials only.
type Credentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// Signer signs requests. The zero value is ready to use; safe for
// concurrent use. It keeps the last derived signing key, which changes only
// with the day, the region, the service or the secret.
type Signer struct {
	key atomic.Pointer[derivedKey]
}

type derivedKey struct {
	secret, date, region, service string
	key                           []byte
}

// ignoredHeaders are never signed: a proxy or the transport may add,
// change or drop them on the way (the SDK's list, in canonical form).
var ignoredHeaders = map[string]bool{
	"Authorization":     true,
	"User-Agent":        true,
	"X-Amzn-Trace-Id":   true,
	"Expect":            true,
	"Transfer-Encoding": true,
}

// Sign signs r in place for service in region at t: it sets X-Amz-Date,
// X-Amz-Security-Token (temporary credentials only) and Authorization,
// rewrites the query string in canonical order, and drops a default port
// from the Host. payloadHash is the hex SHA-256 of the body
// (EmptyPayloadHash for none). An X-Amz-Content-Sha256 header, when the
// caller set one, is signed like any other.
func (s *Signer) Sign(r *http.Request, payloadHash string, creds Credentials, service, region string, t time.Time) {
	if r.Header == nil {
		r.Header = http.Header{}
	}
	t = t.UTC()
	amzDate := t.Format(TimeFormat)
	r.Header["X-Amz-Date"] = append(r.Header["X-Amz-Date"][:0], amzDate)
	if creds.SessionToken != "" {
		r.Header["X-Amz-Security-Token"] = append(r.Header["X-Amz-Security-Token"][:0], creds.SessionToken)
	}
	scope := amzDate[:8] + "/" + region + "/" + service + "/aws4_request"
	canonical, signedHeaders := canonicalRequest(r, payloadHash)
	sig := hex.EncodeToString(hmacSHA256(s.signingKey(creds.SecretAccessKey, amzDate[:8], region, service), []byte(stringToSign(amzDate, scope, canonical))))
	r.Header["Authorization"] = append(r.Header["Authorization"][:0],
		Algorithm+" Credential="+creds.AccessKeyID+"/"+scope+", SignedHeaders="+signedHeaders+", Signature="+sig)
}

func stringToSign(amzDate, scope, canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return Algorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
}

// signingKey is HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date), region),
// service), "aws4_request"), kept until one of its inputs changes.
func (s *Signer) signingKey(secret, date, region, service string) []byte {
	if k := s.key.Load(); k != nil && k.secret == secret && k.date == date && k.region == region && k.service == service {
		return k.key
	}
	key := hmacSHA256([]byte("AWS4"+secret), []byte(date))
	key = hmacSHA256(key, []byte(region))
	key = hmacSHA256(key, []byte(service))
	key = hmacSHA256(key, []byte("aws4_request"))
	s.key.Store(&derivedKey{secret: secret, date: date, region: region, service: service, key: key})
	return key
}

func hmacSHA256(key, data []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(data)
	return h.Sum(nil)
}

// canonicalRequest returns the canonical request of r and its signed
// header list, after dropping a default port from r.Host and putting r's
// query in canonical form (the request sent must be the one signed).
func canonicalRequest(r *http.Request, payloadHash string) (canonical, signedHeaders string) {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	if port := portOnly(host); port != "" && isDefaultPort(r.URL.Scheme, port) {
		host = stripPort(host)
		r.Host = host
	}
	r.URL.RawQuery = canonicalQuery(r.URL.Query())

	names := []string{"host"}
	values := map[string][]string{"host": {host}}
	if r.ContentLength > 0 {
		names = append(names, "content-length")
		values["content-length"] = []string{strconv.FormatInt(r.ContentLength, 10)}
	}
	for k, v := range r.Header {
		if ignoredHeaders[k] || strings.EqualFold(k, "content-length") {
			continue
		}
		lk := strings.ToLower(k)
		if _, ok := values[lk]; ok {
			values[lk] = append(values[lk], v...)
			continue
		}
		names = append(names, lk)
		values[lk] = v
	}
	sort.Strings(names)

	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(escapePath(uriPath(r.URL)))
	b.WriteByte('\n')
	b.WriteString(r.URL.RawQuery)
	b.WriteByte('\n')
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte(':')
		if n == "host" {
			b.WriteString(collapseSpaces(host))
		} else {
			for i, v := range values[n] {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strings.TrimSpace(collapseSpaces(v)))
			}
		}
		b.WriteByte('\n')
	}
	signedHeaders = strings.Join(names, ";")
	b.WriteByte('\n')
	b.WriteString(signedHeaders)
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String(), signedHeaders
}

// collapseSpaces trims spaces from both ends of v and turns each run of
// spaces inside it into one, as SigV4 canonical header values require.
func collapseSpaces(v string) string {
	v = strings.Trim(v, " ")
	if !strings.Contains(v, "  ") {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' && i > 0 && v[i-1] == ' ' {
			continue
		}
		b = append(b, v[i])
	}
	return string(b)
}

// uriPath is the request's path as it goes on the wire: URL.Opaque's path
// when the caller set one ("//host/path"), else the escaped path.
func uriPath(u *url.URL) string {
	var p string
	if u.Opaque != "" {
		o := u.Opaque
		if i := strings.Index(o, "?"); i >= 0 {
			o = o[:i]
		}
		o = strings.TrimPrefix(o, "//")
		if i := strings.Index(o, "/"); i >= 0 {
			p = o[i:]
		}
	} else {
		p = u.EscapedPath()
	}
	if p == "" {
		p = "/"
	}
	return p
}

// escapePath percent-encodes every byte of p but the unreserved ones and
// '/': applied to the already escaped path, this is the double encoding
// every service but S3 expects.
func escapePath(p string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		if unreserved(c) || c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// canonicalQuery encodes each name and value (a space as %20), then sorts
// the pairs: SigV4 sorts after encoding, and "a/b" and "a-b" order
// differently before and after.
func canonicalQuery(q url.Values) string {
	type pair struct{ k, v string }
	var pairs []pair
	for k, vs := range q {
		ek := queryEscape(k)
		for _, v := range vs {
			pairs = append(pairs, pair{ek, queryEscape(v)})
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// queryEscape is url.QueryEscape with a space as %20: QueryEscape writes a
// literal '+' as %2B, so every '+' left stands for a space.
func queryEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// portOnly is the port of hostport ("" for none), bracketed IPv6 included.
func portOnly(hostport string) string {
	colon := strings.IndexByte(hostport, ':')
	if colon == -1 {
		return ""
	}
	if i := strings.Index(hostport, "]:"); i != -1 {
		return hostport[i+len("]:"):]
	}
	if strings.Contains(hostport, "]") {
		return ""
	}
	return hostport[colon+1:]
}

func stripPort(hostport string) string {
	colon := strings.IndexByte(hostport, ':')
	if colon == -1 {
		return hostport
	}
	if i := strings.IndexByte(hostport, ']'); i != -1 {
		return strings.TrimPrefix(hostport[:i], "[")
	}
	return hostport[:colon]
}

func isDefaultPort(scheme, port string) bool {
	s := strings.ToLower(scheme)
	return s == "http" && port == "80" || s == "https" && port == "443"
}
