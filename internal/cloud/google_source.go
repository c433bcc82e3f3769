package cloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// googleToken is an access token and the time Google stops accepting it.
type googleToken struct {
	access string
	expiry time.Time
}

// googleSource fetches a new access token for vertexScope. googleTokens
// runs one fetch at a time per source, so a source may keep what an answer
// changes (a rotated refresh token) without a lock of its own.
type googleSource interface {
	fetch(ctx context.Context, f googleFetcher) (googleToken, error)
	// String names the credential for errors, never a secret:
	// "service account a@b.iam.gserviceaccount.com".
	String() string
}

// googleFetcher is what a fetch uses: the client for token endpoints and
// the clock the token's expiry is counted on.
type googleFetcher struct {
	hc  *http.Client
	now func() time.Time
}

// googleUnknownLifetime is how long a token whose answer has no expires_in
// is used. Google's endpoints always send one; a short guess bounds how
// long a wrong one would be sent and refused.
const googleUnknownLifetime = time.Minute

// googleMaxLifetime bounds an expires_in, so that a wild one cannot
// overflow a time.Duration.
const googleMaxLifetime = 24 * time.Hour

// googleTokenAnswer is an OAuth2 token endpoint's 200 (RFC 6749 §5.1), and
// the metadata server's.
type googleTokenAnswer struct {
	AccessToken  string      `json:"access_token"`
	ExpiresIn    json.Number `json:"expires_in"`
	RefreshToken string      `json:"refresh_token"`
}

func (a *googleTokenAnswer) token(now time.Time) (googleToken, error) {
	if a.AccessToken == "" {
		return googleToken{}, errors.New("the answer has no access_token")
	}
	life := googleUnknownLifetime
	if secs, err := a.ExpiresIn.Int64(); err == nil && secs > 0 {
		life = min(time.Duration(secs)*time.Second, googleMaxLifetime)
	}
	return googleToken{access: a.AccessToken, expiry: now.Add(life)}, nil
}

// googleAnswerError is a token endpoint's (or the IAM Credentials API's,
// or the metadata server's) refusal: the status, and the error code and
// description of the OAuth2 error body (RFC 6749 §5.2) or of Google's API
// error envelope.
type googleAnswerError struct {
	endpoint string
	status   int
	code     string // "invalid_grant", "PERMISSION_DENIED"; "" when the body said none
	detail   string
	hint     string
}

func (e *googleAnswerError) Error() string {
	s := fmt.Sprintf("%s answered %d", e.endpoint, e.status)
	switch {
	case e.code != "" && e.detail != "":
		s += ": " + e.code + ": " + e.detail
	case e.code != "":
		s += ": " + e.code
	case e.detail != "":
		s += ": " + e.detail
	}
	if e.hint != "" {
		s += ": " + e.hint
	}
	return s
}

// googleMaxDetail bounds how much of an error body an error quotes.
const googleMaxDetail = 300

// newGoogleAnswerError reads a refusal's body. Only the members an OAuth2
// or Google API error defines are quoted: a body that is not one (a proxy's
// page, or a server that echoes what it was sent) may hold the assertion
// or the refresh token, and no credential may appear in an error.
func newGoogleAnswerError(endpoint string, status int, body []byte) *googleAnswerError {
	e := &googleAnswerError{endpoint: endpoint, status: status}
	var env struct {
		Error       json.RawMessage `json:"error"`
		Description string          `json:"error_description"`
	}
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return e
	}
	var code string
	if json.Unmarshal(env.Error, &code) == nil {
		e.code, e.detail = clip(code), clip(env.Description)
		return e
	}
	var api struct {
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	if json.Unmarshal(env.Error, &api) == nil {
		e.code, e.detail = clip(api.Status), clip(api.Message)
	}
	return e
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > googleMaxDetail {
		return s[:googleMaxDetail] + "…"
	}
	return s
}

// googleMaxAnswer bounds a token endpoint's answer that is read.
const googleMaxAnswer = 1 << 20

// postForm makes an OAuth2 token request (application/x-www-form-urlencoded)
// and reads the answer. basic, when set, is the OAuth client sent by HTTP
// Basic authentication.
func (f googleFetcher) postForm(ctx context.Context, endpoint string, form url.Values, basic *[2]string) (*googleTokenAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("token endpoint %s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic != nil {
		// As Google's STS client sends it (golang.org/x/oauth2's
		// stsexchange): not form-encoded first.
		req.SetBasicAuth(basic[0], basic[1])
	}
	body, status, err := f.do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: check that detour can reach %s, directly or through HTTPS_PROXY", err, req.URL.Host)
	}
	if status < 200 || status > 299 {
		return nil, newGoogleAnswerError("token endpoint "+endpoint, status, body)
	}
	var a googleTokenAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("token endpoint %s: the answer is not an OAuth2 token: %w", endpoint, err)
	}
	return &a, nil
}

