package policy

import "slices"

// Warnings are everything in a policy that compiles but deserves a second
// look: listeners other machines can reach, plain-HTTP upstreams, routes
// that can never fail embeddings over. `detour policy check` prints them
// and `detour serve` logs them at start, so a new kind of warning is added
// here once and reaches both.
func (c *Compiled) Warnings() []string {
	return slices.Concat(c.ListenWarnings(), c.PlainHTTPWarnings(), c.EmbeddingWarnings())
}
