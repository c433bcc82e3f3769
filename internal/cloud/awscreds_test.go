package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detour-proxy/detour/internal/fakevendor"
	"github.com/detour-proxy/detour/internal/testsupport"
	"github.com/detour-proxy/detour/policy"
)

// testChain is an awsChain reading env instead of the process's
// environment, with a home directory of the test's own (no ~/.aws of the
// machine's), so that the tests run in parallel.
func testChain(t *testing.T, env map[string]string) *awsChain {
	home := t.TempDir()
	return &awsChain{getenv: func(k string) string { return env[k] }, home: home}
}

func fetchFrom(t *testing.T, c *awsChain) (awsCreds, error) {
	t.Helper()
	src, err := c.load(context.Background(), "us-west-2")
	if err != nil {
		return awsCreds{}, err
	}
	return src.fetch(context.Background())
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeSTS answers AssumeRoleWithWebIdentity for the role and token it is
// given, with credentials expiring at exp, as STS's query protocol does.
func fakeSTS(t *testing.T, role, token, keyID string, exp time.Time) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		q, _ := url.ParseQuery(string(body))
		w.Header().Set("Content-Type", "text/xml")
		if r.Method != "POST" || q.Get("Action") != "AssumeRoleWithWebIdentity" || q.Get("Version") != "2011-06-15" || q.Get("RoleSessionName") == "" {
			w.WriteHeader(400)
			fmt.Fprint(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>InvalidAction</Code><Message>bad request</Message></Error></ErrorResponse>`)
			return
		}
		if q.Get("RoleArn") != role || q.Get("WebIdentityToken") != token {
			w.WriteHeader(400)
			fmt.Fprint(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>Incorrect token audience</Message></Error><RequestId>r</RequestId></ErrorResponse>`)
			return
		}
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:app</SubjectFromWebIdentityToken>
    <Credentials>
      <AccessKeyId>%s</AccessKeyId>
      <SecretAccessKey>sts-secret</SecretAccessKey>
      <SessionToken>sts-token</SessionToken>
      <Expiration>%s</Expiration>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>`, keyID, exp.UTC().Format(time.RFC3339))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// fakeContainer answers as the ECS / EKS Pod Identity agent does, to the
// authorization token it is given.
func fakeContainer(t *testing.T, path, auth, keyID string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != path || r.Header.Get("Authorization") != auth {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"code":"InvalidToken","message":"the token is not valid"}`)
			return
		}
		fmt.Fprintf(w, `{"AccessKeyId":%q,"SecretAccessKey":"c-secret","Token":"c-token","AccountId":"123456789012","Expiration":%q}`,
			keyID, time.Now().Add(6*time.Hour).UTC().Format(time.RFC3339))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fakeIMDS is the instance metadata service: IMDSv2 (a session token
// PUT, then the token on every GET) unless v1, which refuses the PUT as
// an IMDSv1-only endpoint does.
func fakeIMDS(t *testing.T, v1 bool, keyID string) *httptest.Server {
	const token = "imds-session"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/latest/api/token" {
			if v1 {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			if r.Method != "PUT" || r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") == "" {
				w.WriteHeader(400)
				return
			}
			io.WriteString(w, token)
			return
		}
		if !v1 && r.Header.Get("X-Aws-Ec2-Metadata-Token") != token {
			w.WriteHeader(401)
			return
		}
		switch r.URL.Path {
		case imdsRolePath:
			io.WriteString(w, "detour-node-role")
		case imdsRolePath + "detour-node-role":
			fmt.Fprintf(w, `{"Code":"Success","LastUpdated":"2026-12-01T20:00:00Z","Type":"AWS-HMAC","AccessKeyId":%q,"SecretAccessKey":"i-secret","Token":"i-token","Expiration":%q}`,
				keyID, time.Now().Add(6*time.Hour).UTC().Format(time.RFC3339))
		default:
			w.WriteHeader(404)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestAWSEnvironmentKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env    map[string]string
		wantID string
	}{
		{map[string]string{"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "tok"}, "AKIDENV"},
		{map[string]string{"AWS_ACCESS_KEY": "AKIDOLD", "AWS_SECRET_KEY": "s"}, "AKIDOLD"},
		// Half a pair is no pair: the chain goes on, here to nothing.
		{map[string]string{"AWS_ACCESS_KEY_ID": "AKIDHALF", "AWS_EC2_METADATA_DISABLED": "true"}, ""},
	} {
		got, err := fetchFrom(t, testChain(t, tc.env))
		if tc.wantID == "" {
			if !errors.Is(err, errNoAWSCredentials) {
				t.Errorf("%v: err = %v; want errNoAWSCredentials", tc.env, err)
			}
			continue
		}
		if err != nil || got.AccessKeyID != tc.wantID || got.SecretAccessKey != "s" || got.SessionToken != tc.env["AWS_SESSION_TOKEN"] || !got.expires.IsZero() {
			t.Errorf("%v: %+v, %v", tc.env, got, err)
		}
	}
}

// TestAWSChainOrder: with every source present, each one answers only
// when those before it are gone: environment keys, web identity, the
// shared files, the container endpoint, the instance metadata.
func TestAWSChainOrder(t *testing.T) {
	t.Parallel()
	sts, _ := fakeSTS(t, "arn:aws:iam::123456789012:role/irsa", "jwt", "AKIDSTS", time.Now().Add(time.Hour))
	ctr := fakeContainer(t, "/v1/credentials", "pod-token", "AKIDCONTAINER")
	imds := fakeIMDS(t, false, "AKIDIMDS")
	tokenFile := writeFile(t, "token", "jwt\n")
	credsFile := writeFile(t, "credentials", "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = f\n")
	levels := []struct {
		id   string
		vars map[string]string
	}{
		{"AKIDENV", map[string]string{"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "e"}},
		{"AKIDSTS", map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/irsa", "AWS_ENDPOINT_URL_STS": sts.URL}},
		{"AKIDFILE", map[string]string{"AWS_SHARED_CREDENTIALS_FILE": credsFile}},
		{"AKIDCONTAINER", map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": ctr.URL + "/v1/credentials", "AWS_CONTAINER_AUTHORIZATION_TOKEN": "pod-token"}},
		{"AKIDIMDS", map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL}},
	}
	for i := range levels {
		env := map[string]string{}
		for _, l := range levels[i:] {
			for k, v := range l.vars {
				env[k] = v
			}
		}
		got, err := fetchFrom(t, testChain(t, env))
		if err != nil || got.AccessKeyID != levels[i].id {
			t.Errorf("sources from %s on: got %q, %v; want %s", levels[i].id, got.AccessKeyID, err, levels[i].id)
		}
	}
}

func TestAWSSharedFiles(t *testing.T) {
	t.Parallel()
	config := writeFile(t, "config", `# the config file
[default]
region = us-east-1
aws_access_key_id = AKIDCONFIGDEFAULT
aws_secret_access_key = cd

[profile dev] ; a comment
aws_access_key_id=AKIDDEV
aws_secret_access_key = "dev secret"   # quoted
aws_session_token: devtoken
s3 =
  max_concurrent_requests = 10

[staging]
aws_access_key_id = AKIDNOTAPROFILE
aws_secret_access_key = x

[profile both]
aws_access_key_id = AKIDCONFIGBOTH
aws_secret_access_key = old
aws_session_token = oldtoken
`)
	creds := writeFile(t, "credentials", `[default]
AWS_ACCESS_KEY_ID = AKIDCREDSDEFAULT
aws_secret_access_key = dd

[both]
aws_access_key_id = AKIDCREDSBOTH
aws_secret_access_key = new

[profile staging]
aws_access_key_id = AKIDIGNORED
aws_secret_access_key = x

[half]
aws_access_key_id = AKIDHALF
`)
	for _, tc := range []struct {
		profile, defaultProfile string
		want                    awsCreds
		err                     string
	}{
		{"", "", awsCreds{Credentials: credsOf("AKIDCREDSDEFAULT", "dd", "")}, ""},
		{"dev", "", awsCreds{Credentials: credsOf("AKIDDEV", "dev secret", "devtoken")}, ""},
		{"", "dev", awsCreds{Credentials: credsOf("AKIDDEV", "dev secret", "devtoken")}, ""},
		{"both", "", awsCreds{Credentials: credsOf("AKIDCREDSBOTH", "new", "")}, ""},
		{"staging", "", awsCreds{}, `AWS_PROFILE names profile "staging", which is in neither`},
		{"half", "", awsCreds{}, "partial credentials"},
		// A default profile that does not exist is no error: the chain
		// goes on (and here finds nothing).
		{"", "nosuch", awsCreds{}, errNoAWSCredentials.Error()},
	} {
		env := map[string]string{"AWS_CONFIG_FILE": config, "AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_PROFILE": tc.profile, "AWS_DEFAULT_PROFILE": tc.defaultProfile, "AWS_EC2_METADATA_DISABLED": "true"}
		got, err := fetchFrom(t, testChain(t, env))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("profile %q/%q: %+v, %v; want an error with %q", tc.profile, tc.defaultProfile, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("profile %q/%q: %+v, %v; want %+v", tc.profile, tc.defaultProfile, got, err, tc.want)
		}
	}
}

// TestAWSHomeFiles: without the variables, the files are ~/.aws's.
func TestAWSHomeFiles(t *testing.T) {
	t.Parallel()
	c := testChain(t, map[string]string{})
	os.MkdirAll(filepath.Join(c.home, ".aws"), 0o700)
	os.WriteFile(filepath.Join(c.home, ".aws", "config"), []byte("[default]\naws_access_key_id = AKIDHOME\naws_secret_access_key = h\n"), 0o600)
	if got, err := fetchFrom(t, c); err != nil || got.AccessKeyID != "AKIDHOME" {
		t.Errorf("got %+v, %v; want ~/.aws/config's default profile", got, err)
	}
}

// TestAWSUnsupportedProfiles: a profile that needs SSO, a login session or
// another role's credentials is refused with what to do instead, not
// passed over for a source further down the chain.
func TestAWSUnsupportedProfiles(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"sso":         "sso_session = corp\nsso_account_id = 123456789012\nsso_role_name = Dev",
		"legacy-sso":  "sso_start_url = https://corp.awsapps.com/start\nsso_region = us-east-1",
		"chained":     "role_arn = arn:aws:iam::1:role/r\nsource_profile = default",
		"named":       "role_arn = arn:aws:iam::1:role/r\ncredential_source = Ec2InstanceMetadata",
		"keys-role":   "role_arn = arn:aws:iam::1:role/r\naws_access_key_id = A\naws_secret_access_key = B",
		"login":       "login_session = arn:aws:iam::1:user/u",
		"role-only":   "role_arn = arn:aws:iam::1:role/r",
		"process-arn": "role_arn = arn:aws:iam::1:role/r\ncredential_process = /bin/true",
	} {
		config := writeFile(t, "config", "[profile "+name+"]\n"+body+"\n")
		imds := fakeIMDS(t, false, "AKIDIMDS")
		_, err := fetchFrom(t, testChain(t, map[string]string{"AWS_CONFIG_FILE": config, "AWS_PROFILE": name, "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL}))
		if err == nil || !strings.Contains(err.Error(), `profile "`+name+`"`) || !strings.Contains(err.Error(), "export-credentials") || !strings.Contains(err.Error(), "AWS_WEB_IDENTITY_TOKEN_FILE") {
			t.Errorf("profile %s: err = %v; want a refusal naming the profile and the alternatives", name, err)
		}
	}
}

func TestAWSCredentialProcess(t *testing.T) {
	t.Parallel()
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	ok := writeFile(t, "ok.sh", fmt.Sprintf(`printf '{"Version":1,"AccessKeyId":"AKIDPROC","SecretAccessKey":"p","SessionToken":"pt","Expiration":"%s"}'`, exp.Format(time.RFC3339)))
	for _, tc := range []struct {
		command string
		want    awsCreds
		err     string
	}{
		{"sh " + ok, awsCreds{Credentials: credsOf("AKIDPROC", "p", "pt"), expires: exp}, ""},
		{`printf '{"Version":2,"AccessKeyId":"A","SecretAccessKey":"S"}'`, awsCreds{}, "Version 2"},
		{`printf 'SECRETOUTPUT'; exit 3`, awsCreds{}, "exit status 3"},
		{`printf 'SECRETOUTPUT'`, awsCreds{}, "not the credentials JSON"},
	} {
		config := writeFile(t, "config", "[default]\ncredential_process = "+tc.command+"\n")
		got, err := fetchFrom(t, testChain(t, map[string]string{"AWS_CONFIG_FILE": config}))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "SECRETOUTPUT") {
				t.Errorf("%s: err = %v; want %q and never the output", tc.command, err, tc.err)
			}
			continue
		}
		if err != nil || got.Credentials != tc.want.Credentials || !got.expires.Equal(tc.want.expires) {
			t.Errorf("%s: %+v, %v; want %+v", tc.command, got, err, tc.want)
		}
	}
}

func TestAWSWebIdentity(t *testing.T) {
	t.Parallel()
	const role = "arn:aws:iam::123456789012:role/irsa"
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	sts, calls := fakeSTS(t, role, "jwt-1", "AKIDSTS", exp)
	tokenFile := writeFile(t, "token", "jwt-1")
	env := map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile, "AWS_ROLE_ARN": role, "AWS_ROLE_SESSION_NAME": "app", "AWS_ENDPOINT_URL_STS": sts.URL}
	c := testChain(t, env)
	src, err := c.load(context.Background(), "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.fetch(context.Background())
	if err != nil || got.Credentials != credsOf("AKIDSTS", "sts-secret", "sts-token") || !got.expires.Equal(exp) {
		t.Fatalf("got %+v, %v", got, err)
	}
	// The token is read again at each fetch: the kubelet rotates it.
	os.WriteFile(tokenFile, []byte("jwt-2"), 0o600)
	if _, err := src.fetch(context.Background()); err == nil || !strings.Contains(err.Error(), "InvalidIdentityToken") || !strings.Contains(err.Error(), "Incorrect token audience") {
		t.Errorf("a token STS refuses: err = %v; want STS's code and message", err)
	}
	if calls.Load() != 2 {
		t.Errorf("STS called %d times; want 2", calls.Load())
	}
	// AWS_ENDPOINT_URL applies when there is no STS-specific one.
	delete(env, "AWS_ENDPOINT_URL_STS")
	env["AWS_ENDPOINT_URL"] = sts.URL
	os.WriteFile(tokenFile, []byte("jwt-1"), 0o600)
	if got, err := fetchFrom(t, testChain(t, env)); err != nil || got.AccessKeyID != "AKIDSTS" {
		t.Errorf("through AWS_ENDPOINT_URL: %+v, %v", got, err)
	}
	// A profile's web_identity_token_file and role_arn.
	config := writeFile(t, "config", "[profile irsa]\nweb_identity_token_file = "+tokenFile+"\nrole_arn = "+role+"\n")
	if got, err := fetchFrom(t, testChain(t, map[string]string{"AWS_CONFIG_FILE": config, "AWS_PROFILE": "irsa", "AWS_ENDPOINT_URL_STS": sts.URL})); err != nil || got.AccessKeyID != "AKIDSTS" {
		t.Errorf("from a profile: %+v, %v", got, err)
	}
	if _, err := testChain(t, map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile}).load(context.Background(), "us-west-2"); err == nil || !strings.Contains(err.Error(), "AWS_ROLE_ARN") {
		t.Errorf("no role: err = %v; want one naming AWS_ROLE_ARN", err)
	}
	for region, want := range map[string]string{"us-west-2": "https://sts.us-west-2.amazonaws.com", "cn-north-1": "https://sts.cn-north-1.amazonaws.com.cn"} {
		src, _ := testChain(t, map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile, "AWS_ROLE_ARN": role}).load(context.Background(), region)
		if got := src.(*webIdentitySource).endpoint; got != want {
			t.Errorf("STS endpoint for %s = %q; want %q", region, got, want)
		}
	}
}

func TestAWSContainerCredentials(t *testing.T) {
	t.Parallel()
	ctr := fakeContainer(t, "/v2/credentials/abc", "tok-1", "AKIDCONTAINER")
	// ECS: relative to the agent's address; a static token.
	c := testChain(t, map[string]string{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/abc", "AWS_CONTAINER_AUTHORIZATION_TOKEN": "tok-1"})
	c.containerBase = ctr.URL
	if got, err := fetchFrom(t, c); err != nil || got.Credentials != credsOf("AKIDCONTAINER", "c-secret", "c-token") || got.expires.IsZero() {
		t.Errorf("relative URI: %+v, %v", got, err)
	}
	// EKS Pod Identity: a full URI and a token file, read at each fetch
	// and preferred to the variable.
	tokenFile := writeFile(t, "eks-pod-identity-token", "tok-1\n")
	env := map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": ctr.URL + "/v2/credentials/abc", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "stale"}
	src, err := testChain(t, env).load(context.Background(), "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := src.fetch(context.Background()); err != nil || got.AccessKeyID != "AKIDCONTAINER" {
		t.Errorf("full URI with a token file: %+v, %v", got, err)
	}
	os.WriteFile(tokenFile, []byte("tok-2"), 0o600)
	if _, err := src.fetch(context.Background()); err == nil || !strings.Contains(err.Error(), "InvalidToken") {
		t.Errorf("a refused token: err = %v; want the agent's code", err)
	}
	// Plain HTTP only to loopback or the agents' addresses.
	for raw, allowed := range map[string]bool{
		"http://127.0.0.1:1/creds": true, "http://169.254.170.23/v1/credentials": true, "http://[fd00:ec2::23]/v1/credentials": true,
		"https://creds.example.com/x": true, "http://10.0.0.1/creds": false, "http://creds.internal/x": false, "ftp://127.0.0.1/x": false,
	} {
		c := testChain(t, map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": raw})
		c.lookupHost = func(context.Context, string) ([]string, error) { return []string{"10.1.2.3"}, nil }
		_, err := c.load(context.Background(), "us-west-2")
		if (err == nil) != allowed {
			t.Errorf("%s: err = %v; allowed %v", raw, err, allowed)
		}
	}
}

func TestAWSInstanceMetadata(t *testing.T) {
	t.Parallel()
	for _, v1 := range []bool{false, true} {
		imds := fakeIMDS(t, v1, "AKIDIMDS")
		got, err := fetchFrom(t, testChain(t, map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL}))
		if err != nil || got.Credentials != credsOf("AKIDIMDS", "i-secret", "i-token") || got.expires.IsZero() {
			t.Errorf("IMDS (v1 only %v): %+v, %v", v1, got, err)
		}
		_, err = fetchFrom(t, testChain(t, map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL, "AWS_EC2_METADATA_V1_DISABLED": "true"}))
		if (err != nil) != v1 {
			t.Errorf("IMDSv1 disabled (v1 only %v): err = %v", v1, err)
		}
	}
	if _, err := fetchFrom(t, testChain(t, map[string]string{"AWS_EC2_METADATA_DISABLED": "TRUE"})); !errors.Is(err, errNoAWSCredentials) {
		t.Errorf("IMDS disabled: err = %v; want errNoAWSCredentials", err)
	}
	// Nothing listening: an error, quickly (the client's timeouts).
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	if _, err := fetchFrom(t, testChain(t, map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": dead.URL})); err == nil {
		t.Errorf("no IMDS: no error")
	}
}

// countingSource hands out credentials expiring ttl after its clock, and
// blocks each fetch until release has a value when release is set.
type countingSource struct {
	now     func() time.Time
	ttl     time.Duration
	fetches atomic.Int32
	fail    atomic.Bool
	release chan struct{}
}

func (s *countingSource) fetch(ctx context.Context) (awsCreds, error) {
	n := s.fetches.Add(1)
	if s.release != nil {
		<-s.release
	}
	if s.fail.Load() {
		return awsCreds{}, errors.New("source down")
	}
	c := awsCreds{Credentials: credsOf(fmt.Sprintf("AKID%d", n), "s", "t")}
	if s.ttl > 0 {
		c.expires = s.now().Add(s.ttl)
	}
	return c, nil
}

func TestAWSCredentialsRefreshBeforeExpiry(t *testing.T) {
	t.Parallel()
	clk := testsupport.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	src := &countingSource{now: clk.Now, ttl: time.Hour}
	c := &awsCredentials{region: "us-west-2", now: clk.Now, load: func(context.Context, string) (awsSource, error) { return src, nil }}
	ctx := context.Background()
	for range 3 {
		if cr, err := c.retrieve(ctx); err != nil || cr.AccessKeyID != "AKID1" {
			t.Fatalf("got %+v, %v", cr, err)
		}
	}
	clk.Advance(54 * time.Minute) // 6 minutes left: still cached
	if cr, _ := c.retrieve(ctx); cr.AccessKeyID != "AKID1" {
		t.Errorf("6 minutes before expiry: %s; want the cached AKID1", cr.AccessKeyID)
	}
	clk.Advance(2 * time.Minute) // 4 minutes left: refreshed
	if cr, _ := c.retrieve(ctx); cr.AccessKeyID != "AKID2" {
		t.Errorf("4 minutes before expiry: %s; want a refresh", cr.AccessKeyID)
	}
	// A failed refresh keeps serving what is still valid, then fails.
	src.fail.Store(true)
	clk.Advance(56 * time.Minute)
	if cr, err := c.retrieve(ctx); err != nil || cr.AccessKeyID != "AKID2" {
		t.Errorf("failed refresh, 4 minutes left: %+v, %v; want AKID2", cr, err)
	}
	clk.Advance(5 * time.Minute)
	if _, err := c.retrieve(ctx); err == nil || !strings.Contains(err.Error(), "source down") {
		t.Errorf("failed refresh after expiry: err = %v", err)
	}
	src.fail.Store(false)
	if cr, err := c.retrieve(ctx); err != nil || cr.AccessKeyID == "AKID2" {
		t.Errorf("source back: %+v, %v", cr, err)
	}
}

// TestAWSCredentialsShareOneFetch: callers arriving while a fetch runs
// wait for it rather than start their own, and one that gives up does not
// fail the others.
func TestAWSCredentialsShareOneFetch(t *testing.T) {
	t.Parallel()
	src := &countingSource{now: time.Now, ttl: time.Hour, release: make(chan struct{})}
	c := &awsCredentials{region: "us-west-2", load: func(context.Context, string) (awsSource, error) { return src, nil }}
	gaveUp, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := c.retrieve(gaveUp); first <- err }()
	testsupport.Eventually(t, 10*time.Second, "the first fetch", func() bool { return src.fetches.Load() == 1 })
	var wg sync.WaitGroup
	results := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			cr, err := c.retrieve(context.Background())
			if err != nil {
				t.Error(err)
			}
			results <- cr.AccessKeyID
		})
	}
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that gave up: err = %v", err)
	}
	close(src.release)
	wg.Wait()
	close(results)
	for id := range results {
		if id != "AKID1" {
			t.Errorf("a waiter got %s; want the shared fetch's AKID1", id)
		}
	}
	if n := src.fetches.Load(); n != 1 {
		t.Errorf("%d fetches; want 1", n)
	}
}

