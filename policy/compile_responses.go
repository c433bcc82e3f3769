package policy

import "github.com/detour-proxy/detour/rewrite"

// chatOnly checks upstreams.NAME.chat_only and carries it over: it says
// which of OpenAI's two chat APIs an openai upstream lacks, so it means
// nothing for another shape (an openai-responses upstream is the other
// case, already said by its shape).
func (k *compiler) chatOnly(p string, uf UpstreamFile, u *Upstream) {
	if uf.ChatOnly && u.Shape != rewrite.OpenAI {
		k.errorf(p+".chat_only", "only an openai upstream can be chat_only; this one's shape is %q", uf.Shape)
		return
	}
	u.ChatOnly = uf.ChatOnly
}
