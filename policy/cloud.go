package policy

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/detour-proxy/detour/rewrite"
)

// The upstream shapes that name a cloud vendor's deployment of a model
// rather than a wire format of their own: azure-openai speaks OpenAI's chat
// completions at Azure's addresses; bedrock speaks Amazon Bedrock's Converse
// API (rewrite.Bedrock). Vertex AI is not a shape: a gemini or anthropic
// upstream with a vertex block (VertexFile) sends the same body to Vertex.
const (
	ShapeAzureOpenAI = "azure-openai"
	ShapeBedrock     = "bedrock"
)

// The shapes an error message offers, kept beside the constants so that a
// new shape is named where it is added: an upstream may speak any of them; a
// route's shape is what the app speaks, which is never a cloud's.
const (
	upstreamShapes = "openai, anthropic, gemini, openai-responses, azure-openai, bedrock"
	appShapes      = "openai, anthropic, gemini, openai-responses"
)

// CloudKind names the cloud whose addressing and credentials an upstream
// uses.
type CloudKind string

// The clouds detour reaches.
const (
	CloudAzure   CloudKind = "azure"
	CloudBedrock CloudKind = "bedrock"
	CloudVertex  CloudKind = "vertex"
)

// AzureFile configures a shape azure-openai upstream (Azure OpenAI in
// Foundry Models): base_url is the resource's endpoint,
// https://RESOURCE.openai.azure.com.
type AzureFile struct {
	// APIVersion is the api-version query parameter every Azure OpenAI call
	// needs, e.g. "2024-10-21" or "2025-04-01-preview". Required.
	APIVersion string `json:"api_version"`
	// Deployments maps the model sent (after models) to the Azure
	// deployment that serves it. A model with no entry is sent to the
	// deployment of the same name. Default: none.
	Deployments map[string]string `json:"deployments,omitempty"`
	// TokenFile names a file holding a Microsoft Entra ID access token,
	// sent as Authorization: Bearer; the file is read again whenever it
	// changes (a token refresher rewrites it before the hour is up).
	// Set it instead of auth, which then must be absent. Default: none
	// (auth's key goes in the api-key header).
	TokenFile string `json:"token_file,omitempty"`
}

// BedrockFile configures a shape bedrock upstream. Its credentials come
// from the AWS SDK's standard chain (environment, shared files, web
// identity for EKS, container and instance roles), so it takes no auth.
type BedrockFile struct {
	// Region is the AWS region of bedrock-runtime, e.g. "us-east-1".
	// Required; also the region requests are signed for.
	Region string `json:"region"`
}

// VertexFile sends a gemini or anthropic upstream's requests to Vertex AI
// in a Google Cloud project. Credentials are Application Default
// Credentials, so the upstream takes no auth.
type VertexFile struct {
	// Project is the Google Cloud project ID. Required.
	Project string `json:"project"`
	// Region is the Vertex location, e.g. "us-central1", "us-east5" or
	// "global". Required.
	Region string `json:"region"`
	// CredentialsFile names a service-account (or external account) JSON
	// key file to use instead of Application Default Credentials'
	// search (GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, the GKE
	// metadata server). Default: Application Default Credentials.
	CredentialsFile string `json:"credentials_file,omitempty"`
}

// Cloud is a compiled cloud upstream's addressing and credential source.
// Immutable.
type Cloud struct {
	Kind CloudKind
	// APIVersion and Deployments are Azure's; TokenFile is Azure's Entra
	// token file (absolute), "" for an api-key.
	APIVersion  string
	Deployments map[string]string
	TokenFile   string
	// Region is Bedrock's and Vertex's; Project and CredentialsFile
	// (absolute, "" for ADC) Vertex's.
	Region          string
	Project         string
	CredentialsFile string
}

// Deployment returns the Azure deployment for the model being sent.
func (c *Cloud) Deployment(model string) string {
	if d, ok := c.Deployments[model]; ok {
		return d
	}
	return model
}

// azureAPIVersion is the form of every Azure OpenAI api-version: a date,
// optionally -preview; the data plane refuses anything else.
var azureAPIVersion = regexp.MustCompile(`^20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])(-preview)?$`)

// cloudName matches a region, project or deployment: they go into the
// upstream's host and path, so nothing that could change either is allowed.
var cloudName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// wireShape returns the wire format of an upstream's shape as the policy
// names it: azure-openai speaks OpenAI's.
func wireShape(policyShape string) rewrite.Shape {
	switch policyShape {
	case ShapeAzureOpenAI:
		return rewrite.OpenAI
	case ShapeBedrock:
		return rewrite.Bedrock
	}
	return rewrite.Shape(policyShape)
}

// isWireShape reports whether an upstream's shape, as the policy names it,
// is one detour can send to (static is not).
func isWireShape(policyShape string) bool {
	w := wireShape(policyShape)
	return w.Valid() || w == rewrite.Bedrock
}

