package gemini_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

func TestGemini_Embed(t *testing.T) {
	t.Run("one input is embedContent", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "embed.json")
		req := protocoltest.EmbedRequest("What is the meaning of life?")
		req.TaskType, req.Dimensions, req.User = "RETRIEVAL_QUERY", 3, "user-42"
		e, err := gemini.New(protocoltest.Options(f, "")).Embed(protocoltest.Context(t), req)
		is.NoErr(err) // embed
		is.Equal(e.Vectors, [][]float32{{0.6, -0.8, 0}})
		is.Equal(e.Usage, llm.Usage{}) // the protocol reports none: the server charges its own count
		protocoltest.NoLeak(t, "embeddings", e)
		protocoltest.GoldenRequest(t, f, "embed")
	})

	t.Run("several inputs are batchEmbedContents", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "batch_embed.json")
		req := protocoltest.EmbedRequest()
		req.TaskType, req.Title, req.Dimensions = "RETRIEVAL_DOCUMENT", "Fables", 3
		e, err := gemini.New(protocoltest.Options(f, "")).Embed(protocoltest.Context(t), req)
		is.NoErr(err) // embed
		is.Equal(e.Vectors, [][]float32{{1, 0, 0}, {0, 0.6, 0.8}})
		protocoltest.GoldenRequest(t, f, "batch_embed")
	})

	t.Run("usageMetadata when a reply carries it", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"embeddings":[{"values":[1,0]},{"values":[0,1]}],"usageMetadata":{"promptTokenCount":11}}`)
		})
		e, err := gemini.New(protocoltest.Options(f, "")).Embed(protocoltest.Context(t), protocoltest.EmbedRequest())
		is.NoErr(err) // embed
		is.Equal(e.Usage, llm.Usage{InputTokens: 11})
	})

	t.Run("a vector longer than asked is cut and re-normalised", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"embedding":{"values":[3,4,12,0]}}`)
		})
		req := protocoltest.EmbedRequest("hi")
		req.Dimensions = 2
		e, err := gemini.New(protocoltest.Options(f, "")).Embed(protocoltest.Context(t), req)
		is.NoErr(err) // embed
		is.Equal(e.Vectors, [][]float32{{0.6, 0.8}})
	})

	t.Run("token ids are refused before any request", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {})
		req := &llm.EmbedRequest{Inputs: []llm.EmbedInput{{Tokens: []int{1, 2}}}}
		_, err := gemini.New(protocoltest.Options(f, "")).Embed(protocoltest.Context(t), req)
		le := protocoltest.LLMError(t, err)
		is.Equal(le.Kind, llm.KindInvalidRequest)
		is.Equal(le.Param, "input")
		is.True(!strings.Contains(strings.ToLower(le.Message), "gemini")) // no vendor named
		is.Equal(len(f.Requests()), 0)
	})

	for _, tc := range []struct{ name, reply, message string }{
		{"fewer vectors than inputs", `{"embeddings":[{"values":[1,0]}]}`, "the upstream model returned a vector count that does not match the inputs"},
		{"no embeddings at all", `{}`, "the upstream model returned a vector count that does not match the inputs"},
		{"an empty vector", `{"embeddings":[{"values":[]},{"values":[1]}]}`, "the upstream model sent a malformed reply"},
		{"an error object with status 200", `{"error":{"code":429,"message":"canary quota","status":"RESOURCE_EXHAUSTED"}}`, "the upstream model is rate limited; retry later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, tc.reply) })
			_, err := gemini.New(protocoltest.Options(f, "")).Embed(protocoltest.Context(t), protocoltest.EmbedRequest())
			le := protocoltest.LLMError(t, err)
			is.Equal(le.Message, tc.message)
			protocoltest.NoLeak(t, "error", le)
		})
	}

	t.Run("a call beyond one batch goes as several, in order", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Requests []struct {
					Model   string
					Content struct{ Parts []struct{ Text string } }
				}
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !strings.HasSuffix(r.URL.Path, ":batchEmbedContents") {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			if len(body.Requests) > 100 {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error":{"code":400,"message":"at most 100 requests can be in one batch","status":"INVALID_ARGUMENT"}}`)
				return
			}
			type emb struct {
				Values []float64 `json:"values"`
			}
			var resp struct {
				Embeddings []emb `json:"embeddings"`
			}
			for _, q := range body.Requests {
				n, _ := strconv.Atoi(q.Content.Parts[0].Text)
				if q.Model != "models/canary-backend-model" {
					n = -1
				}
				resp.Embeddings = append(resp.Embeddings, emb{Values: []float64{float64(n), 1}})
			}
			json.NewEncoder(w).Encode(resp)
		})
		texts := make([]string, 250)
		for i := range texts {
			texts[i] = strconv.Itoa(i)
		}
		e, err := gemini.New(protocoltest.Options(f, "")).Embed(protocoltest.Context(t), protocoltest.EmbedRequest(texts...))
		is.NoErr(err) // embed
		is.Equal(len(e.Vectors), len(texts))
		for i, v := range e.Vectors {
			if v[0] != float32(i) {
				t.Fatalf("vector %d is the embedding of input %v", i, v[0])
			}
		}
		is.Equal(len(f.Requests()), 3) // 100 + 100 + 50
	})
}
