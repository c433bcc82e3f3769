package cloud

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"time"
)

// googleJWTBearer is the grant type of a service account's token request:
// a JWT signed with its key stands for the account (RFC 7523 §2.1).
const googleJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// googleAssertionSkew backdates an assertion's iat, and so its exp, for a
// clock a little ahead of Google's: Google refuses an assertion issued in
// its future. golang.org/x/oauth2's jws did the same.
const googleAssertionSkew = 10 * time.Second

// googleAssertionLifetime is exp - iat: an hour, the most Google accepts.
const googleAssertionLifetime = time.Hour

// googleServiceAccount is a service-account key file: its access tokens
// come from token_uri by the JWT-bearer grant, the assertion signed RS256
// with the file's key (https://developers.google.com/identity/protocols/oauth2/service-account#httprest).
type googleServiceAccount struct {
	email    string
	keyID    string
	key      *rsa.PrivateKey
	tokenURI string
}

func (s *googleServiceAccount) String() string { return "service account " + s.email }

func (s *googleServiceAccount) fetch(ctx context.Context, f googleFetcher) (googleToken, error) {
	a, err := s.assertion(f.now())
	if err != nil {
		return googleToken{}, err
	}
	ans, err := f.postForm(ctx, s.tokenURI, url.Values{"grant_type": {googleJWTBearer}, "assertion": {a}}, nil)
	if err != nil {
		var ae *googleAnswerError
		if errors.As(err, &ae) && ae.code == "invalid_grant" {
			ae.hint = "the key may be deleted or disabled, or this machine's clock is off: check the service account's keys (gcloud iam service-accounts keys list), or create a new key"
		}
		return googleToken{}, err
	}
	return ans.token(f.now())
}

// assertion is the signed JWT: header alg RS256 and kid the key's id,
// claims iss (the account), scope, aud (the token endpoint), iat and exp.
func (s *googleServiceAccount) assertion(now time.Time) (string, error) {
	header, err := json.Marshal(struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
		Kid string `json:"kid,omitempty"`
	}{"RS256", "JWT", s.keyID})
	if err != nil {
		return "", err
	}
	iat := now.Add(-googleAssertionSkew)
	claims, err := json.Marshal(struct {
		Iss   string `json:"iss"`
		Scope string `json:"scope"`
		Aud   string `json:"aud"`
		Iat   int64  `json:"iat"`
		Exp   int64  `json:"exp"`
	}{s.email, vertexScope, s.tokenURI, iat.Unix(), iat.Add(googleAssertionLifetime).Unix()})
	if err != nil {
		return "", err
	}
	b64 := base64.RawURLEncoding
	signed := b64.EncodeToString(header) + "." + b64.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(nil, s.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", errors.New("signing the assertion: " + err.Error())
	}
	return signed + "." + b64.EncodeToString(sig), nil
}