// cloud compiles an upstream's cloud blocks, after its shape was read. It
// reports whether the upstream's credential comes from the cloud (then auth
// must be absent and is not compiled). base_url may be absent for bedrock
// and vertex: the vendor's regional endpoint is filled in.
func (k *compiler) cloud(p string, uf UpstreamFile, u *Upstream) (cloudAuth bool) {
	for _, b := range []struct {
		field string
		set   bool
		ok    bool
	}{
		{"azure", uf.Azure != nil, uf.Shape == ShapeAzureOpenAI},
		{"bedrock", uf.Bedrock != nil, uf.Shape == ShapeBedrock},
		{"vertex", uf.Vertex != nil, uf.Shape == string(rewrite.Gemini) || uf.Shape == string(rewrite.Anthropic)},
	} {
		if b.set && !b.ok {
			k.errorf(p+"."+b.field, "not for an upstream of shape %q", uf.Shape)
		}
	}
	switch {
	case uf.Shape == ShapeAzureOpenAI:
		return k.azure(p, uf, u)
	case uf.Shape == ShapeBedrock:
		return k.bedrock(p, uf, u)
	case uf.Vertex != nil && (u.Shape == rewrite.Gemini || u.Shape == rewrite.Anthropic):
		return k.vertex(p, uf, u)
	}
	return false
}

func (k *compiler) azure(p string, uf UpstreamFile, u *Upstream) bool {
	c := &Cloud{Kind: CloudAzure}
	u.Cloud = c
	a := uf.Azure
	if a == nil {
		k.errorf(p+".azure", `required for shape azure-openai: {"api_version": "2024-10-21"} at least`)
		return false
	}
	if !azureAPIVersion.MatchString(a.APIVersion) {
		k.errorf(p+".azure.api_version", `required: an Azure OpenAI api-version such as "2024-10-21" or "2025-04-01-preview"; got %q`, a.APIVersion)
	}
	c.APIVersion = a.APIVersion
	for _, m := range sortedKeys(a.Deployments) {
		if d := a.Deployments[m]; !cloudName.MatchString(d) {
			k.errorf(p+".azure.deployments."+m, "a deployment name (letters, digits, '.', '_', '-'); got %q", d)
		}
	}
	c.Deployments = a.Deployments
	if a.TokenFile == "" {
		return false
	}
	if uf.Auth != nil {
		k.errorf(p+".auth", "azure.token_file is the credential: leave auth out")
	}
	c.TokenFile = k.resolve(a.TokenFile)
	if b, err := k.readRef(c.TokenFile); err != nil {
		k.errorf(p+".azure.token_file", "cannot read token file %s: %v", c.TokenFile, err)
	} else if strings.TrimSpace(string(b)) == "" {
		k.errorf(p+".azure.token_file", "token file %s is empty", c.TokenFile)
	}
	return true
}

func (k *compiler) bedrock(p string, uf UpstreamFile, u *Upstream) bool {
	c := &Cloud{Kind: CloudBedrock}
	u.Cloud, u.Auth = c, AuthNone
	k.noAuth(p, uf, "bedrock signs with AWS credentials from the standard chain")
	if uf.Bedrock == nil {
		k.errorf(p+".bedrock", `required for shape bedrock: {"region": "us-east-1"}`)
		return true
	}
	c.Region = k.region(p+".bedrock.region", uf.Bedrock.Region, "us-east-1")
	k.defaultBaseURL(uf, u, "https://bedrock-runtime."+c.Region+".amazonaws.com")
	return true
}

func (k *compiler) vertex(p string, uf UpstreamFile, u *Upstream) bool {
	v := uf.Vertex
	c := &Cloud{Kind: CloudVertex}
	u.Cloud, u.Auth = c, AuthNone
	k.noAuth(p, uf, "vertex uses Google Application Default Credentials")
	c.Region = k.region(p+".vertex.region", v.Region, "us-central1")
	if !cloudName.MatchString(v.Project) {
		k.errorf(p+".vertex.project", "required: the Google Cloud project ID; got %q", v.Project)
	}
	c.Project = v.Project
	if v.CredentialsFile != "" {
		c.CredentialsFile = k.resolve(v.CredentialsFile)
		if _, err := k.readRef(c.CredentialsFile); err != nil {
			k.errorf(p+".vertex.credentials_file", "cannot read %s: %v", c.CredentialsFile, err)
		}
	}
	host := c.Region + "-aiplatform.googleapis.com"
	if c.Region == "global" {
		host = "aiplatform.googleapis.com"
	}
	k.defaultBaseURL(uf, u, "https://"+host)
	return true
}

func (k *compiler) noAuth(p string, uf UpstreamFile, why string) {
	if uf.Auth != nil {
		k.errorf(p+".auth", "leave auth out: %s", why)
	}
}

func (k *compiler) region(p, r, example string) string {
	if !cloudName.MatchString(r) {
		k.errorf(p, "required: a region such as %q; got %q", example, r)
		return example
	}
	return r
}

// defaultBaseURL fills in the vendor's regional endpoint when the policy
// names no base_url (one it names, a fake or a private endpoint, wins).
func (k *compiler) defaultBaseURL(uf UpstreamFile, u *Upstream, def string) {
	if uf.BaseURL == "" {
		u.BaseURL, _ = url.Parse(def)
	}
}
