package cloud

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/detour-proxy/detour/internal/sigv4"
)

// awsCreds are credentials with the time they stop working (zero for
// long-term keys).
type awsCreds struct {
	sigv4.Credentials
	expires time.Time
}

func credsOf(id, secret, token string) sigv4.Credentials {
	return sigv4.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: token}
}

// awsSource is one source of the credential chain, found by
// awsChain.load; fetch gets its current credentials.
type awsSource interface {
	fetch(ctx context.Context) (awsCreds, error)
}

type staticSource struct{ creds awsCreds }

func (s staticSource) fetch(context.Context) (awsCreds, error) { return s.creds, nil }

// awsChain finds where a process's AWS credentials come from, in the AWS
// SDKs' standard order (docs/vendors.md#amazon-bedrock-upstream):
//
//  1. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN);
//  2. web identity from the environment: AWS_WEB_IDENTITY_TOKEN_FILE and
//     AWS_ROLE_ARN (EKS IRSA), exchanged at STS;
//  3. the profile (AWS_PROFILE, else AWS_DEFAULT_PROFILE, else default) of
//     the shared config and credentials files: static keys, a web
//     identity token file, a credential_process; SSO, login sessions and
//     role chaining are refused with what to do instead;
//  4. the container endpoint: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (ECS)
//     or _FULL_URI (EKS Pod Identity), with its authorization token;
//  5. the EC2 instance role through IMDSv2, unless
//     AWS_EC2_METADATA_DISABLED is true.
//
// The fields other than getenv exist for tests.
type awsChain struct {
	getenv func(string) string
	// home replaces the user's home directory for ~/.aws.
	home string
	// containerBase replaces http://169.254.170.2, the ECS endpoint that
	// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is relative to.
	containerBase string
	// lookupHost resolves a FULL_URI host name; nil is net.DefaultResolver.
	lookupHost func(ctx context.Context, host string) ([]string, error)
	// now is the clock of STS session names; nil is time.Now.
	now func() time.Time
}

func defaultAWSChain() *awsChain { return &awsChain{getenv: os.Getenv} }

// errNoAWSCredentials ends a chain that found no source.
var errNoAWSCredentials = errors.New("no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, " +
	"a profile in ~/.aws/credentials, AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, or the container credentials variables " +
	"(the instance metadata service is off: AWS_EC2_METADATA_DISABLED)")

func (c *awsChain) load(ctx context.Context, region string) (awsSource, error) {
	env := c.getenv
	id, secret := env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")
	if id == "" {
		id = env("AWS_ACCESS_KEY")
	}
	if secret == "" {
		secret = env("AWS_SECRET_KEY")
	}
	if id != "" && secret != "" {
		return staticSource{awsCreds{Credentials: credsOf(id, secret, env("AWS_SESSION_TOKEN"))}}, nil
	}
	if f := env("AWS_WEB_IDENTITY_TOKEN_FILE"); f != "" {
		return c.webIdentity(region, f, env("AWS_ROLE_ARN"), env("AWS_ROLE_SESSION_NAME"))
	}
	if src, found, err := c.fromProfile(region); err != nil || found {
		return src, err
	}
	if rel := env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); rel != "" {
		base := c.containerBase
		if base == "" {
			base = "http://169.254.170.2"
		}
		return c.container(base + rel), nil
	}
	if full := env("AWS_CONTAINER_CREDENTIALS_FULL_URI"); full != "" {
		if err := c.checkContainerURL(ctx, full); err != nil {
			return nil, err
		}
		return c.container(full), nil
	}
	if strings.EqualFold(env("AWS_EC2_METADATA_DISABLED"), "true") {
		return nil, errNoAWSCredentials
	}
	return c.imds(), nil
}

// checkContainerURL allows a plain-HTTP container endpoint only on
// loopback or the ECS and EKS agents' addresses, as the SDKs do: the
// answer is a credential, and anything else could be read on the way.
func (c *awsChain) checkContainerURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI %q is not a URL with a host", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
	default:
		return fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI %q: only http and https", raw)
	}
	addrs := []string{u.Hostname()}
	if net.ParseIP(u.Hostname()) == nil {
		lookup := c.lookupHost
		if lookup == nil {
			lookup = net.DefaultResolver.LookupHost
		}
		if addrs, err = lookup(ctx, u.Hostname()); err != nil {
			return fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI: resolving %q: %w", u.Hostname(), err)
		}
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil || !(ip.IsLoopback() || ip.Equal(net.IPv4(169, 254, 170, 2)) || ip.Equal(net.IPv4(169, 254, 170, 23)) || ip.Equal(net.ParseIP("fd00:ec2::23"))) {
			return fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI %q: plain http only to loopback or the ECS/EKS agent (169.254.170.2, 169.254.170.23, fd00:ec2::23)", raw)
		}
	}
	return nil
}

