package fakevendor

import (
	"net/http"
	"strings"
	"sync"

	"github.com/detour-proxy/detour/rewrite"
)

// Azure is a fake Azure OpenAI resource: the OpenAI chat completions of an
// inner OpenAI-shaped Vendor, at Azure's addresses and with Azure's
// credentials and errors (docs/vendors.md#azure-openai-upstream). It serves
// POST /openai/deployments/DEPLOYMENT/chat/completions?api-version=V
// (and /embeddings, answered 404 like an unknown path of the inner fake),
// accepting the api-key header or an Entra ID bearer token (SetToken).
type Azure struct {
	// Vendor answers the requests that pass Azure's checks; its faults and
	// records work as for any fake.
	*Vendor
	// Key is the api-key accepted. Empty accepts none.
	Key string
	// Deployments are the deployments the resource has.
	Deployments []string

	mu     sync.Mutex
	token  string
	script []AzureError
	seen   []AzureRequest
}

// AzureRequest is what the fake Azure saw of one request before the inner
// vendor answered it.
type AzureRequest struct {
	Deployment, APIVersion string
	// Auth is "api-key", "bearer" or "" (refused).
	Auth string
}

// AzureError is one of Azure's own error answers, scripted with
// Azure.Fail before the inner vendor's faults.
type AzureError string

// Azure's errors, with the bodies of docs/vendors.md#azure-openai-upstream.
const (
	// AzureContentFilter is the prompt filter's 400, code content_filter.
	AzureContentFilter AzureError = "content_filter"
	// AzureRateLimit is a 429 for the token rate limit, with retry-after
	// and retry-after-ms.
	AzureRateLimit AzureError = "rate_limit"
	// AzureDailyQuota is the 429 whose message asks for 86400 seconds.
	AzureDailyQuota AzureError = "daily_quota"
)

// NewAzure returns a fake Azure resource whose deployments are answered by
// an OpenAI-shaped Vendor made with opts.
func NewAzure(key, token string, deployments []string, opts Options) *Azure {
	if opts.Name == "" {
		opts.Name = "azure"
	}
	return &Azure{Vendor: New(rewrite.OpenAI, opts), Key: key, token: token, Deployments: deployments}
}

// SetToken changes the Entra ID token accepted (empty accepts none), as
// a token's expiry does.
func (a *Azure) SetToken(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token = token
}

// Fail queues Azure errors for the next requests that pass the checks.
func (a *Azure) Fail(errs ...AzureError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.script = append(a.script, errs...)
}

// Seen returns the requests that reached the fake, in order.
func (a *Azure) Seen() []AzureRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]AzureRequest(nil), a.seen...)
}

// azureAPIVersions are the api-versions the fake accepts: GA and preview
// versions of the data plane that serve chat completions.
var azureAPIVersions = map[string]bool{
	"2024-06-01": true, "2024-10-21": true, "2025-04-01-preview": true, "2024-12-01-preview": true,
}

// Azure's bodies, byte for byte as the service sends them.
const (
	azureResourceNotFound   = `{"error":{"code":"404","message": "Resource not found"}}`
	azureVersionUnsupported = `{"error":{"code":"BadRequest","message":"API version not supported"}}`
	azureAccessDenied       = `{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}`
	azureDeploymentNotFound = `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}`
	// AzureContentFilterBody is the prompt filter's answer (status 400).
	AzureContentFilterBody = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry. To learn more about our content filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":true,"severity":"high"},"violence":{"filtered":false,"severity":"safe"}}}}}`
	azureRateLimitBody     = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}`
	azureDailyQuotaBody    = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded call rate limit of your current OpenAI S0 pricing tier. Please retry after 86400 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}`
)

func (a *Azure) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/openai/deployments/")
	dep, op, _ := strings.Cut(rest, "/")
	if !ok || dep == "" || (op != "chat/completions" && op != "embeddings") {
		azureError(w, http.StatusNotFound, azureResourceNotFound, nil)
		return
	}
	ver := r.URL.Query().Get("api-version")
	switch {
	case ver == "":
		azureError(w, http.StatusNotFound, azureResourceNotFound, nil)
		return
	case !azureAPIVersions[ver]:
		azureError(w, http.StatusBadRequest, azureVersionUnsupported, nil)
		return
	}
	seen := AzureRequest{Deployment: dep, APIVersion: ver}
	a.mu.Lock()
	switch {
	case a.Key != "" && r.Header.Get("Api-Key") == a.Key:
		seen.Auth = "api-key"
	case a.token != "" && r.Header.Get("Authorization") == "Bearer "+a.token:
		seen.Auth = "bearer"
	}
	a.seen = append(a.seen, seen)
	var fail AzureError
	if seen.Auth != "" && len(a.script) > 0 {
		fail, a.script = a.script[0], a.script[1:]
	}
	a.mu.Unlock()
	if seen.Auth == "" {
		azureError(w, http.StatusUnauthorized, azureAccessDenied, nil)
		return
	}
	if !a.hasDeployment(dep) {
		azureError(w, http.StatusNotFound, azureDeploymentNotFound, nil)
		return
	}
	switch fail {
	case AzureContentFilter:
		azureError(w, http.StatusBadRequest, AzureContentFilterBody, nil)
		return
	case AzureRateLimit:
		azureError(w, http.StatusTooManyRequests, azureRateLimitBody, map[string]string{"retry-after": "6", "retry-after-ms": "6000", "x-ratelimit-remaining-tokens": "0"})
		return
	case AzureDailyQuota:
		azureError(w, http.StatusTooManyRequests, azureDailyQuotaBody, map[string]string{"retry-after": "86400"})
		return
	}
	// The inner fake speaks api.openai.com's paths.
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/v1/" + op
	r2.URL.RawQuery = ""
	a.Vendor.ServeHTTP(w, r2)
}

func (a *Azure) hasDeployment(dep string) bool {
	for _, d := range a.Deployments {
		if d == dep {
			return true
		}
	}
	return false
}

func azureError(w http.ResponseWriter, status int, body string, h map[string]string) {
	for k, v := range h {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Apim-Request-Id", "00000000-0000-4000-8000-000000000000")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