// do sends req and reads a bounded answer. Its errors name the URL, which
// holds no credential (the form and the headers do).
func (f googleFetcher) do(req *http.Request) ([]byte, int, error) {
	resp, err := f.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, googleMaxAnswer))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: reading the answer: %w", req.URL.Redacted(), err)
	}
	return body, resp.StatusCode, nil
}

// googleRefreshGrant is an authorized user (gcloud auth
// application-default login) or a workforce identity user: the refresh
// token grant (RFC 6749 §6) with the OAuth client gcloud used.
type googleRefreshGrant struct {
	what         string
	clientID     string
	clientSecret string
	refreshToken string
	tokenURL     string
	basicAuth    bool
}

func (g *googleRefreshGrant) String() string { return g.what }

func (g *googleRefreshGrant) fetch(ctx context.Context, f googleFetcher) (googleToken, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {g.refreshToken}}
	var basic *[2]string
	if g.basicAuth {
		basic = &[2]string{g.clientID, g.clientSecret}
	} else {
		form.Set("client_id", g.clientID)
		form.Set("client_secret", g.clientSecret)
	}
	a, err := f.postForm(ctx, g.tokenURL, form, basic)
	if err != nil {
		var ae *googleAnswerError
		if errors.As(err, &ae) {
			switch ae.code {
			case "invalid_grant":
				ae.hint = "the refresh token was revoked or has expired: run gcloud auth application-default login again"
			case "invalid_client", "unauthorized_client":
				ae.hint = "the file's client_id and client_secret are refused: run gcloud auth application-default login again"
			}
		}
		return googleToken{}, err
	}
	if a.RefreshToken != "" {
		// The endpoint may rotate the refresh token (RFC 6749 §6);
		// the new one replaces the file's for the life of the process.
		g.refreshToken = a.RefreshToken
	}
	return a.token(f.now())
}

// googleImpersonated is a service account whose tokens another credential
// (source) asks the IAM Credentials API for: gcloud auth
// application-default login --impersonate-service-account.
type googleImpersonated struct {
	url       string
	delegates []string
	source    googleSource
	// lifetime is asked of the IAM Credentials API;
	// "" is googleImpersonatedLifetime.
	lifetime string
}

func (g *googleImpersonated) String() string {
	return "service account impersonated by " + g.source.String()
}

// googleImpersonatedLifetime is the lifetime asked of an impersonated
// token: an hour, the longest without an organisation policy, and what
// Google's libraries ask for.
const googleImpersonatedLifetime = "3600s"

func (g *googleImpersonated) fetch(ctx context.Context, f googleFetcher) (googleToken, error) {
	src, err := g.source.fetch(ctx, f)
	if err != nil {
		return googleToken{}, fmt.Errorf("source_credentials (%s): %w", g.source, err)
	}
	lifetime := g.lifetime
	if lifetime == "" {
		lifetime = googleImpersonatedLifetime
	}
	reqBody, err := json.Marshal(struct {
		Delegates []string `json:"delegates,omitempty"`
		Scope     []string `json:"scope"`
		Lifetime  string   `json:"lifetime"`
	}{g.delegates, []string{vertexScope}, lifetime})
	if err != nil {
		return googleToken{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, bytes.NewReader(reqBody))
	if err != nil {
		return googleToken{}, fmt.Errorf("service_account_impersonation_url: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+src.access)
	body, status, err := f.do(req)
	if err != nil {
		return googleToken{}, err
	}
	if status < 200 || status > 299 {
		ae := newGoogleAnswerError(g.url, status, body)
		if status == http.StatusForbidden {
			ae.hint = "grant the source credential roles/iam.serviceAccountTokenCreator on the impersonated service account"
		}
		return googleToken{}, ae
	}
	var a struct {
		AccessToken string `json:"accessToken"`
		ExpireTime  string `json:"expireTime"`
	}
	if err := json.Unmarshal(body, &a); err != nil || a.AccessToken == "" {
		return googleToken{}, fmt.Errorf("%s: the answer is not an access token", g.url)
	}
	exp, err := time.Parse(time.RFC3339, a.ExpireTime)
	if err != nil {
		return googleToken{}, fmt.Errorf("%s: expireTime %q: %w", g.url, clip(a.ExpireTime), err)
	}
	return googleToken{access: a.AccessToken, expiry: exp}, nil
}
