// Package cloud reaches the cloud vendors' deployments of the models:
// Azure OpenAI, Amazon Bedrock and Vertex AI. For an upstream whose compiled
// policy has a Cloud block it wraps the upstream's transport: it moves the
// request the chain built (in the upstream's wire shape, addressed as the
// vendor's own API would be) to the cloud's address, adds the cloud's
// credential, and, for Bedrock's binary event stream, re-frames the answer
// as SSE so that the chain reads every stream alike.
//
// Credentials are kept here, process-wide and keyed by their source, so a
// policy reload keeps a cached token: an Entra token file read again when it
// changes, AWS credentials from the standard chain (awscreds.go: cached,
// refreshed before expiry), Google access tokens from Application
// Default Credentials (detour's own: google_tokens.go, refreshed before
// expiry, one refresh at a time).
// No credential ever appears in an error this package returns.
//
// cloud imports policy, rewrite, internal/sigv4 and internal/eventstream of
// detour's packages, and nothing that imports it: internal/chain is its
// only user.
package cloud
