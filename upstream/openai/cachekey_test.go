package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
	"github.com/svcgw/svcgw/upstream/openai"
)

// prompt_cache_key is derived per account: the same for one account's
// calls, different across accounts (also when their callers send the same
// key of their own), and never the account or the caller's key as sent.
func TestOpenAI_PromptCacheKeyIsPerAccount(t *testing.T) {
	is := is.New(t)
	f := protocoltest.Replay(t, "text.json")
	o := protocoltest.Options(f, "/v1")
	o.PromptCacheKey = true
	b := openai.New(o)
	call := func(account, callerKey string) string {
		req := &llm.Request{Account: account, CacheKey: callerKey,
			Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}}
		_, err := b.Complete(protocoltest.Context(t), req)
		is.NoErr(err)
		var body struct {
			PromptCacheKey *string `json:"prompt_cache_key"`
		}
		is.NoErr(json.Unmarshal(f.Last(t).Body, &body))
		is.True(body.PromptCacheKey != nil) // always sent when enabled
		return *body.PromptCacheKey
	}
	a1, a2, b1 := call("1", ""), call("1", ""), call("2", "")
	is.Equal(a1, a2)  // one account's calls share cache routing
	is.True(a1 != b1) // two accounts never do
	ka, kb := call("1", "session-42"), call("2", "session-42")
	is.True(ka != kb) // a caller's own key is scoped to its account
	is.True(ka != a1) // and still tells that account's sessions apart
	for _, k := range []string{a1, b1, ka, kb} {
		is.True(!strings.Contains(k, "session-42")) // never sent as it is
		is.True(len(k) <= 64)                       // within OpenAI's limit
	}

	// Off (the default for OpenAI-compatible servers that refuse unknown
	// fields): nothing is sent, not even the caller's own key.
	off := openai.New(protocoltest.Options(f, "/v1"))
	_, err := off.Complete(protocoltest.Context(t), &llm.Request{Account: "1", CacheKey: "session-42",
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}})
	is.NoErr(err)
	is.True(!strings.Contains(string(f.Last(t).Body), "prompt_cache_key"))
}
