package policy

import (
	"fmt"
	"path"
	"strings"
)

// embeddingDimensions checks an upstream's embedding_dimensions.
func (k *compiler) embeddingDimensions(p string, n int) int {
	if n < 0 {
		k.errorf(p+".embedding_dimensions", "must be positive; got %d", n)
		return 0
	}
	return n
}

// embedChain refuses a chain whose upstreams declare different embedding
// sizes: an app that indexes the primary's vectors would get vectors of
// another size from the backup, which no vector store accepts (and which
// would be meaningless beside the old ones if it did). p is the chain's
// field path; names are in chain order.
func (k *compiler) embedChain(p string, names []string, ups map[string]UpstreamFile) bool {
	first, firstDims := "", 0
	for j, name := range names {
		d := ups[name].EmbeddingDimensions
		if d <= 0 {
			continue
		}
		if firstDims == 0 {
			first, firstDims = name, d
			continue
		}
		if d != firstDims {
			k.errorf(fmt.Sprintf("%s[%d]", p, j), "upstream %q declares embedding_dimensions %d but %q, earlier in the chain, declares %d: a failover would hand the app vectors of another size; make them equal (both vendors' current models take a size: OpenAI dimensions, Gemini outputDimensionality)", name, d, first, firstDims)
			return false
		}
	}
	return true
}

// embedPaths are the paths an app's embeddings call takes, one per way
// the SDKs call it.
var embedPaths = []string{"/v1/embeddings", "/v1beta/models/m:embedContent", "/v1beta/models/m:batchEmbedContents"}

// EmbeddingWarnings are warnings about routes made for embeddings (their
// match path names an embeddings endpoint) with an upstream of another
// shape that declares no embedding_dimensions: that upstream is never sent
// the route's requests, which `detour policy check` says.
func (c *Compiled) EmbeddingWarnings() []string {
	var out []string
	for _, r := range c.Routes {
		if !strings.Contains(strings.ToLower(r.Path), "embed") || !matchesAny(r.Path, embedPaths) {
			continue
		}
		for _, u := range r.Chain {
			if u.Shape != r.Shape && u.Shape != ShapeStatic && u.EmbeddingDimensions == 0 {
				out = append(out, fmt.Sprintf("route %q: upstream %q speaks %s, not %s, and declares no embedding_dimensions, so it is never sent this route's embeddings requests; set embedding_dimensions to its model's vector size", r.Name, u.Name, u.Shape, r.Shape))
			}
		}
	}
	return out
}

func matchesAny(pattern string, paths []string) bool {
	for _, p := range paths {
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
	}
	return false
}
