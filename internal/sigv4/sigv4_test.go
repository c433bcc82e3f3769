package sigv4

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// TestAWSDocumentationExample signs the example of AWS's SigV4 guide
// (GET iam ListUsers, 2015-08-30) and gets its published signature.
func TestAWSDocumentationExample(t *testing.T) {
	t.Parallel()
	r, _ := http.NewRequest("GET", "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", nil)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	at, _ := time.Parse(TimeFormat, "20150830T123600Z")
	var s Signer
	s.Sign(r, EmptyPayloadHash, Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}, "iam", "us-east-1", at)
	want := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
	if got := r.Header.Get("Authorization"); got != want {
		t.Errorf("Authorization = %q;\nwant %q", got, want)
	}
	if got := r.Header.Get("X-Amz-Date"); got != "20150830T123600Z" {
		t.Errorf("X-Amz-Date = %q", got)
	}
}

// signBoth signs two copies of the request mk builds, one with the SDK's
// signer, one with ours, and reports any difference in what goes on the
// wire.
func signBoth(t *testing.T, mk func() *http.Request, payloadHash string, creds Credentials, service, region string, at time.Time) {
	t.Helper()
	theirs, ours := mk(), mk()
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, SessionToken: creds.SessionToken},
		theirs, payloadHash, service, region, at)
	if err != nil {
		t.Fatalf("SDK signer: %v", err)
	}
	var s Signer
	s.Sign(ours, payloadHash, creds, service, region, at)
	for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if g, w := ours.Header.Values(h), theirs.Header.Values(h); strings.Join(g, "\x00") != strings.Join(w, "\x00") {
			t.Errorf("%s = %q; SDK %q\nrequest %s %q host %q headers %q", h, g, w, ours.Method, ours.URL.String(), ours.Host, ours.Header)
		}
	}
	if ours.Host != theirs.Host || ours.URL.RawQuery != theirs.URL.RawQuery {
		t.Errorf("host %q query %q; SDK %q %q", ours.Host, ours.URL.RawQuery, theirs.Host, theirs.URL.RawQuery)
	}
	// A second signing reuses the cached key and must not change a thing.
	again := mk()
	s.Sign(again, payloadHash, creds, service, region, at)
	if again.Header.Get("Authorization") != ours.Header.Get("Authorization") {
		t.Errorf("the cached signing key signs differently")
	}
}

// pathChars and valueChars mix what a path, query or header value may
// hold with what must be escaped or canonicalised.
const (
	pathChars  = "abcXYZ019-._~:@!$&'()*+,;= %/?#é\x7f"
	valueChars = "abc XYZ 019  -._~:/?=&+%,;\"\té"
)

func randString(r *rand.Rand, chars string, max int) string {
	rs := []rune(chars)
	n := r.IntN(max + 1)
	var b strings.Builder
	for range n {
		b.WriteRune(rs[r.IntN(len(rs))])
	}
	return b.String()
}

