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
	"os"
	"strconv"
)

// googleSTSURL is Google's Security Token Service, where an
// external_account file that names no token_url exchanges its subject
// token.
const googleSTSURL = "https://sts.googleapis.com/v1/token"

// googleExternalFile is an external_account file's own members
// (workload identity federation,
// https://google.aip.dev/auth/4117): where the subject token is read, and
// how it is exchanged.
type googleExternalFile struct {
	Audience         string `json:"audience"`
	SubjectTokenType string `json:"subject_token_type"`
	TokenURL         string `json:"token_url"`
	ImpersonationURL string `json:"service_account_impersonation_url"`
	Impersonation    struct {
		TokenLifetimeSeconds int `json:"token_lifetime_seconds"`
	} `json:"service_account_impersonation"`
	ClientID                 string `json:"client_id"`
	ClientSecret             string `json:"client_secret"`
	WorkforcePoolUserProject string `json:"workforce_pool_user_project"`
	CredentialSource         struct {
		File          string            `json:"file"`
		URL           string            `json:"url"`
		Headers       map[string]string `json:"headers"`
		EnvironmentID string            `json:"environment_id"`
		Executable    json.RawMessage   `json:"executable"`
		Certificate   json.RawMessage   `json:"certificate"`
		Format        struct {
			Type                  string `json:"type"`
			SubjectTokenFieldName string `json:"subject_token_field_name"`
		} `json:"format"`
	} `json:"credential_source"`
}

// googleExternalWhatElse is what an unsupported external_account can be
// replaced with.
const googleExternalWhatElse = "on GKE use Workload Identity (leave vertex.credentials_file and GOOGLE_APPLICATION_CREDENTIALS unset, " +
	"and the metadata server is used), elsewhere a service-account key file (gcloud iam service-accounts keys create)"

// parseGoogleExternal reads an external_account file whose subject token
// comes from a file (a Kubernetes projected token, a CI system's OIDC
// token) or a URL (Azure's instance metadata, a local token server): the
// sources that need nothing but a read. AWS-sourced ones need a SigV4
// signature of their own, executable-sourced ones run a program, and X.509
// ones mutual TLS: those are refused, saying what to use instead.
func parseGoogleExternal(b []byte) (googleSource, error) {
	var f googleExternalFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a Google credentials JSON file: %w", err)
	}
	cs := &f.CredentialSource
	switch {
	case len(cs.EnvironmentID) >= 3 && cs.EnvironmentID[:3] == "aws":
		return nil, errors.New("workload identity federation from AWS (credential_source.environment_id " + strconv.Quote(clip(cs.EnvironmentID)) + ") is not supported: " + googleExternalWhatElse)
	case cs.Executable != nil:
		return nil, errors.New("executable-sourced workload identity federation is not supported: " + googleExternalWhatElse)
	case cs.Certificate != nil:
		return nil, errors.New("X.509 workload identity federation is not supported: " + googleExternalWhatElse)
	case cs.File == "" && cs.URL == "":
		return nil, errors.New(`an external_account file needs "credential_source" with a "file" or a "url": ` + googleExternalWhatElse)
	case f.Audience == "" || f.SubjectTokenType == "":
		return nil, errors.New(`an external_account file needs "audience" and "subject_token_type": create it again (gcloud iam workload-identity-pools create-cred-config)`)
	}
	switch cs.Format.Type {
	case "", "text":
	case "json":
		if cs.Format.SubjectTokenFieldName == "" {
			return nil, errors.New(`credential_source.format "json" needs "subject_token_field_name"`)
		}
	default:
		return nil, fmt.Errorf("credential_source.format.type %q: want \"text\" or \"json\"", clip(cs.Format.Type))
	}
	tokenURL, err := googleEndpoint("token_url", f.TokenURL, googleSTSURL)
	if err != nil {
		return nil, err
	}
	if cs.URL != "" {
		if _, err := googleEndpoint("credential_source.url", cs.URL, ""); err != nil {
			return nil, err
		}
	}
	sts := &googleExternal{
		audience: f.Audience, subjectTokenType: f.SubjectTokenType, tokenURL: tokenURL,
		clientID: f.ClientID, clientSecret: f.ClientSecret, userProject: f.WorkforcePoolUserProject,
		file: cs.File, url: cs.URL, headers: cs.Headers, jsonField: cs.Format.SubjectTokenFieldName,
	}
	if f.ImpersonationURL == "" {
		return sts, nil
	}
	u, err := googleEndpoint("service_account_impersonation_url", f.ImpersonationURL, "")
	if err != nil {
		return nil, err
	}
	lifetime := googleImpersonatedLifetime
	if s := f.Impersonation.TokenLifetimeSeconds; s > 0 {
		lifetime = strconv.Itoa(s) + "s"
	}
	return &googleImpersonated{url: u, source: sts, lifetime: lifetime}, nil
}