// TestAWSCredentialsLookAgain: a chain that found nothing, or a source that
// has never answered, is not kept: the next request looks again, and finds
// credentials that appeared meanwhile.
func TestAWSCredentialsLookAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	credsFile := filepath.Join(dir, "credentials")
	imds := fakeIMDS(t, false, "AKIDIMDS")
	imds.Close() // an instance role that does not answer
	chain := testChain(t, map[string]string{"AWS_SHARED_CREDENTIALS_FILE": credsFile, "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL})
	var loads atomic.Int32
	c := &awsCredentials{region: "us-west-2", load: func(ctx context.Context, region string) (awsSource, error) {
		loads.Add(1)
		return chain.load(ctx, region)
	}}
	if _, err := c.retrieve(context.Background()); err == nil || !strings.Contains(err.Error(), "instance metadata") {
		t.Fatalf("err = %v; want the instance metadata's failure", err)
	}
	os.WriteFile(credsFile, []byte("[default]\naws_access_key_id = AKIDLATER\naws_secret_access_key = l\n"), 0o600)
	if cr, err := c.retrieve(context.Background()); err != nil || cr.AccessKeyID != "AKIDLATER" {
		t.Errorf("after the file appeared: %+v, %v", cr, err)
	}
	if loads.Load() != 2 {
		t.Errorf("%d loads; want 2", loads.Load())
	}
}

// TestBedrockSignsWithTemporaryCredentials: credentials from web identity
// sign a Converse request that the fake Bedrock, expecting that session
// token, accepts.
func TestBedrockSignsWithTemporaryCredentials(t *testing.T) {
	t.Parallel()
	const role = "arn:aws:iam::123456789012:role/irsa"
	sts, _ := fakeSTS(t, role, "jwt", "ASIASTS", time.Now().Add(time.Hour))
	br := fakevendor.NewBedrock("ASIASTS", "sts-secret", "eu-west-3", fakevendor.Options{})
	br.SessionToken = "sts-token"
	srv := httptest.NewServer(br)
	t.Cleanup(srv.Close)
	chain := testChain(t, map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": writeFile(t, "token", "jwt"), "AWS_ROLE_ARN": role, "AWS_ENDPOINT_URL_STS": sts.URL})
	base, _ := url.Parse(srv.URL)
	u := &policy.Upstream{BaseURL: base, Cloud: &policy.Cloud{Kind: policy.CloudBedrock, Region: "eu-west-3"}}
	rt := &bedrock{u: u, next: http.DefaultTransport, creds: &awsCredentials{region: "eu-west-3", load: chain.load}}
	body := `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`
	req, _ := http.NewRequest("POST", srv.URL+"/model/"+url.PathEscape("anthropic.claude-3-5-haiku-20241022-v1:0")+"/converse", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	seen := br.Seen()
	if resp.StatusCode != 200 || len(seen) != 1 || !seen[0].Signed || seen[0].Header.Get("X-Amz-Security-Token") != "sts-token" {
		t.Errorf("status %d, seen %+v, answer %v", resp.StatusCode, seen, out)
	}
}
