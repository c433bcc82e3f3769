package cloud

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// maxAWSAnswer bounds what a credential endpoint's answer may hold.
const maxAWSAnswer = 1 << 20

// webIdentitySource exchanges a web identity token (a Kubernetes service
// account token, for EKS IRSA) for a role's credentials at STS's
// AssumeRoleWithWebIdentity, which needs no signature. The token file is
// read on every fetch: the kubelet rotates it.
type webIdentitySource struct {
	endpoint, tokenFile, roleARN, sessionName string
}

func (c *awsChain) webIdentity(region, tokenFile, roleARN, sessionName string) (awsSource, error) {
	if roleARN == "" {
		return nil, fmt.Errorf("web identity token file %s is set but no role: set AWS_ROLE_ARN (or role_arn in the profile)", tokenFile)
	}
	if sessionName == "" {
		now := time.Now
		if c.now != nil {
			now = c.now
		}
		sessionName = "detour-" + strconv.FormatInt(now().UnixNano(), 10)
	}
	return &webIdentitySource{endpoint: c.endpoint("STS", stsEndpoint(region)), tokenFile: tokenFile, roleARN: roleARN, sessionName: sessionName}, nil
}

// stsEndpoint is STS's regional endpoint for region, which the SDKs use by
// default (the global one is a single region's).
func stsEndpoint(region string) string {
	if strings.HasPrefix(region, "cn-") {
		return "https://sts." + region + ".amazonaws.com.cn"
	}
	return "https://sts." + region + ".amazonaws.com"
}

// endpoint applies the SDKs' endpoint overrides: AWS_ENDPOINT_URL_<SERVICE>,
// else AWS_ENDPOINT_URL, unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS.
func (c *awsChain) endpoint(service, def string) string {
	if strings.EqualFold(c.getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		return def
	}
	if v := c.getenv("AWS_ENDPOINT_URL_" + service); v != "" {
		return v
	}
	if v := c.getenv("AWS_ENDPOINT_URL"); v != "" {
		return v
	}
	return def
}

// stsAnswer is AssumeRoleWithWebIdentity's answer and STS's error body.
type stsAnswer struct {
	Result struct {
		Credentials struct {
			AccessKeyID     string    `xml:"AccessKeyId"`
			SecretAccessKey string    `xml:"SecretAccessKey"`
			SessionToken    string    `xml:"SessionToken"`
			Expiration      time.Time `xml:"Expiration"`
		} `xml:"Credentials"`
	} `xml:"AssumeRoleWithWebIdentityResult"`
	Error struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
}

