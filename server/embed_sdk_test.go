package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// End-to-end tests of the embeddings endpoints, driven by the official
// SDKs (openai-go's Embeddings.New, genai's Models.EmbedContent) against a
// real gateway with the fixture backend: the native shapes, the vectors,
// the record and the charge, and that no backend shows.

var embedDocs = []string{
	"The cat sat on the mat.",
	"Quarterly revenue grew four percent on cloud demand.",
	"Photosynthesis turns light into chemical energy.",
}

func vecNorm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// embedCharge is what the default price table charges an embedding of
// tokens input tokens at tier.
func embedCharge(tier llm.Tier, tokens int) string {
	return billing.DefaultPrices().CostMicros(llm.TypeEmbedding, tier, llm.Usage{InputTokens: tokens}).String()
}

func docTokens(texts ...string) int {
	n := 0
	for _, s := range texts {
		n += llm.TextTokens(s)
	}
	return n
}

func TestEmbeddingsSDK_OpenAI(t *testing.T) {
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	ctx := context.Background()

	t.Run("a batch of texts: one vector each, unit length, the model echoed, billed once", func(t *testing.T) {
		is := is.New(t)
		before := gw.credits(t)
		var hr *http.Response
		res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: openai.EmbeddingModelTextEmbedding3Small,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: embedDocs},
		}, option.WithResponseInto(&hr))
		is.NoErr(err)
		is.Equal(hr.Header.Get("X-SVC-Request-Type"), "embedding")
		is.Equal(string(res.Object), "list")
		is.Equal(res.Model, "text-embedding-3-small")
		is.Equal(len(res.Data), 3)
		for i, d := range res.Data {
			is.Equal(d.Index, int64(i))
			is.Equal(string(d.Object), "embedding")
			is.Equal(len(d.Embedding), 1536) // the OpenAI surface's default
			is.True(math.Abs(vecNorm(d.Embedding)-1) < 1e-5)
		}
		want := docTokens(embedDocs...)
		is.Equal(res.Usage.PromptTokens, int64(want))
		is.Equal(res.Usage.TotalTokens, int64(want))

		id := hr.Header.Get("X-SVC-Generation-Id")
		is.True(strings.HasPrefix(id, "emb-"))
		g := gw.generation(t, id)
		is.Equal(g.RequestType, "embedding")
		is.Equal(g.Streamed, false)
		var raw struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		gw.getJSON(t, "/svc/v1/generation?id="+id, &raw)
		is.Equal(string(raw.Data["finish_reason"]), "null") // an embedding has none
		is.Equal(g.Usage.PromptTokens, want)
		is.Equal(g.Usage.CompletionTokens, 0)
		is.Equal(g.TotalCost, embedCharge(llm.TierMedium, want))
		after := gw.credits(t)
		spent := decimalDiff(t, before.Balance, after.Balance)
		is.Equal(spent, g.TotalCost) // the balance paid exactly the record's cost
	})
	t.Run("dimensions, and the same text gives the same vector", func(t *testing.T) {
		is := is.New(t)
		a, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "any-model-id", Dimensions: openai.Int(256),
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(embedDocs[0])},
		})
		is.NoErr(err)
		b, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "another", Dimensions: openai.Int(256),
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{embedDocs[1], embedDocs[0]}},
		})
		is.NoErr(err)
		is.Equal(len(a.Data[0].Embedding), 256)
		is.Equal(a.Data[0].Embedding, b.Data[1].Embedding)
		is.True(!slicesEqual(b.Data[0].Embedding, b.Data[1].Embedding))
		is.Equal(a.Model, "any-model-id")
	})
	t.Run("base64: the little-endian float32s of the float reply", func(t *testing.T) {
		is := is.New(t)
		params := openai.EmbeddingNewParams{Model: "m", Dimensions: openai.Int(64),
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: embedDocs[:2]}}
		floats, err := client.Embeddings.New(ctx, params)
		is.NoErr(err)
		params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
		b64, err := client.Embeddings.New(ctx, params)
		is.NoErr(err)
		for i, d := range b64.Data {
			var s string
			is.NoErr(json.Unmarshal([]byte(d.JSON.Embedding.Raw()), &s)) // a string, as OpenAI sends it
			raw, err := base64.StdEncoding.DecodeString(s)
			is.NoErr(err)
			is.Equal(len(raw), 4*64)
			for j := range 64 {
				f := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
				is.Equal(f, float32(floats.Data[i].Embedding[j]))
			}
		}
	})
	t.Run("token ids, one token each", func(t *testing.T) {
		is := is.New(t)
		res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "m",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2, 3}, {4, 5}}}})
		is.NoErr(err)
		is.Equal(len(res.Data), 2)
		is.Equal(res.Usage.PromptTokens, int64(5))
	})
	t.Run("beyond OpenAI's bounds: a 400 naming input", func(t *testing.T) {
		is := is.New(t)
		many := make([]string, 2049)
		for i := range many {
			many[i] = "doc " + strconv.Itoa(i)
		}
		_, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "m",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: many}})
		var apiErr *openai.Error
		is.True(errors.As(err, &apiErr))
		is.Equal(apiErr.StatusCode, http.StatusBadRequest)
		is.Equal(apiErr.Param, "input")
		is.True(strings.Contains(apiErr.Message, "at most 2048"))

		long := strings.Repeat("word ", 9000)
		_, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "m",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(long)}})
		is.True(errors.As(err, &apiErr))
		is.Equal(apiErr.StatusCode, http.StatusBadRequest)
		is.True(strings.Contains(apiErr.Message, "at most 8192 tokens"))
	})
	t.Run("bad fields, in OpenAI's envelope", func(t *testing.T) {
		for _, tc := range []struct{ body, param string }{
			{`{"model":"m","input":"x","encoding_format":"int8"}`, "encoding_format"},
			{`{"model":"m","input":"x","dimensions":0}`, "dimensions"},
			{`{"model":"m","input":""}`, "input"},
			{`{"model":"m","input":[]}`, "input"},
			{`{"model":"m","input":{"text":"x"}}`, "input"},
			{`{"model":"m","input":[1,"a"]}`, "input"},
			{`{"input":"x"}`, "model"},
			{`{"model":"m"}`, "input"},
		} {
			t.Run(tc.body, func(t *testing.T) {
				is := is.New(t)
				resp, body := gw.do(t, http.MethodPost, "/svc/v1/embeddings", tc.body)
				is.Equal(resp.StatusCode, http.StatusBadRequest)
				var env struct {
					Error struct{ Type, Param, Message string } `json:"error"`
				}
				is.NoErr(json.Unmarshal(body, &env))
				is.Equal(env.Error.Type, "invalid_request_error")
				is.Equal(env.Error.Param, tc.param)
			})
		}
	})
	t.Run("the bare path too, and no backend in any byte", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, http.MethodPost, "/v1/embeddings", `{"model":"m","input":"hello"}`)
		is.Equal(resp.StatusCode, http.StatusOK)
		for k, v := range resp.Header {
			is.True(!strings.Contains(strings.ToLower(k+strings.Join(v, "")), "fixture"))
		}
		is.True(!strings.Contains(string(body), "fixture"))
	})
}

