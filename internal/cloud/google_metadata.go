package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// googleMetadataIP is the GCE metadata server's documented address; GKE
// answers there too (its Workload Identity server). An address rather than
// metadata.google.internal, so that no DNS lookup can be spoofed or slow.
const googleMetadataIP = "169.254.169.254"

// googleMetadataHostEnv overrides googleMetadataIP (host or host:port), as
// Google's libraries let it: for emulators and tests.
const googleMetadataHostEnv = "GCE_METADATA_HOST"

// googleMetadataDialTimeout is how long ADC waits to connect to the
// metadata server. On GCE and GKE it is one hop away and answers the
// connection at once; off Google Cloud the address is unrouted or dropped,
// and this is what every request that finds no other credential waits
// before it fails over.
const googleMetadataDialTimeout = time.Second

// googleMetadataAnswerTimeout bounds the wait for the token once
// connected: GKE's metadata server exchanges the pod's identity for a
// token on the first request, which takes a few seconds.
const googleMetadataAnswerTimeout = 10 * time.Second

// googleMetadataClient never goes through a proxy (the server is one hop
// away, and its tokens must not travel further) and gives up on a
// connection quickly.
var googleMetadataClient = &http.Client{Transport: &http.Transport{
	DialContext:           (&net.Dialer{Timeout: googleMetadataDialTimeout}).DialContext,
	ResponseHeaderTimeout: googleMetadataAnswerTimeout,
	IdleConnTimeout:       time.Minute,
}}

// googleMetadata is the last source ADC tries: the metadata server's token
// for the instance's (GCE) or the pod's (GKE Workload Identity) service
// account. It is also what ADC picks when nothing else was found, so its
// connection error is the "no credentials anywhere" error.
type googleMetadata struct {
	host string
	// searched says what ADC looked at before, for that error.
	searched string
	hc       *http.Client
}

func (m *googleMetadata) String() string { return "the metadata server at " + m.host }

func (m *googleMetadata) fetch(ctx context.Context, f googleFetcher) (googleToken, error) {
	u := "http://" + m.host + "/computeMetadata/v1/instance/service-accounts/default/token?scopes=" + url.QueryEscape(vertexScope)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return googleToken{}, fmt.Errorf("%s=%q: %w", googleMetadataHostEnv, m.host, err)
	}
	// Required: the server refuses a request without it, so that a page
	// an app was tricked into fetching cannot read a token.
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := m.hc.Do(req)
	const todo = "set vertex.credentials_file or GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, " +
		"run gcloud auth application-default login, or run on GCE, or GKE with Workload Identity"
	if err != nil {
		// The URL is in the error's name already (String).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return googleToken{}, fmt.Errorf("no Google credentials found: %s, and it did not answer (%v): %s", m.searched, err, todo)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Metadata-Flavor") != "Google" {
		return googleToken{}, fmt.Errorf("no Google credentials found: %s, and it answered %d, but not as Google's metadata server (no Metadata-Flavor: Google): %s",
			m.searched, resp.StatusCode, todo)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, googleMaxAnswer))
	status := resp.StatusCode
	if err != nil {
		return googleToken{}, fmt.Errorf("reading its answer: %w", err)
	}
	if status != http.StatusOK {
		// Its errors are plain text, and name what is missing (no
		// service account on the instance, a Workload Identity
		// binding the pod lacks).
		// (googleTokens names the server before this error.)
		return googleToken{}, &googleAnswerError{endpoint: "its token endpoint", status: status, detail: clip(string(body)),
			hint: "on GKE, check the Workload Identity binding of the pod's Kubernetes service account; on GCE, that the instance has a service account"}
	}
	var a googleTokenAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return googleToken{}, fmt.Errorf("its answer is not a token: %w", err)
	}
	if n, err := a.ExpiresIn.Int64(); err != nil || n <= 0 {
		return googleToken{}, errors.New("its token has no expires_in")
	}
	return a.token(f.now())
}
