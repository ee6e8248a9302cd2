package gemini_test

import (
	"encoding/json"
	"testing"

	"github.com/matryer/is"
	"google.golang.org/genai"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

// TestGemini_EmbedMatchesSDK checks Embed's wire format against the
// official Go SDK's (google.golang.org/genai, which sends every call,
// one input or several, to batchEmbedContents): for the same batch the
// request is the same, and the SDK reads the reply the tests replay as
// Embed does.
func TestGemini_EmbedMatchesSDK(t *testing.T) {
	is := is.New(t)
	f := protocoltest.Replay(t, "batch_embed.json")
	client, err := genai.NewClient(protocoltest.Context(t), &genai.ClientConfig{
		APIKey: "sk-test-key", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: f.URL},
	})
	is.NoErr(err) // genai client
	dims := int32(3)
	sdkResp, err := client.Models.EmbedContent(protocoltest.Context(t), "canary-backend-model",
		[]*genai.Content{genai.NewContentFromText("the quick brown fox", ""), genai.NewContentFromText("jumps over the lazy dog", "")},
		&genai.EmbedContentConfig{TaskType: "RETRIEVAL_DOCUMENT", Title: "Fables", OutputDimensionality: &dims})
	is.NoErr(err) // the SDK's call
	sdkReq := f.Last(t)

	req := protocoltest.EmbedRequest("the quick brown fox", "jumps over the lazy dog")
	req.TaskType, req.Title, req.Dimensions = "RETRIEVAL_DOCUMENT", "Fables", 3
	e, err := gemini.New(protocoltest.Options(f, "")).Embed(protocoltest.Context(t), req)
	is.NoErr(err) // Embed
	ours := f.Last(t)

	is.Equal(ours.Path, sdkReq.Path)
	is.Equal(ours.Header["X-Goog-Api-Key"], sdkReq.Header["X-Goog-Api-Key"])
	is.Equal(jsonValue(t, ours.Body), jsonValue(t, sdkReq.Body)) // the same request body
	is.Equal(len(e.Vectors), len(sdkResp.Embeddings))
	for i, emb := range sdkResp.Embeddings {
		is.Equal(e.Vectors[i], emb.Values)
	}
	is.Equal(e.Usage, llm.Usage{})
}

func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}
