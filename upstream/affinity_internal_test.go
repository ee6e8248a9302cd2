package upstream

import (
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

// Cache affinity is scoped to the account and the caller's cache key:
// the same prefix from two accounts hashes apart.
func TestAffinityKey_ScopedToTheAccount(t *testing.T) {
	is := is.New(t)
	req := func(account, key string) *llm.Request {
		return &llm.Request{Account: account, CacheKey: key,
			System:   []llm.Part{llm.TextPart("a long shared system prompt")},
			Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}}
	}
	is.Equal(affinityKey(req("1", "")), affinityKey(req("1", "")))   // stable
	is.True(affinityKey(req("1", "")) != affinityKey(req("2", "")))  // per account
	is.True(affinityKey(req("1", "k")) != affinityKey(req("1", ""))) // per caller key
	is.True(affinityKey(req("1", "k")) != affinityKey(req("2", "k")))
}
