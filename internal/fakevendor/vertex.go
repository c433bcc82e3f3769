package fakevendor

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/rewrite"
)

// Vertex is a fake Vertex AI: Gemini's generateContent and
// streamGenerateContent at /v1/projects/P/locations/R/publishers/google/models/M:METHOD,
// and Claude's rawPredict and streamRawPredict at
// …/publishers/anthropic/models/M:METHOD (a Messages body with
// anthropic_version "vertex-2023-10-16" and no model), answered by inner
// Gemini- and Anthropic-shaped Vendors. It is also the OAuth2 token
// endpoint (POST /token) of the service account it trusts: a JWT-bearer
// grant signed by that account's key gets an access token, and only such
// tokens are accepted on the model endpoints
// (docs/vendors.md#vertex-ai-upstreams).
type Vertex struct {
	// Gemini and Anthropic answer the requests that pass the checks.
	Gemini, Anthropic *Vendor
	// Project and Region are the only ones served.
	Project, Region string
	// Key is the service account's public key; ClientEmail its address.
	Key         *rsa.PublicKey
	ClientEmail string
	// TokenLifetime is expires_in of the tokens issued; zero is an hour.
	TokenLifetime time.Duration

	mu     sync.Mutex
	tokens map[string]bool
	issued int
	seen   []VertexRequest
}

// VertexRequest is one model request the fake Vertex received.
type VertexRequest struct {
	Publisher, Model, Method string
	// Token is the bearer token sent; Valid whether the fake issued it.
	Token string
	Valid bool
}

// NewVertex returns a fake Vertex for project and region trusting the
// service account key, answering with opts.
func NewVertex(project, region, clientEmail string, key *rsa.PublicKey, opts Options) *Vertex {
	if opts.Name == "" {
		opts.Name = "vertex"
	}
	return &Vertex{
		Gemini: New(rewrite.Gemini, opts), Anthropic: New(rewrite.Anthropic, opts),
		Project: project, Region: region, Key: key, ClientEmail: clientEmail, tokens: map[string]bool{},
	}
}

// TokensIssued is how many access tokens the token endpoint issued.
func (v *Vertex) TokensIssued() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.issued
}

// Seen returns the model requests received, in order.
func (v *Vertex) Seen() []VertexRequest {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]VertexRequest(nil), v.seen...)
}

// ServiceAccountJSON returns a service-account key file for the account,
// whose token_uri is tokenURI (this fake's /token).
func ServiceAccountJSON(clientEmail, project, tokenURI string, key *rsa.PrivateKey) []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": project, "private_key_id": "fakekey1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": clientEmail, "client_id": "1", "token_uri": tokenURI,
	})
	return b
}

// Google's error bodies (the google.rpc.Status envelope).
const (
	vertexUnauthenticated = `{"error":{"code":401,"message":"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.","status":"UNAUTHENTICATED"}}`
	vertexNotFound        = `{"error":{"code":404,"message":"Publisher model not found.","status":"NOT_FOUND"}}`
)

func (v *Vertex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		v.token(w, r)
		return
	}
	prefix := "/v1/projects/" + v.Project + "/locations/" + v.Region + "/publishers/"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	pub, rest, _ := strings.Cut(rest, "/models/")
	model, method, _ := strings.Cut(rest, ":")
	if !ok || model == "" || (pub != "google" && pub != "anthropic") {
		vertexError(w, http.StatusNotFound, vertexNotFound)
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	v.mu.Lock()
	valid := v.tokens[tok]
	v.seen = append(v.seen, VertexRequest{Publisher: pub, Model: model, Method: method, Token: tok, Valid: valid})
	v.mu.Unlock()
	if !valid {
		vertexError(w, http.StatusUnauthorized, vertexUnauthenticated)
		return
	}
	r2 := r.Clone(r.Context())
	switch {
	case pub == "google" && (method == "generateContent" || method == "streamGenerateContent"):
		r2.URL.Path = "/v1beta/models/" + model + ":" + method
		v.Gemini.ServeHTTP(w, r2)
	case pub == "anthropic" && (method == "rawPredict" || method == "streamRawPredict"):
		body, _ := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil || string(m["anthropic_version"]) != `"vertex-2023-10-16"` {
			vertexError(w, http.StatusBadRequest, `{"error":{"code":400,"message":"anthropic_version: Input should be 'vertex-2023-10-16'","status":"INVALID_ARGUMENT"}}`)
			return
		}
		if _, has := m["model"]; has {
			vertexError(w, http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"model: Extra inputs are not permitted"}}`)
			return
		}
		delete(m, "anthropic_version")
		m["model"], _ = json.Marshal(model)
		if method == "streamRawPredict" {
			m["stream"] = json.RawMessage("true")
		}
		nb, _ := json.Marshal(m)
		r2.URL.Path = "/v1/messages"
		r2.Body = io.NopCloser(bytes.NewReader(nb))
		r2.ContentLength = int64(len(nb))
		v.Anthropic.ServeHTTP(w, r2)
	default:
		vertexError(w, http.StatusNotFound, vertexNotFound)
	}
}

// token answers the JWT-bearer grant (RFC 7523) that a service account's
// key file makes: the assertion's RS256 signature must verify with Key and
// its claims name the account and this endpoint.
func (v *Vertex) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		oauthError(w, "unsupported_grant_type", "Invalid grant_type")
		return
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		oauthError(w, "invalid_grant", "Invalid JWT")
		return
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err != nil || rsa.VerifyPKCS1v15(v.Key, crypto.SHA256, sum[:], sig) != nil {
		oauthError(w, "invalid_grant", "Invalid JWT Signature.")
		return
	}
	var claims struct {
		Iss   string `json:"iss"`
		Aud   string `json:"aud"`
		Scope string `json:"scope"`
		Exp   int64  `json:"exp"`
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if json.Unmarshal(payload, &claims) != nil || claims.Iss != v.ClientEmail || !strings.Contains(claims.Scope, "cloud-platform") ||
		time.Unix(claims.Exp, 0).Before(time.Now()) {
		oauthError(w, "invalid_grant", "Invalid JWT claims.")
		return
	}
	life := v.TokenLifetime
	if life == 0 {
		life = time.Hour
	}
	v.mu.Lock()
	v.issued++
	tok := fmt.Sprintf("ya29.fake-%d", v.issued)
	v.tokens[tok] = true
	v.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"expires_in":%d,"token_type":"Bearer"}`, tok, int(life.Seconds()))
}

func oauthError(w http.ResponseWriter, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `{"error":%q,"error_description":%q}`, code, desc)
}

func vertexError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	io.WriteString(w, body)
}
