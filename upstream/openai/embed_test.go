package openai_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
	"github.com/svcgw/svcgw/upstream/openai"
)

func TestOpenAI_Embed(t *testing.T) {
	t.Run("a batch of texts, the reply out of order", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "embed.json")
		req := protocoltest.EmbedRequest()
		req.User, req.TaskType, req.Title = "user-42", "RETRIEVAL_DOCUMENT", "ignored here"
		e, err := openai.New(protocoltest.Options(f, "/v1")).Embed(protocoltest.Context(t), req)
		is.NoErr(err)                                              // embed
		is.Equal(e.Vectors, [][]float32{{1, 0, 0}, {0.6, 0.8, 0}}) // by index, not list order
		is.Equal(e.Usage, llm.Usage{InputTokens: 12})
		protocoltest.NoLeak(t, "embeddings", e)
		protocoltest.GoldenRequest(t, f, "embed") // POST /v1/embeddings, floats asked for
	})

	t.Run("token ids with dimensions", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.6,0.8]},{"object":"embedding","index":1,"embedding":[0,1]}],"usage":{"prompt_tokens":5,"total_tokens":5}}`)
		})
		req := &llm.EmbedRequest{Inputs: []llm.EmbedInput{{Tokens: []int{15339, 1917}}, {Tokens: []int{0, 1, 100257}}}, Dimensions: 2}
		e, err := openai.New(protocoltest.Options(f, "/v1")).Embed(protocoltest.Context(t), req)
		is.NoErr(err) // embed
		is.Equal(len(e.Vectors), 2)
		is.Equal(e.Usage.InputTokens, 5)
		protocoltest.GoldenRequest(t, f, "embed_tokens")
	})

	t.Run("a base64 reply to a request for floats", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "embed_base64.json")
		e, err := openai.New(protocoltest.Options(f, "/v1")).Embed(protocoltest.Context(t), protocoltest.EmbedRequest())
		is.NoErr(err) // embed
		is.Equal(e.Vectors, [][]float32{{0.25, -0.5, 1}, {0, 1, 0}})
		is.Equal(e.Usage.InputTokens, 9)
	})

	t.Run("a server that reports no usage", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "embed_no_usage.json")
		e, err := openai.New(protocoltest.Options(f, "/v1")).Embed(protocoltest.Context(t), protocoltest.EmbedRequest())
		is.NoErr(err) // embed
		is.Equal(e.Vectors, [][]float32{{0.1, 0.2}, {0.3, 0.4}})
		is.Equal(e.Usage, llm.Usage{}) // the server charges its own count
	})

	t.Run("a server that sends no index is read in list order", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"data":[{"embedding":[1,0]},{"embedding":[0,1]}]}`)
		})
		e, err := openai.New(protocoltest.Options(f, "/v1")).Embed(protocoltest.Context(t), protocoltest.EmbedRequest())
		is.NoErr(err) // embed
		is.Equal(e.Vectors, [][]float32{{1, 0}, {0, 1}})
	})

	t.Run("dimensions the upstream ignored: cut and re-normalised", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"data":[{"index":0,"embedding":[3,4,12]},{"index":1,"embedding":[0,0.5,0.5]}]}`)
		})
		req := protocoltest.EmbedRequest()
		req.Dimensions = 2
		e, err := openai.New(protocoltest.Options(f, "/v1")).Embed(protocoltest.Context(t), req)
		is.NoErr(err) // embed
		is.Equal(e.Vectors, [][]float32{{0.6, 0.8}, {0, 1}})
		var body struct {
			Dimensions int `json:"dimensions"`
		}
		is.NoErr(json.Unmarshal(f.Last(t).Body, &body))
		is.Equal(body.Dimensions, 2) // asked for upstream all the same
	})

	// Replies that do not fit the call are upstream errors, in caller-safe
	// words.
	for _, tc := range []struct {
		name, reply, message string
		dims                 int
	}{
		{"fewer vectors than inputs", `{"data":[{"index":0,"embedding":[1,0]}]}`, "the upstream model returned a vector count that does not match the inputs", 0},
		{"more vectors than inputs", `{"data":[{"index":0,"embedding":[1]},{"index":1,"embedding":[1]},{"index":2,"embedding":[1]}]}`, "the upstream model returned a vector count that does not match the inputs", 0},
		{"a repeated index", `{"data":[{"index":0,"embedding":[1,0]},{"index":0,"embedding":[0,1]}]}`, "the upstream model sent a malformed reply", 0},
		{"an index out of range", `{"data":[{"index":0,"embedding":[1,0]},{"index":7,"embedding":[0,1]}]}`, "the upstream model sent a malformed reply", 0},
		{"vectors of different lengths", `{"data":[{"index":0,"embedding":[1,0]},{"index":1,"embedding":[1]}]}`, "the upstream model sent a malformed reply", 0},
		{"an empty vector", `{"data":[{"index":0,"embedding":[]},{"index":1,"embedding":[]}]}`, "the upstream model sent a malformed reply", 0},
		{"bad base64", `{"data":[{"index":0,"embedding":"@@canary"},{"index":1,"embedding":"AAAAAA=="}]}`, "the upstream model sent a malformed reply", 0},
		{"shorter than the dimensions asked", `{"data":[{"index":0,"embedding":[1,0]},{"index":1,"embedding":[0,1]}]}`, "the upstream model returned vectors shorter than the dimensions asked", 3},
		{"an error body with status 200", `{"error":{"message":"canary is busy","type":"server_error","code":"rate_limit_exceeded"}}`, "the upstream model is rate limited; retry later", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, tc.reply) })
			req := protocoltest.EmbedRequest()
			req.Dimensions = tc.dims
			_, err := openai.New(protocoltest.Options(f, "/v1")).Embed(protocoltest.Context(t), req)
			le := protocoltest.LLMError(t, err)
			is.Equal(le.Message, tc.message)
			protocoltest.NoLeak(t, "error", le)
		})
	}

	t.Run("text and token ids in one call are refused before any request", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {})
		req := &llm.EmbedRequest{Inputs: []llm.EmbedInput{{Text: "hi"}, {Tokens: []int{1}}}}
		_, err := openai.New(protocoltest.Options(f, "/v1")).Embed(protocoltest.Context(t), req)
		is.Equal(protocoltest.LLMError(t, err).Kind, llm.KindInvalidRequest)
		is.Equal(len(f.Requests()), 0)
	})

	t.Run("a call beyond one request's inputs goes as several, in order", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.NewFake(t, echoIndexes)
		texts := make([]string, 1100)
		for i := range texts {
			texts[i] = strconv.Itoa(i)
		}
		e, err := openai.New(protocoltest.Options(f, "/v1")).Embed(protocoltest.Context(t), protocoltest.EmbedRequest(texts...))
		is.NoErr(err) // embed
		is.Equal(len(e.Vectors), len(texts))
		for i, v := range e.Vectors {
			if v[0] != float32(i) {
				t.Fatalf("vector %d is the embedding of input %v", i, v[0])
			}
		}
		is.Equal(e.Usage.InputTokens, len(texts)) // each request's usage added up
		var sizes []int
		for _, r := range f.Requests() {
			var body struct{ Input []string }
			is.NoErr(json.Unmarshal(r.Body, &body))
			sizes = append(sizes, len(body.Input))
		}
		is.Equal(len(sizes), 3) // 512 + 512 + 76
		is.Equal(sizes[0]+sizes[1]+sizes[2], len(texts))
	})

	t.Run("a server's smaller batch limit (HTTPOptions.EmbedBatch)", func(t *testing.T) {
		is := is.New(t)
		// Hugging Face TEI refuses a request of more inputs than its
		// max_client_batch_size (32 by default) with a 422.
		f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			var body struct{ Input []string }
			if json.NewDecoder(r.Body).Decode(&body) != nil || len(body.Input) > 32 {
				w.WriteHeader(http.StatusUnprocessableEntity)
				fmt.Fprint(w, `{"error":"batch size 100 > maximum allowed batch size 32","error_type":"Validation"}`)
				return
			}
			echoInputs(w, body.Input)
		})
		texts := make([]string, 100)
		for i := range texts {
			texts[i] = strconv.Itoa(i)
		}
		o := protocoltest.Options(f, "/v1")
		_, err := openai.New(o).Embed(protocoltest.Context(t), protocoltest.EmbedRequest(texts...))
		is.Equal(protocoltest.LLMError(t, err).Kind, llm.KindInvalidRequest) // one request of 100: refused
		o.EmbedBatch = 32
		e, err := openai.New(o).Embed(protocoltest.Context(t), protocoltest.EmbedRequest(texts...))
		is.NoErr(err) // four requests: 32, 32, 32, 4
		for i, v := range e.Vectors {
			is.Equal(v[0], float32(i))
		}
		is.Equal(len(f.Requests()), 1+4)
	})

	t.Run("a batch limit above the protocol's: the protocol's holds", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.NewFake(t, echoIndexes)
		o := protocoltest.Options(f, "/v1")
		o.EmbedBatch = 5000
		texts := make([]string, 600)
		for i := range texts {
			texts[i] = strconv.Itoa(i)
		}
		_, err := openai.New(o).Embed(protocoltest.Context(t), protocoltest.EmbedRequest(texts...))
		is.NoErr(err)
		var sizes []int
		for _, r := range f.Requests() {
			var body struct{ Input []string }
			is.NoErr(json.Unmarshal(r.Body, &body))
			sizes = append(sizes, len(body.Input))
		}
		slices.Sort(sizes)
		is.Equal(sizes, []int{88, 512})
	})

	t.Run("one failed request fails the call", func(t *testing.T) {
		is := is.New(t)
		var n atomic.Int32
		f := protocoltest.NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 2 {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"error":{"message":"canary overloaded"}}`)
				return
			}
			echoIndexes(w, r)
		})
		texts := make([]string, 1100)
		for i := range texts {
			texts[i] = strconv.Itoa(i)
		}
		_, err := openai.New(protocoltest.Options(f, "/v1")).Embed(protocoltest.Context(t), protocoltest.EmbedRequest(texts...))
		is.Equal(protocoltest.LLMError(t, err).Kind, llm.KindOverloaded)
	})
}

// echoIndexes answers an embeddings request whose inputs are numbers with
// one vector per input holding that number (and its unit partner), in
// reverse order, one token per input.
func echoIndexes(w http.ResponseWriter, r *http.Request) {
	var body struct{ Input []string }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	echoInputs(w, body.Input)
}

// echoInputs is echoIndexes' reply to the inputs in.
func echoInputs(w http.ResponseWriter, in []string) {
	type item struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	var resp struct {
		Data  []item         `json:"data"`
		Usage map[string]int `json:"usage"`
	}
	for i := len(in) - 1; i >= 0; i-- {
		n, _ := strconv.Atoi(in[i])
		resp.Data = append(resp.Data, item{Index: i, Embedding: []float64{float64(n), math.Sqrt(float64(n) + 1)}})
	}
	resp.Usage = map[string]int{"prompt_tokens": len(in), "total_tokens": len(in)}
	json.NewEncoder(w).Encode(resp)
}
