package cloud

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
)

// googleTokenURL is Google's OAuth2 token endpoint, for a credentials file
// that names none (service accounts' token_uri, authorized users').
const googleTokenURL = "https://oauth2.googleapis.com/token"

// googleMaxSourceDepth bounds impersonated_service_account files whose
// source_credentials are impersonated again: gcloud writes one level, a
// chain of service accounts is written with delegates.
const googleMaxSourceDepth = 3

// googleCredentialsFile is what detour reads of a Google credentials JSON
// file: a service-account key, gcloud's application_default_credentials.json
// (an authorized user, or an impersonated service account with
// --impersonate-service-account), or a workforce-pool user's file
// (external_account_authorized_user). Unknown members are ignored, as
// Google's own libraries do: these files carry more than a token needs
// (project_id, auth_uri, quota_project_id, universe_domain…).
type googleCredentialsFile struct {
	Type string `json:"type"`

	// service_account
	ClientEmail  string `json:"client_email"`
	PrivateKeyID string `json:"private_key_id"`
	PrivateKey   string `json:"private_key"`
	TokenURI     string `json:"token_uri"`

	// authorized_user (token_uri too), external_account_authorized_user
	// (token_url).
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	RefreshToken string `json:"refresh_token"`
	TokenURL     string `json:"token_url"`

	// impersonated_service_account
	ImpersonationURL string          `json:"service_account_impersonation_url"`
	Delegates        []string        `json:"delegates"`
	Source           json.RawMessage `json:"source_credentials"`

	// An OAuth client ID file (what the Cloud console downloads) has one
	// of these and no type: it names an app, not a credential.
	Installed json.RawMessage `json:"installed"`
	Web       json.RawMessage `json:"web"`
}

// parseGoogleCredentials reads a credentials file into the source of its
// access tokens, or says why it cannot (never quoting a secret). It does
// no I/O: a key that does not parse is found here, before any request.
// The file is the operator's (the policy's, the environment's, gcloud's),
// never an app's, so the endpoints and the subject-token file or URL it
// names are trusted, as Google's own libraries trust them.
func parseGoogleCredentials(b []byte) (googleSource, error) {
	return parseGoogleCredentialsAt(b, 0)
}

// parseGoogleCredentialsAt parses a file, or (depth > 0) an impersonated
// service account's source_credentials.
func parseGoogleCredentialsAt(b []byte, depth int) (googleSource, error) {
	var f googleCredentialsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a Google credentials JSON file: %w", err)
	}
	switch f.Type {
	case "service_account":
		if f.ClientEmail == "" || f.PrivateKey == "" {
			return nil, errors.New(`a service_account file needs "client_email" and "private_key": download the key again (gcloud iam service-accounts keys create)`)
		}
		key, err := parseGoogleKey(f.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("service account %s: %w", f.ClientEmail, err)
		}
		tokenURI, err := googleEndpoint("token_uri", f.TokenURI, googleTokenURL)
		if err != nil {
			return nil, err
		}
		return &googleServiceAccount{email: f.ClientEmail, keyID: f.PrivateKeyID, key: key, tokenURI: tokenURI}, nil
	case "authorized_user":
		if f.ClientID == "" || f.ClientSecret == "" || f.RefreshToken == "" {
			return nil, errors.New(`an authorized_user file needs "client_id", "client_secret" and "refresh_token": run gcloud auth application-default login again`)
		}
		tokenURI, err := googleEndpoint("token_uri", f.TokenURI, googleTokenURL)
		if err != nil {
			return nil, err
		}
		return &googleRefreshGrant{what: "authorized user", clientID: f.ClientID, clientSecret: f.ClientSecret, refreshToken: f.RefreshToken, tokenURL: tokenURI}, nil
	case "external_account_authorized_user":
		if f.ClientID == "" || f.ClientSecret == "" || f.RefreshToken == "" || f.TokenURL == "" {
			return nil, errors.New(`an external_account_authorized_user file needs "client_id", "client_secret", "refresh_token" and "token_url": run gcloud auth application-default login --login-config=FILE again`)
		}
		tokenURL, err := googleEndpoint("token_url", f.TokenURL, "")
		if err != nil {
			return nil, err
		}
		// Google's STS takes the workforce pool's OAuth client by
		// HTTP Basic authentication, not in the form.
		return &googleRefreshGrant{what: "workforce identity user", clientID: f.ClientID, clientSecret: f.ClientSecret, refreshToken: f.RefreshToken, tokenURL: tokenURL, basicAuth: true}, nil
	case "impersonated_service_account":
		if f.ImpersonationURL == "" || f.Source == nil {
			return nil, errors.New(`an impersonated_service_account file needs "service_account_impersonation_url" and "source_credentials": run gcloud auth application-default login --impersonate-service-account=EMAIL again`)
		}
		if depth+1 >= googleMaxSourceDepth {
			return nil, errors.New("impersonated_service_account: source_credentials nested too deep: name the chain of service accounts in \"delegates\"")
		}
		u, err := googleEndpoint("service_account_impersonation_url", f.ImpersonationURL, "")
		if err != nil {
			return nil, err
		}
		src, err := parseGoogleCredentialsAt(f.Source, depth+1)
		if err != nil {
			return nil, fmt.Errorf("source_credentials: %w", err)
		}
		return &googleImpersonated{url: u, delegates: f.Delegates, source: src}, nil
	case "external_account":
		return parseGoogleExternal(b)
	case "gdch_service_account":
		return nil, errors.New("gdch_service_account (Google Distributed Cloud Hosted) is not supported: use a Google Cloud service-account key file")
	case "":
		if f.Installed != nil || f.Web != nil {
			return nil, errors.New("this is an OAuth client ID file, not credentials: run gcloud auth application-default login --client-id-file=FILE, and use the file it writes")
		}
		return nil, errors.New(`not a Google credentials file (no "type"): use a service-account key file or gcloud's application_default_credentials.json`)
	}
	return nil, fmt.Errorf("credentials of type %q are not supported: use a service-account key file or gcloud auth application-default login", clip(f.Type))
}

// googleEndpoint checks a URL a credentials file names (def when it names
// none): an absolute http or https URL. http is allowed for the tests'
// loopback endpoints, as Google's libraries allow it.
func googleEndpoint(field, s, def string) (string, error) {
	if s == "" {
		s = def
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("%s %q is not an http(s) URL", field, s)
	}
	return s, nil
}

// parseGoogleKey reads a service account's private_key: PEM, PKCS#8 (what
// Google issues) or PKCS#1, RSA. The error never quotes the key.
func parseGoogleKey(s string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, errors.New("private_key is not a PEM block: download the key again")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("private_key is a %T, not an RSA key", k)
		}
		return rk, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, errors.New("private_key is neither a PKCS#8 nor a PKCS#1 RSA key: download the key again")
}
