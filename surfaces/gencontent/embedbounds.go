package gencontent

import (
	"strconv"

	"github.com/svcgw/svcgw/llm"
)

// MaxEmbedInputTokens is the most tokens, by svcgw's count, one input of
// embedContent or batchEmbedContents may hold: no upstream embeds more
// (OpenAI's embedding models refuse an input above 8,192 tokens; Gemini's
// embed the first 2,048 of any input). Above it the call is a 400.
//
// Below it nothing is refused, as Gemini refuses nothing: above its
// models' 2,048-token input limit (gemini-embedding-001,
// text-embedding-004) the Gemini API truncates an input silently and
// reports no truncation; Vertex AI does the same unless autoTruncate is
// false, which the Gemini API does not take. svcgw passes every input
// upstream whole, since its count is an estimate: a 400 at an estimated
// 2,048 would refuse texts Gemini embeds, and a cut at an estimated 2,048
// would embed other text than Gemini does. A Gemini upstream then
// truncates as Gemini does; an OpenAI-protocol one embeds the whole input.
const MaxEmbedInputTokens = 8192

// checkEmbedInputTokens holds each input of req to MaxEmbedInputTokens,
// naming the first beyond it by its place in the caller's body (prefix
// is "requests[]." in a batch, "" for embedContent).
func checkEmbedInputTokens(req *llm.EmbedRequest, prefix string) error {
	for i, in := range req.Inputs {
		// TextTokens counts at most a token a byte: a text of no more
		// bytes than the bound needs no count.
		if len(in.Text) <= MaxEmbedInputTokens {
			continue
		}
		n := in.TokenCount()
		if n <= MaxEmbedInputTokens {
			continue
		}
		field := "content"
		if prefix != "" {
			field = "requests[" + strconv.Itoa(i) + "].content"
		}
		return llm.InvalidParam(field, "* %s: the text is %d tokens long (svcgw's count); an embedding input takes at most %d tokens: split it into several inputs", field, n, MaxEmbedInputTokens)
	}
	return nil
}