// TestSignMatchesSDK signs 1,500 generated requests with both
// signers: methods, hosts with and without (default) ports, escaped and
// unescaped paths, Opaque paths, repeated and unsorted query parameters,
// header values with runs of spaces and tabs, repeated headers, the headers
// never signed, bodies, session tokens, dates and regions.
func TestSignMatchesSDK(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	methods := []string{"GET", "POST", "PUT", "DELETE"}
	hosts := []string{"bedrock-runtime.us-east-1.amazonaws.com", "h.example:443", "h.example:80", "h.example:8443", "127.0.0.1:1234", "[::1]:443", "[::1]:9000", "Mixed.Case.Example"}
	headerNames := []string{"Content-Type", "Accept", "X-Amz-Target", "X-Amz-Content-Sha256", "Anthropic-Version", "User-Agent", "X-Amzn-Trace-Id", "Expect", "Transfer-Encoding", "Authorization", "X-Custom-Thing", "Content-Length", "Host"}
	for i := range 1500 {
		method := methods[r.IntN(len(methods))]
		scheme := []string{"https", "http"}[r.IntN(2)]
		host := hosts[r.IntN(len(hosts))]
		path := "/" + randString(r, pathChars, 20)
		opaque := r.IntN(10) == 0
		rawPath := r.IntN(3) == 0
		q := url.Values{}
		for range r.IntN(4) {
			k := randString(r, valueChars, 6)
			q.Add(k, randString(r, valueChars, 8))
			if r.IntN(3) == 0 {
				q.Add(k, randString(r, valueChars, 8))
			}
		}
		rawQuery := q.Encode()
		if r.IntN(4) == 0 {
			rawQuery = strings.ReplaceAll(rawQuery, "+", "%20")
		}
		hdr := http.Header{}
		for range r.IntN(6) {
			hdr.Add(headerNames[r.IntN(len(headerNames))], randString(r, valueChars, 16))
		}
		body := randString(r, valueChars, 40)
		if r.IntN(3) == 0 {
			body = ""
		}
		sum := sha256.Sum256([]byte(body))
		creds := Credentials{AccessKeyID: "AKID" + randString(r, "ABCDEF0123", 12), SecretAccessKey: randString(r, "abcXYZ019/+", 40)}
		if r.IntN(2) == 0 {
			creds.SessionToken = randString(r, "abcXYZ019/+=", 60)
		}
		at := time.Date(2020+r.IntN(8), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e9), time.FixedZone("z", 3600*(r.IntN(25)-12)))
		region := []string{"us-east-1", "eu-west-3", "ap-southeast-2", "us-gov-west-1"}[r.IntN(4)]
		service := []string{"bedrock", "sts", "execute-api"}[r.IntN(3)]
		mk := func() *http.Request {
			u := &url.URL{Scheme: scheme, Host: host, Path: path, RawQuery: rawQuery}
			if rawPath {
				u.RawPath = url.PathEscape(path)
			}
			if opaque {
				u = &url.URL{Scheme: scheme, Host: host, Opaque: "//" + host + escapePathOnce(path), RawQuery: rawQuery}
			}
			req := &http.Request{Method: method, URL: u, Header: hdr.Clone(), Host: host, ContentLength: int64(len(body))}
			if i%5 == 0 {
				req.Host = ""
			}
			return req
		}
		signBoth(t, mk, hex.EncodeToString(sum[:]), creds, service, region, at)
		if t.Failed() {
			return
		}
	}
}

func escapePathOnce(p string) string {
	return (&url.URL{Path: p}).EscapedPath()
}

// TestSigningKeyFollowsItsInputs: the cached key is replaced when the
// day, the region, the service or the secret changes, never reused.
func TestSigningKeyFollowsItsInputs(t *testing.T) {
	t.Parallel()
	day1 := time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC)
	day2 := day1.Add(2 * time.Minute)
	base := func() *http.Request {
		r, _ := http.NewRequest("POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse", nil)
		return r
	}
	c1 := Credentials{AccessKeyID: "AKID", SecretAccessKey: "one"}
	c2 := Credentials{AccessKeyID: "AKID", SecretAccessKey: "two"}
	for _, tc := range []struct {
		creds           Credentials
		service, region string
		at              time.Time
	}{
		{c1, "bedrock", "us-east-1", day1}, {c1, "bedrock", "us-east-1", day2}, {c2, "bedrock", "us-east-1", day2},
		{c2, "bedrock", "eu-west-1", day2}, {c2, "sts", "eu-west-1", day2}, {c1, "bedrock", "us-east-1", day1},
	} {
		signBoth(t, base, EmptyPayloadHash, tc.creds, tc.service, tc.region, tc.at)
	}
}

// FuzzSign: any method, host, path, query and header signs without a
// panic, and as the SDK's signer does.
func FuzzSign(f *testing.F) {
	f.Add("POST", "bedrock-runtime.us-east-1.amazonaws.com", "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse", "a=1&b=2", "Content-Type", "application/json", "{}", "tok")
	f.Add("GET", "h:443", "/a b/%2F", "x=a/b&x=a-b", "X-Amz-Meta-A", "  a   b  ", "", "")
	f.Fuzz(func(t *testing.T, method, host, path, query, hname, hvalue, body, token string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n") {
			method = "POST"
		}
		sum := sha256.Sum256([]byte(body))
		mk := func() *http.Request {
			h := http.Header{}
			h.Add(hname, hvalue)
			return &http.Request{Method: method, URL: &url.URL{Scheme: "https", Host: host, Path: path, RawQuery: query}, Host: host, Header: h, ContentLength: int64(len(body))}
		}
		signBoth(t, mk, hex.EncodeToString(sum[:]), Credentials{AccessKeyID: "AKID", SecretAccessKey: "s", SessionToken: token}, "bedrock", "us-east-1", time.Unix(1764600000, 0))
	})
}