func (s *webIdentitySource) fetch(ctx context.Context) (awsCreds, error) {
	tok, err := os.ReadFile(s.tokenFile)
	if err != nil {
		return awsCreds{}, fmt.Errorf("web identity: reading the token: %w", err)
	}
	form := url.Values{
		"Action":           {"AssumeRoleWithWebIdentity"},
		"Version":          {"2011-06-15"},
		"RoleArn":          {s.roleARN},
		"RoleSessionName":  {s.sessionName},
		"WebIdentityToken": {strings.TrimSpace(string(tok))},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(s.endpoint, "/")+"/", strings.NewReader(form.Encode()))
	if err != nil {
		return awsCreds{}, fmt.Errorf("web identity: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	resp, err := awsHTTP.Do(req)
	if err != nil {
		return awsCreds{}, fmt.Errorf("web identity: STS: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAWSAnswer))
	if err != nil {
		return awsCreds{}, fmt.Errorf("web identity: reading STS's answer: %w", err)
	}
	var a stsAnswer
	xerr := xml.Unmarshal(body, &a)
	if resp.StatusCode != http.StatusOK {
		if xerr == nil && a.Error.Code != "" {
			return awsCreds{}, fmt.Errorf("web identity: STS AssumeRoleWithWebIdentity for %s: %s (%d): %s", s.roleARN, a.Error.Code, resp.StatusCode, a.Error.Message)
		}
		return awsCreds{}, fmt.Errorf("web identity: STS AssumeRoleWithWebIdentity for %s: status %d", s.roleARN, resp.StatusCode)
	}
	if xerr != nil {
		return awsCreds{}, fmt.Errorf("web identity: STS's answer: %w", xerr)
	}
	cr := a.Result.Credentials
	return awsCreds{Credentials: credsOf(cr.AccessKeyID, cr.SecretAccessKey, cr.SessionToken), expires: cr.Expiration}, nil
}

// containerSource reads the ECS task role or the EKS Pod Identity
// association from the container agent's endpoint. The authorization
// token comes from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read on every
// fetch: EKS rotates it) or AWS_CONTAINER_AUTHORIZATION_TOKEN.
type containerSource struct {
	url, token, tokenFile string
}

func (c *awsChain) container(u string) awsSource {
	return &containerSource{url: u, token: c.getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"), tokenFile: c.getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")}
}

// credentialAnswer is the container endpoint's, the instance metadata's
// and a credential_process's JSON (the latter two add Code and Version).
type credentialAnswer struct {
	Version         int
	Code            string
	Message         string
	AccessKeyID     string `json:"AccessKeyId"`
	SecretAccessKey string
	Token           string
	SessionToken    string
	Expiration      *time.Time
}

func (a credentialAnswer) creds() awsCreds {
	tok := a.Token
	if tok == "" {
		tok = a.SessionToken
	}
	c := awsCreds{Credentials: credsOf(a.AccessKeyID, a.SecretAccessKey, tok)}
	if a.Expiration != nil {
		c.expires = *a.Expiration
	}
	return c
}

func (s *containerSource) fetch(ctx context.Context) (awsCreds, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return awsCreds{}, fmt.Errorf("container credentials: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	tok := s.token
	if s.tokenFile != "" {
		b, err := os.ReadFile(s.tokenFile)
		if err != nil {
			return awsCreds{}, fmt.Errorf("container credentials: reading the authorization token: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok != "" {
		req.Header.Set("Authorization", tok)
	}
	resp, err := awsLocalHTTP.Do(req)
	if err != nil {
		return awsCreds{}, fmt.Errorf("container credentials: %w", err)
	}
	defer resp.Body.Close()
	var a credentialAnswer
	derr := json.NewDecoder(io.LimitReader(resp.Body, maxAWSAnswer)).Decode(&a)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if derr == nil && a.Code != "" {
			return awsCreds{}, fmt.Errorf("container credentials: %s (%d): %s", a.Code, resp.StatusCode, a.Message)
		}
		return awsCreds{}, fmt.Errorf("container credentials: status %d", resp.StatusCode)
	}
	if derr != nil {
		return awsCreds{}, fmt.Errorf("container credentials: the answer: %w", derr)
	}
	return a.creds(), nil
}

// imdsSource reads the instance role's credentials from the EC2 instance
// metadata service: IMDSv2's session token first, then the role's name,
// then its credentials. An endpoint that refuses the token request (403,
// 404, 405: IMDSv1 only) is asked without one, unless
// AWS_EC2_METADATA_V1_DISABLED.
type imdsSource struct {
	endpoint string
	v1Off    bool
}

func (c *awsChain) imds() awsSource {
	ep := c.getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
	if ep == "" {
		ep = "http://169.254.169.254"
		if strings.EqualFold(c.getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"), "IPv6") {
			ep = "http://[fd00:ec2::254]"
		}
	}
	return &imdsSource{endpoint: strings.TrimSuffix(ep, "/"), v1Off: strings.EqualFold(c.getenv("AWS_EC2_METADATA_V1_DISABLED"), "true")}
}

const imdsRolePath = "/latest/meta-data/iam/security-credentials/"

func (s *imdsSource) fetch(ctx context.Context) (awsCreds, error) {
	token, status, err := s.call(ctx, http.MethodPut, "/latest/api/token", "")
	switch {
	case err != nil:
		return awsCreds{}, fmt.Errorf("instance metadata: %w", err)
	case status == http.StatusForbidden || status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		if s.v1Off {
			return awsCreds{}, fmt.Errorf("instance metadata: the token request got %d and AWS_EC2_METADATA_V1_DISABLED forbids IMDSv1", status)
		}
		token = nil
	case status != http.StatusOK:
		return awsCreds{}, fmt.Errorf("instance metadata: the token request got %d", status)
	}
	tok := strings.TrimSpace(string(token))
	roles, status, err := s.call(ctx, http.MethodGet, imdsRolePath, tok)
	if err != nil || status != http.StatusOK {
		return awsCreds{}, imdsError("listing the instance's role", status, err)
	}
	role, _, _ := strings.Cut(strings.TrimSpace(string(roles)), "\n")
	if role == "" {
		return awsCreds{}, errors.New("instance metadata: the instance has no IAM role")
	}
	body, status, err := s.call(ctx, http.MethodGet, imdsRolePath+url.PathEscape(role), tok)
	if err != nil || status != http.StatusOK {
		return awsCreds{}, imdsError("reading role "+role, status, err)
	}
	var a credentialAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return awsCreds{}, fmt.Errorf("instance metadata: role %s: %w", role, err)
	}
	if a.Code != "" && a.Code != "Success" {
		return awsCreds{}, fmt.Errorf("instance metadata: role %s: %s: %s", role, a.Code, a.Message)
	}
	return a.creds(), nil
}

func imdsError(what string, status int, err error) error {
	if err != nil {
		return fmt.Errorf("instance metadata: %s: %w", what, err)
	}
	return fmt.Errorf("instance metadata: %s: status %d", what, status)
}

func (s *imdsSource) call(ctx context.Context, method, path, token string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.endpoint+path, nil)
	if err != nil {
		return nil, 0, err
	}
	if method == http.MethodPut {
		req.Header.Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
	} else if token != "" {
		req.Header.Set("X-Aws-Ec2-Metadata-Token", token)
	}
	resp, err := awsLocalHTTP.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAWSAnswer))
	return b, resp.StatusCode, err
}

// processSource runs a profile's credential_process through the shell
// and reads its JSON from standard output (Version 1, AccessKeyId,
// SecretAccessKey, SessionToken, Expiration); its standard error is
// detour's, as the SDKs do it.
type processSource struct{ command string }

// processTimeout is the SDKs' bound on a credential_process.
const processTimeout = time.Minute

func (s *processSource) fetch(ctx context.Context) (awsCreds, error) {
	ctx, cancel := context.WithTimeout(ctx, processTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", s.command)
	if runtime.GOOS == "windows" {
		cmd = exec.CommandContext(ctx, "cmd.exe", "/C", s.command)
	}
	var out bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &out, n: maxAWSAnswer}
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		// Never the output: it is a credential.
		return awsCreds{}, fmt.Errorf("credential_process: %w", err)
	}
	var a credentialAnswer
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		return awsCreds{}, errors.New("credential_process: its output is not the credentials JSON")
	}
	if a.Version != 1 {
		return awsCreds{}, fmt.Errorf("credential_process: Version %d; want 1", a.Version)
	}
	if a.AccessKeyID == "" || a.SecretAccessKey == "" {
		return awsCreds{}, errors.New("credential_process: AccessKeyId or SecretAccessKey missing")
	}
	return a.creds(), nil
}

type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		return 0, errors.New("output too long")
	}
	l.n -= len(p)
	return l.w.Write(p)
}