// googleExternal exchanges a subject token read from a file or a URL for
// an access token at Google's STS (RFC 8693 token exchange).
type googleExternal struct {
	audience, subjectTokenType, tokenURL string
	clientID, clientSecret, userProject  string
	file, url                            string
	headers                              map[string]string
	jsonField                            string // "" for a text token
}

func (g *googleExternal) String() string {
	if g.file != "" {
		return "workload identity federation from " + g.file
	}
	return "workload identity federation from " + g.url
}

func (g *googleExternal) fetch(ctx context.Context, f googleFetcher) (googleToken, error) {
	subject, err := g.subjectToken(ctx, f)
	if err != nil {
		return googleToken{}, err
	}
	form := url.Values{
		"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"audience":             {g.audience},
		"scope":                {vertexScope},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		"subject_token_type":   {g.subjectTokenType},
		"subject_token":        {subject},
	}
	var basic *[2]string
	if g.clientID != "" && g.clientSecret != "" {
		basic = &[2]string{g.clientID, g.clientSecret}
	} else if g.userProject != "" {
		// A workforce pool without a client of its own bills the
		// exchange to this project.
		opts, _ := json.Marshal(map[string]string{"userProject": g.userProject})
		form.Set("options", string(opts))
	}
	a, err := f.postForm(ctx, g.tokenURL, form, basic)
	if err != nil {
		var ae *googleAnswerError
		if errors.As(err, &ae) && ae.code == "invalid_grant" {
			ae.hint = "the subject token is expired or not trusted by the pool's provider: check the provider's issuer and audience, and attribute conditions"
		}
		return googleToken{}, err
	}
	return a.token(f.now())
}

// subjectToken reads the token to exchange, each time: a projected or
// OIDC token file is rewritten as it rotates.
func (g *googleExternal) subjectToken(ctx context.Context, f googleFetcher) (string, error) {
	var b []byte
	if g.file != "" {
		fh, err := os.Open(g.file)
		if err != nil {
			return "", fmt.Errorf("subject token: %w", err)
		}
		defer fh.Close()
		if b, err = io.ReadAll(io.LimitReader(fh, googleMaxAnswer)); err != nil {
			return "", fmt.Errorf("subject token: %w", err)
		}
	} else {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url, nil)
		if err != nil {
			return "", fmt.Errorf("subject token: %w", err)
		}
		for k, v := range g.headers {
			req.Header.Add(k, v)
		}
		body, status, err := f.do(req)
		if err != nil {
			return "", fmt.Errorf("subject token: %w", err)
		}
		if status < 200 || status > 299 {
			// Not quoted: the body may be a token of the wrong kind.
			return "", fmt.Errorf("subject token: %s answered %d", req.URL.Redacted(), status)
		}
		b = body
	}
	b = bytes.TrimSpace(b)
	if g.jsonField == "" {
		if len(b) == 0 {
			return "", errors.New("subject token: empty")
		}
		return string(b), nil
	}
	var m map[string]json.RawMessage
	var tok string
	if json.Unmarshal(b, &m) != nil || json.Unmarshal(m[g.jsonField], &tok) != nil || tok == "" {
		return "", fmt.Errorf("subject token: not a JSON object with a string %q", clip(g.jsonField))
	}
	return tok, nil
}
