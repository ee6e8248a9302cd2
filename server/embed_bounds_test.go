package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/matryer/is"
	"google.golang.org/genai"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/gencontent"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/gemini"
)

// textOfTokens is the longest text of repeated words that svcgw counts as
// at most n tokens, and its count.
func textOfTokens(t *testing.T, n int) (string, int) {
	t.Helper()
	lo, hi := 0, 4*n // words: a word is at least a token
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if llm.TextTokens(strings.Repeat("word ", mid)) <= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	s := strings.Repeat("word ", lo)
	return s, llm.TextTokens(s)
}

// TestEmbeddingsSDK_GeminiInputTokens: the Gemini surface takes an input
// beyond Gemini's 2,048-token limit, as Gemini does (it truncates
// silently), and passes it upstream whole; above 8,192 tokens, which no
// upstream embeds, it is a 400 in Google's envelope, charged nothing.
func TestEmbeddingsSDK_GeminiInputTokens(t *testing.T) {
	ctx := context.Background()
	atMost, n := textOfTokens(t, gencontent.MaxEmbedInputTokens)
	is.New(t).Equal(n, gencontent.MaxEmbedInputTokens) // the bound itself, exactly
	over := atMost + "word"
	is.New(t).True(llm.TextTokens(over) > gencontent.MaxEmbedInputTokens)
	long, longTokens := textOfTokens(t, 3000) // beyond Gemini's 2,048

	t.Run("beyond 2,048 tokens: embedded, the text upstream whole, charged on svcgw's count", func(t *testing.T) {
		is := is.New(t)
		rec := newEmbedRecorder(t, 0)
		gw := embedGateway(t, gemini.New(upstream.HTTPOptions{BaseURL: rec.URL, APIKey: "gm-up", Model: embedGMModel}))
		client := genaiClient(t, gw.URL+"/svc/", gw.Key)
		dims := int32(4)
		res, err := client.Models.EmbedContent(ctx, "gemini-embedding-001",
			[]*genai.Content{genai.NewContentFromText(long, genai.RoleUser), genai.NewContentFromText(atMost, genai.RoleUser)},
			&genai.EmbedContentConfig{OutputDimensionality: &dims})
		is.NoErr(err)
		is.Equal(len(res.Embeddings), 2)
		is.Equal(res.Embeddings[0].Values, upstreamVectors[0])
		reqs := rec.Take()
		is.Equal(len(reqs), 1)
		is.Equal(reqs[0].Path, "/v1beta/models/backend-embed-gm:batchEmbedContents")
		is.Equal(reqs[0].Body, fmt.Sprintf(`{"requests":[{"model":"models/backend-embed-gm","content":{"role":"user","parts":[{"text":%q}]},"outputDimensionality":4},`+
			`{"model":"models/backend-embed-gm","content":{"role":"user","parts":[{"text":%q}]},"outputDimensionality":4}]}`, long, atMost))
		g := gw.generation(t, res.SDKHTTPResponse.Headers.Get("X-SVC-Generation-Id"))
		is.Equal(g.Usage.PromptTokens, longTokens+gencontent.MaxEmbedInputTokens)
		is.Equal(g.TotalCost, embedCharge(llm.TierMedium, longTokens+gencontent.MaxEmbedInputTokens))
	})

	gw := newTestGateway(t)
	client := genaiClient(t, gw.URL+"/svc/", gw.Key)
	for _, tc := range []struct {
		name     string
		contents []*genai.Content
		want     string
	}{
		// The Gen AI SDK sends one content to batchEmbedContents too.
		{"one input", []*genai.Content{genai.NewContentFromText(over, genai.RoleUser)},
			fmt.Sprintf("* requests[0].content: the text is %d tokens long (svcgw's count); an embedding input takes at most 8192 tokens", llm.TextTokens(over))},
		{"the second of a batch", []*genai.Content{genai.NewContentFromText("short", genai.RoleUser), genai.NewContentFromText(over, genai.RoleUser)},
			"* requests[1].content: the text is"},
	} {
		t.Run("above 8,192 tokens, "+tc.name+": 400 INVALID_ARGUMENT, nothing charged", func(t *testing.T) {
			is := is.New(t)
			before := gw.credits(t)
			_, err := client.Models.EmbedContent(ctx, "gemini-embedding-001", tc.contents, nil)
			var ae genai.APIError
			is.True(errors.As(err, &ae)) // an APIError
			is.Equal(ae.Code, 400)
			is.Equal(ae.Status, "INVALID_ARGUMENT")
			is.True(strings.HasPrefix(ae.Message, tc.want)) // names the input and the bound
			is.Equal(gw.credits(t), before)
		})
	}

	t.Run("embedContent, above 8,192 tokens: the field is content", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, "POST", "/svc/v1beta/models/text-embedding-004:embedContent",
			`{"content":{"parts":[{"text":"`+over+`"}]}}`, "Authorization", "", "x-goog-api-key", gw.Key)
		is.Equal(resp.StatusCode, 400)
		is.True(strings.Contains(string(body), `"message": "* content: the text is`) || strings.Contains(string(body), `"message":"* content: the text is`))
	})
}