// decimalDiff is a − b, two amounts of the API, in its six places.
func decimalDiff(t *testing.T, a, b string) string {
	t.Helper()
	pa, err := strconv.ParseFloat(a, 64)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := strconv.ParseFloat(b, 64)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatFloat(pa-pb, 'f', 6, 64)
}

func slicesEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEmbeddingsSDK_Gemini(t *testing.T) {
	gw := newTestGateway(t)
	ctx := context.Background()
	client := genaiClient(t, gw.URL+"/svc/", gw.Key)

	t.Run("EmbedContent: a batch, outputDimensionality, the same vectors as on OpenAI's surface", func(t *testing.T) {
		is := is.New(t)
		contents := []*genai.Content{genai.NewContentFromText(embedDocs[0], genai.RoleUser), genai.NewContentFromText(embedDocs[2], genai.RoleUser)}
		dims := int32(32)
		res, err := client.Models.EmbedContent(ctx, "gemini-embedding-001", contents, &genai.EmbedContentConfig{
			TaskType: "RETRIEVAL_DOCUMENT", Title: "Notes", OutputDimensionality: &dims,
		})
		is.NoErr(err)
		is.Equal(len(res.Embeddings), 2)
		is.Equal(res.SDKHTTPResponse.Headers.Get("X-SVC-Request-Type"), "embedding")

		oc := oaiClient(gw, gw.Key)
		oa, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "m", Dimensions: openai.Int(32),
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{embedDocs[0], embedDocs[2]}}})
		is.NoErr(err)
		for i, e := range res.Embeddings {
			is.Equal(len(e.Values), 32)
			for j, v := range e.Values {
				is.Equal(v, float32(oa.Data[i].Embedding[j]))
			}
		}
		// The title counts with each input.
		id := res.SDKHTTPResponse.Headers.Get("X-SVC-Generation-Id")
		g := gw.generation(t, id)
		want := docTokens(embedDocs[0], embedDocs[2]) + 2*llm.TextTokens("Notes")
		is.Equal(g.Usage.PromptTokens, want)
		is.Equal(g.TotalCost, embedCharge(llm.TierMedium, want))
	})
	t.Run("embedContent: one vector of Gemini's default size", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, http.MethodPost, "/svc/v1beta/models/text-embedding-004:embedContent",
			`{"content":{"parts":[{"text":"hello"}]}}`, "Authorization", "", "x-goog-api-key", gw.Key)
		is.Equal(resp.StatusCode, http.StatusOK)
		var r struct {
			Embedding struct{ Values []float64 } `json:"embedding"`
		}
		is.NoErr(json.Unmarshal(body, &r))
		is.Equal(len(r.Embedding.Values), 768)
		is.True(math.Abs(vecNorm(r.Embedding.Values)-1) < 1e-5)
	})
	t.Run("beyond a batch of 100, and bad fields: Google's envelope", func(t *testing.T) {
		reqs := make([]string, 101)
		for i := range reqs {
			reqs[i] = `{"content":{"parts":[{"text":"d` + strconv.Itoa(i) + `"}]}}`
		}
		for _, tc := range []struct{ name, method, body, want string }{
			{"101 requests", "batchEmbedContents", `{"requests":[` + strings.Join(reqs, ",") + `]}`, "at most 100 requests"},
			{"no requests", "batchEmbedContents", `{"requests":[]}`, "at least one request"},
			{"mixed dimensions", "batchEmbedContents", `{"requests":[{"content":{"parts":[{"text":"a"}]},"outputDimensionality":8},{"content":{"parts":[{"text":"b"}]}}]}`, "the same taskType"},
			{"an image", "embedContent", `{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}}`, "only text parts"},
			{"no content", "embedContent", `{}`, "content"},
			{"unknown task", "embedContent", `{"content":{"parts":[{"text":"a"}]},"taskType":"GUESS"}`, "taskType"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				is := is.New(t)
				resp, body := gw.do(t, http.MethodPost, "/svc/v1beta/models/m:"+tc.method, tc.body, "Authorization", "", "x-goog-api-key", gw.Key)
				is.Equal(resp.StatusCode, http.StatusBadRequest)
				var env struct {
					Error struct {
						Code    int
						Status  string
						Message string
					} `json:"error"`
				}
				is.NoErr(json.Unmarshal(body, &env))
				is.Equal(env.Error.Status, "INVALID_ARGUMENT")
				is.True(strings.Contains(env.Error.Message, tc.want))
			})
		}
	})
}