// awsRefreshBefore is how long before their expiry temporary credentials
// are fetched again: a request signed now must still be valid when AWS
// reads it, and a slow refresh must not leave a gap.
const awsRefreshBefore = 5 * time.Minute

// awsFetchTimeout bounds one refresh, whatever the callers' contexts.
const awsFetchTimeout = 30 * time.Second

// awsCredentials resolves the credential chain once per region, on first
// use, and caches what its source gives: long-term keys for good,
// temporary ones until awsRefreshBefore their expiry. Concurrent callers
// share one fetch. A failed load or a source that has never answered is
// not kept, so credentials that appear later (a mounted token, a written
// credentials file) are found by the next request; a failed refresh keeps
// serving the credentials it had while they are still valid.
type awsCredentials struct {
	region string
	load   func(ctx context.Context, region string) (awsSource, error)
	// now is the cache's clock; nil is time.Now.
	now func() time.Time
	// signer keeps the derived signing key across requests and reloads.
	signer sigv4.Signer

	mu        sync.Mutex
	src       awsSource
	cur       awsCreds
	have      bool
	refreshAt time.Time
	flight    *awsFlight
}

// awsFlight is one fetch that every caller arriving meanwhile waits for.
type awsFlight struct {
	done  chan struct{}
	creds awsCreds
	err   error
}

func (c *awsCredentials) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *awsCredentials) retrieve(ctx context.Context) (sigv4.Credentials, error) {
	c.mu.Lock()
	if c.have && c.clock().Before(c.refreshAt) {
		cr := c.cur.Credentials
		c.mu.Unlock()
		return cr, nil
	}
	f := c.flight
	if f == nil {
		f = &awsFlight{done: make(chan struct{})}
		c.flight = f
		// The fetch outlives a caller that gives up: the others are
		// waiting for it.
		go c.refresh(context.WithoutCancel(ctx), f)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return sigv4.Credentials{}, ctx.Err()
	}
	if f.err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.have && (c.cur.expires.IsZero() || c.clock().Before(c.cur.expires)) {
			return c.cur.Credentials, nil
		}
		return sigv4.Credentials{}, f.err
	}
	return f.creds.Credentials, nil
}

func (c *awsCredentials) refresh(ctx context.Context, f *awsFlight) {
	ctx, cancel := context.WithTimeout(ctx, awsFetchTimeout)
	defer cancel()
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	var err error
	if src == nil {
		if src, err = c.load(ctx, c.region); err != nil {
			err = fmt.Errorf("bedrock: loading AWS credentials: %w", err)
		}
	}
	var creds awsCreds
	if err == nil {
		if creds, err = src.fetch(ctx); err != nil {
			// The sources' errors name the source, never the secret.
			err = fmt.Errorf("bedrock: AWS credentials: %w", err)
		} else if creds.AccessKeyID == "" || creds.SecretAccessKey == "" {
			err = errors.New("bedrock: AWS credentials: the source answered without an access key")
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	switch {
	case err == nil:
		c.src, c.cur, c.have = src, creds, true
		c.refreshAt = now.Add(100 * 365 * 24 * time.Hour)
		if !creds.expires.IsZero() {
			// Short-lived credentials are refreshed halfway instead.
			c.refreshAt = creds.expires.Add(-min(awsRefreshBefore, creds.expires.Sub(now)/2))
		}
	case !c.have:
		c.src = nil // never answered: look for a source again next time
	}
	f.creds, f.err = creds, err
	c.flight = nil
	close(f.done)
}

// awsHTTP is the client of STS: the environment's proxy, as the SDKs use.
var awsHTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	Proxy:               http.ProxyFromEnvironment,
	DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	TLSHandshakeTimeout: 5 * time.Second,
	MaxIdleConnsPerHost: 1,
}}

// awsLocalHTTP is the client of the container and instance endpoints,
// link-local or loopback addresses that no proxy can reach: short
// timeouts, so that a laptop with no instance metadata fails fast.
var awsLocalHTTP = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
	DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
	MaxIdleConnsPerHost: 1,
}}
