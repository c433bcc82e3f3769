package policy

import "slices"

// Warnings are everything in a policy that compiles but deserves a second
// look: listeners other machines can reach (ListenWarnings), and upstreams
// and routes that work other than a reader may expect (UpstreamWarnings).
// `detour policy check` prints them all; `detour serve` logs them at start.
func (c *Compiled) Warnings() []string {
	return slices.Concat(c.ListenWarnings(), c.UpstreamWarnings())
}

// UpstreamWarnings are the warnings about upstreams and routes: plain-HTTP
// upstreams, and routes whose embeddings can never fail over. A new kind of
// warning is added here once and reaches both commands.
func (c *Compiled) UpstreamWarnings() []string {
	return slices.Concat(c.PlainHTTPWarnings(), c.EmbeddingWarnings())
}