// noEmbed is a backend that generates but cannot embed.
type noEmbed struct{ upstream.Backend }

// silentEmbedder embeds as the fixture does but reports no usage, as
// Gemini's embeddings endpoints do not.
type silentEmbedder struct{ *fixture.Backend }

func (s silentEmbedder) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.Embeddings, error) {
	e, err := s.Backend.Embed(ctx, req)
	if e != nil {
		e.Usage = llm.Usage{}
	}
	return e, err
}

func TestEmbeddings_Billing(t *testing.T) {
	t.Run("no credits: 402, and nothing recorded", func(t *testing.T) {
		is := is.New(t)
		gw := newTestGateway(t)
		broke, _ := gw.newKey(t, "broke", "")
		bc := oaiClient(gw, broke)
		_, err := bc.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "m",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
		var apiErr *openai.Error
		is.True(errors.As(err, &apiErr))
		is.Equal(apiErr.StatusCode, http.StatusPaymentRequired)
	})
	t.Run("tokens per minute count the input", func(t *testing.T) {
		is := is.New(t)
		gw := newTestGateway(t, func(o *Options) { o.TPM = 100 })
		client := oaiClient(gw, gw.Key)
		text := strings.Repeat("token ", 60)
		embed := func() error {
			_, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "m",
				Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}})
			return err
		}
		is.True(llm.TextTokens(text) > 50)
		is.NoErr(embed()) // the bucket held its input
		err := embed()    // and no longer does
		var apiErr *openai.Error
		is.True(errors.As(err, &apiErr))
		is.Equal(apiErr.StatusCode, http.StatusTooManyRequests)
	})
	t.Run("usage groups embeddings in their own bucket", func(t *testing.T) {
		is := is.New(t)
		gw := newTestGateway(t)
		client := oaiClient(gw, gw.Key)
		for range 2 {
			_, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "m",
				Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: embedDocs}})
			is.NoErr(err)
		}
		_, err := client.Chat.Completions.New(context.Background(), oaiParams("svc-fusion", "hi"))
		is.NoErr(err)
		u := gw.usage(t, "request_type")
		var emb *bucket
		for i := range u.Data {
			if u.Data[i].Bucket == "embedding" {
				emb = &u.Data[i]
			}
		}
		is.True(emb != nil)
		is.Equal(emb.Requests, int64(2)) // a batch is one call
		is.Equal(emb.InputTokens, int64(2*docTokens(embedDocs...)))
		is.Equal(emb.OutputTokens, int64(0))
	})
	t.Run("an upstream that reports no usage: charged svcgw's count, never free", func(t *testing.T) {
		is := is.New(t)
		gw := newTestGateway(t, func(o *Options) {
			o.Router = upstream.NewRouter([]upstream.Candidate{{Name: "silent", Backend: silentEmbedder{fixture.New(fixture.Options{})}}})
		})
		client := oaiClient(gw, gw.Key)
		var hr *http.Response
		res, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "m",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: embedDocs}}, option.WithResponseInto(&hr))
		is.NoErr(err)
		want := docTokens(embedDocs...)
		is.Equal(res.Usage.PromptTokens, int64(want)) // the caller's usage is what it was charged
		g := gw.generation(t, hr.Header.Get("X-SVC-Generation-Id"))
		is.Equal(g.Usage.PromptTokens, want)
		is.Equal(g.TotalCost, embedCharge(llm.TierMedium, want))
	})
	t.Run("a route with no upstream that embeds: 404 in the caller's envelope, nothing charged", func(t *testing.T) {
		is := is.New(t)
		gen := noEmbed{fixture.New(fixture.Options{})}
		gw := newTestGateway(t, func(o *Options) {
			o.Router = upstream.NewRouter([]upstream.Candidate{{Name: "gen", Backend: gen}})
		})
		before := gw.credits(t)
		resp, body := gw.do(t, http.MethodPost, "/svc/v1/embeddings", `{"model":"m","input":"x"}`)
		is.Equal(resp.StatusCode, http.StatusNotFound)
		is.True(strings.Contains(string(body), "embeddings are not served here"))
		is.Equal(gw.credits(t).Balance, before.Balance)
	})
}
