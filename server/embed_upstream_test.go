package server

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/embedrecorder"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/openai"
)

// End-to-end tests of embeddings through the gateway to a recording
// upstream of each protocol: OpenAI's /v1/embeddings (and every
// compatible server's) and Gemini's embedContent/batchEmbedContents. Each
// surface is routed to each protocol, so that a call in one vendor's
// shape is translated into the other's: the exact bytes sent upstream,
// the vectors returned (base64 when asked), the charge, and no backend in
// any byte the caller receives.

// The backend's names, none of which may reach a caller.
const (
	embedUpstreamName = "secret-embedder"
	embedOAModel      = "backend-embed-oa"
	embedGMModel      = "backend-embed-gm"
	embedUpstreamMark = embedrecorder.Marker
)

// upstreamVectors are the vectors the recording upstream answers, the
// i-th input getting the i-th (4 dimensions, exact in float32).
var upstreamVectors = [][]float32{{0.5, -0.5, 0.5, -0.5}, {1, 0, 0, 0}, {0, 0.6, 0.8, 0}}

// embedRecorder is the recording upstream of both protocols'
// embeddings endpoints (internal/embedrecorder) on a test server. The
// OpenAI one reports usage (promptTokens a call) and names embedOAModel;
// the Gemini API reports none. The i-th input gets upstreamVectors[i].
type embedRecorder struct {
	*httptest.Server
	*embedrecorder.Recorder
}

func newEmbedRecorder(t *testing.T, promptTokens int) *embedRecorder {
	rec := &embedrecorder.Recorder{PromptTokens: promptTokens, OpenAIModel: embedOAModel,
		Vector: func(i, _ int) []float32 { return upstreamVectors[i] }}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return &embedRecorder{srv, rec}
}

// embedGateway is a gateway whose one upstream is be, named
// embedUpstreamName.
func embedGateway(t *testing.T, be upstream.Backend) *testGateway {
	return newTestGateway(t, func(o *Options) {
		o.Router = upstream.NewRouter([]upstream.Candidate{{Name: embedUpstreamName + "/model", Backend: be,
			Upstream: embedUpstreamName, Model: "model"}})
	})
}

// assertNoBackend fails if any byte of the caller's reply (headers and
// body) names the backend: its upstream, model, address or markers.
func assertNoBackend(t *testing.T, rec *embedRecorder, resp *http.Response, body []byte) {
	t.Helper()
	var all strings.Builder
	for k, vs := range resp.Header {
		all.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
	}
	all.Write(body)
	s := strings.ToLower(all.String())
	for _, secret := range []string{embedUpstreamName, embedOAModel, embedGMModel, embedUpstreamMark, strings.TrimPrefix(rec.URL, "http://")} {
		if strings.Contains(s, strings.ToLower(secret)) {
			t.Errorf("the caller received %q:\n%s", secret, all.String())
		}
	}
}

func TestEmbeddingsUpstream_EachSurfaceToEachProtocol(t *testing.T) {
	docs := []string{"The cat sat on the mat.", "Quarterly revenue grew four percent."}
	const reported = 17 // the OpenAI upstream's usage.prompt_tokens
	gemKey := []string{"Authorization", "", "x-goog-api-key"}
	for _, tc := range []struct {
		name    string
		backend func(url string) upstream.Backend
		path    string // the caller's
		body    string // the caller's
		auth    bool   // x-goog-api-key instead of a Bearer token
		// ignoreFormat has the OpenAI upstream answer floats whatever
		// encoding_format asks.
		ignoreFormat bool
		// What the upstream must receive: one request, exactly.
		upPath, upBody, upAuth, upAuthValue string
		base64                              bool
		vectors                             int
		tokens                              int // charged
	}{
		{
			name: "OpenAI surface to an OpenAI-compatible upstream, base64",
			backend: func(url string) upstream.Backend {
				return openai.New(upstream.HTTPOptions{BaseURL: url + "/v1", APIKey: "sk-up", Model: embedOAModel})
			},
			path:   "/svc/v1/embeddings",
			body:   `{"model":"text-embedding-3-small","input":["The cat sat on the mat.","Quarterly revenue grew four percent."],"dimensions":4,"encoding_format":"base64","user":"u-42"}`,
			upPath: "/v1/embeddings",
			upBody: `{"model":"backend-embed-oa","input":["The cat sat on the mat.","Quarterly revenue grew four percent."],"dimensions":4,"encoding_format":"base64","user":"u-42"}`,
			upAuth: "Authorization", upAuthValue: "Bearer sk-up",
			base64: true, vectors: 2, tokens: reported,
		},
		{
			name: "OpenAI surface to an OpenAI-compatible upstream that ignores encoding_format: floats, encoded as base64 by svcgw",
			backend: func(url string) upstream.Backend {
				return openai.New(upstream.HTTPOptions{BaseURL: url + "/v1", APIKey: "sk-up", Model: embedOAModel})
			},
			ignoreFormat: true,
			path:         "/svc/v1/embeddings",
			body:         `{"model":"text-embedding-3-small","input":["The cat sat on the mat.","Quarterly revenue grew four percent."],"dimensions":4,"encoding_format":"base64"}`,
			upPath:       "/v1/embeddings",
			upBody:       `{"model":"backend-embed-oa","input":["The cat sat on the mat.","Quarterly revenue grew four percent."],"dimensions":4,"encoding_format":"base64"}`,
			upAuth:       "Authorization", upAuthValue: "Bearer sk-up",
			base64: true, vectors: 2, tokens: reported,
		},
		{
			name: "OpenAI surface to an OpenAI-compatible upstream, floats",
			backend: func(url string) upstream.Backend {
				return openai.New(upstream.HTTPOptions{BaseURL: url + "/v1", APIKey: "sk-up", Model: embedOAModel})
			},
			path:   "/svc/v1/embeddings",
			body:   `{"model":"text-embedding-3-small","input":["The cat sat on the mat.","Quarterly revenue grew four percent."],"dimensions":4,"encoding_format":"float"}`,
			upPath: "/v1/embeddings",
			upBody: `{"model":"backend-embed-oa","input":["The cat sat on the mat.","Quarterly revenue grew four percent."],"dimensions":4,"encoding_format":"float"}`,
			upAuth: "Authorization", upAuthValue: "Bearer sk-up",
			vectors: 2, tokens: reported,
		},
		{
			name: "OpenAI surface to a Gemini upstream: batchEmbedContents, dimensions as outputDimensionality",
			backend: func(url string) upstream.Backend {
				return gemini.New(upstream.HTTPOptions{BaseURL: url, APIKey: "gm-up", Model: embedGMModel})
			},
			path:   "/svc/v1/embeddings",
			body:   `{"model":"text-embedding-3-small","input":["The cat sat on the mat.","Quarterly revenue grew four percent."],"dimensions":4}`,
			upPath: "/v1beta/models/backend-embed-gm:batchEmbedContents",
			upBody: `{"requests":[{"model":"models/backend-embed-gm","content":{"role":"user","parts":[{"text":"The cat sat on the mat."}]},"outputDimensionality":4},` +
				`{"model":"models/backend-embed-gm","content":{"role":"user","parts":[{"text":"Quarterly revenue grew four percent."}]},"outputDimensionality":4}]}`,
			upAuth: "X-Goog-Api-Key", upAuthValue: "gm-up",
			vectors: 2, tokens: docTokens(docs...), // Gemini reports no usage: svcgw's count
		},
		{
			name: "OpenAI surface to a Gemini upstream, one input, base64 encoded by svcgw",
			backend: func(url string) upstream.Backend {
				return gemini.New(upstream.HTTPOptions{BaseURL: url, APIKey: "gm-up", Model: embedGMModel})
			},
			path:   "/svc/v1/embeddings",
			body:   `{"model":"m","input":"The cat sat on the mat.","dimensions":4,"encoding_format":"base64"}`,
			upPath: "/v1beta/models/backend-embed-gm:embedContent",
			upBody: `{"model":"models/backend-embed-gm","content":{"role":"user","parts":[{"text":"The cat sat on the mat."}]},"outputDimensionality":4}`,
			upAuth: "X-Goog-Api-Key", upAuthValue: "gm-up",
			base64: true, vectors: 1, tokens: docTokens(docs[0]),
		},
		{
			name: "Gemini surface to a Gemini upstream: taskType and title passed on",
			backend: func(url string) upstream.Backend {
				return gemini.New(upstream.HTTPOptions{BaseURL: url, APIKey: "gm-up", Model: embedGMModel})
			},
			path: "/svc/v1beta/models/gemini-embedding-001:batchEmbedContents",
			body: `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"The cat sat on the mat."}]},"taskType":"RETRIEVAL_DOCUMENT","title":"Notes","outputDimensionality":4},` +
				`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"Quarterly revenue grew four percent."}]},"taskType":"RETRIEVAL_DOCUMENT","title":"Notes","outputDimensionality":4}]}`,
			auth:   true,
			upPath: "/v1beta/models/backend-embed-gm:batchEmbedContents",
			upBody: `{"requests":[{"model":"models/backend-embed-gm","content":{"role":"user","parts":[{"text":"The cat sat on the mat."}]},"taskType":"RETRIEVAL_DOCUMENT","title":"Notes","outputDimensionality":4},` +
				`{"model":"models/backend-embed-gm","content":{"role":"user","parts":[{"text":"Quarterly revenue grew four percent."}]},"taskType":"RETRIEVAL_DOCUMENT","title":"Notes","outputDimensionality":4}]}`,
			upAuth: "X-Goog-Api-Key", upAuthValue: "gm-up",
			vectors: 2, tokens: docTokens(docs...) + 2*llm.TextTokens("Notes"),
		},
		{
			name: "Gemini surface to an OpenAI-compatible upstream: a batch of texts, outputDimensionality as dimensions",
			backend: func(url string) upstream.Backend {
				return openai.New(upstream.HTTPOptions{BaseURL: url + "/v1", APIKey: "sk-up", Model: embedOAModel})
			},
			path: "/svc/v1beta/models/gemini-embedding-001:batchEmbedContents",
			body: `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"The cat sat on the mat."}]},"outputDimensionality":4},` +
				`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"Quarterly revenue grew four percent."}]},"outputDimensionality":4}]}`,
			auth:   true,
			upPath: "/v1/embeddings",
			upBody: `{"model":"backend-embed-oa","input":["The cat sat on the mat.","Quarterly revenue grew four percent."],"dimensions":4,"encoding_format":"float"}`,
			upAuth: "Authorization", upAuthValue: "Bearer sk-up",
			vectors: 2, tokens: reported,
		},
		{
			name: "Gemini surface's embedContent to an OpenAI-compatible upstream",
			backend: func(url string) upstream.Backend {
				return openai.New(upstream.HTTPOptions{BaseURL: url + "/v1", APIKey: "sk-up", Model: embedOAModel})
			},
			path:   "/v1beta/models/text-embedding-004:embedContent",
			body:   `{"content":{"parts":[{"text":"The cat sat on the mat."}]},"outputDimensionality":4}`,
			auth:   true,
			upPath: "/v1/embeddings",
			upBody: `{"model":"backend-embed-oa","input":["The cat sat on the mat."],"dimensions":4,"encoding_format":"float"}`,
			upAuth: "Authorization", upAuthValue: "Bearer sk-up",
			vectors: 1, tokens: reported,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			rec := newEmbedRecorder(t, reported)
			rec.IgnoreFormat = tc.ignoreFormat
			gw := embedGateway(t, tc.backend(rec.URL))
			before := gw.credits(t)
			var hdr []string
			if tc.auth {
				hdr = append(gemKey, gw.Key)
			}
			resp, body := gw.do(t, http.MethodPost, tc.path, tc.body, hdr...)
			is.Equal(resp.StatusCode, http.StatusOK)
			is.Equal(resp.Header.Get("X-SVC-Request-Type"), "embedding")

			// Exactly one request upstream, in the upstream's protocol.
			reqs := rec.Take()
			is.Equal(len(reqs), 1)
			up := reqs[0]
			is.Equal(up.Method, http.MethodPost)
			is.Equal(up.Path, tc.upPath)
			is.Equal(up.Body, tc.upBody)
			is.Equal(up.Header.Get(tc.upAuth), tc.upAuthValue)
			is.True(!strings.Contains(up.Body+strings.Join(up.Header.Values("Authorization"), "")+up.Header.Get("X-Goog-Api-Key"), gw.Key)) // the caller's key stays here

			// The vectors, in the caller's shape.
			var got [][]float32
			if strings.HasSuffix(tc.path, "/embeddings") {
				var r struct {
					Object string
					Model  string
					Data   []struct {
						Object    string
						Index     int
						Embedding json.RawMessage
					}
					Usage struct {
						PromptTokens int `json:"prompt_tokens"`
						TotalTokens  int `json:"total_tokens"`
					}
				}
				is.NoErr(json.Unmarshal(body, &r))
				is.Equal(r.Object, "list")
				var want map[string]any
				is.NoErr(json.Unmarshal([]byte(tc.body), &want))
				is.Equal(r.Model, want["model"]) // the caller's id, echoed
				is.Equal(r.Usage.PromptTokens, tc.tokens)
				is.Equal(r.Usage.TotalTokens, tc.tokens)
				for i, d := range r.Data {
					is.Equal(d.Index, i)
					is.Equal(d.Object, "embedding")
					var v []float32
					if tc.base64 {
						var s string
						is.NoErr(json.Unmarshal(d.Embedding, &s)) // a string
						raw, err := base64.StdEncoding.DecodeString(s)
						is.NoErr(err)
						is.Equal(len(raw), 16)
						for j := 0; j < len(raw); j += 4 {
							v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
						}
					} else {
						is.NoErr(json.Unmarshal(d.Embedding, &v))
					}
					got = append(got, v)
				}
			} else {
				var r struct {
					Embedding  *struct{ Values []float32 }
					Embeddings []struct{ Values []float32 }
				}
				is.NoErr(json.Unmarshal(body, &r))
				if r.Embedding != nil {
					got = append(got, r.Embedding.Values)
				}
				for _, e := range r.Embeddings {
					got = append(got, e.Values)
				}
			}
			is.Equal(got, upstreamVectors[:tc.vectors]) // as the upstream sent them

			// The charge: the upstream's count when it reports one, else svcgw's.
			id := resp.Header.Get("X-SVC-Generation-Id")
			is.True(id != "")
			g := gw.generation(t, id)
			is.Equal(g.RequestType, "embedding")
			is.Equal(g.Streamed, false)
			is.Equal(g.Usage.PromptTokens, tc.tokens)
			is.Equal(g.Usage.CompletionTokens, 0)
			is.Equal(g.TotalCost, embedCharge(llm.TierMedium, tc.tokens))
			is.Equal(decimalDiff(t, before.Balance, gw.credits(t).Balance), g.TotalCost)

			assertNoBackend(t, rec, resp, body)
			genResp, genBody := gw.do(t, http.MethodGet, "/svc/v1/generation?id="+id, "")
			assertNoBackend(t, rec, genResp, genBody) // nor does the record the caller can read
		})
	}
}

// TestEmbeddingsUpstream_PassThroughChecks sends the caller's form to an
// OpenAI-protocol upstream whose reply, in that form, is passed through
// unparsed: each reply the checks must refuse fails the attempt as an
// upstream error, and the call goes to the next candidate (or, with none,
// answers 502), never reaching the caller.
func TestEmbeddingsUpstream_PassThroughChecks(t *testing.T) {
	const input = `["The cat sat on the mat.","Quarterly revenue grew four percent."]`
	item := func(i int, emb string) string {
		return `{"object":"embedding","index":` + strconv.Itoa(i) + `,"embedding":` + emb + `}`
	}
	reply := func(items ...string) string {
		return `{"object":"list","data":[` + strings.Join(items, ",") + `],"model":"m","usage":{"prompt_tokens":5,"total_tokens":5}}`
	}
	b64 := func(v ...float32) string { return `"` + embedrecorder.Base64(v) + `"` }
	for _, tc := range []struct {
		name, format, body string
	}{
		{"a malformed number", "float", reply(item(0, `[0.5,-0.5,0.5,-.5]`), item(1, `[1,0,0,0]`))},
		{"a number with a leading zero", "float", reply(item(0, `[0.5,-0.5,0.5,-05]`), item(1, `[1,0,0,0]`))},
		{"a trailing comma", "float", reply(item(0, `[0.5,-0.5,0.5,-0.5,]`), item(1, `[1,0,0,0]`))},
		{"too few numbers", "float", reply(item(0, `[0.5,-0.5,0.5]`), item(1, `[1,0,0]`))},
		{"numbers of unequal counts", "float", reply(item(0, `[0.5,-0.5,0.5,-0.5]`), item(1, `[1,0,0]`))},
		{"an exponent overflowing float32", "float", reply(item(0, `[0.5,-0.5,0.5,-0.5e999]`), item(1, `[1,0,0,0]`))},
		{"too many digits for a float32", "float", reply(item(0, `[0.5,-0.5,0.5,`+strings.Repeat("9", 40)+`]`), item(1, `[1,0,0,0]`))},
		{"NaN", "float", reply(item(0, `[0.5,-0.5,0.5,NaN]`), item(1, `[1,0,0,0]`))},
		{"one vector for two inputs", "float", reply(item(0, `[0.5,-0.5,0.5,-0.5]`))},
		{"a repeated index", "float", reply(item(0, `[0.5,-0.5,0.5,-0.5]`), item(0, `[1,0,0,0]`))},
		{"a base64 alphabet it is not", "base64", reply(item(0, `"AAAAPwAAAL8AAAA/AAAAvw-_"`), item(1, b64(1, 0, 0, 0)))},
		{"base64 of the wrong length", "base64", reply(item(0, b64(0.5, -0.5, 0.5)), item(1, b64(1, 0, 0)))},
		{"base64 of unequal lengths", "base64", reply(item(0, b64(0.5, -0.5, 0.5, -0.5)), item(1, b64(1, 0, 0)))},
		{"base64 cut short", "base64", reply(item(0, `"AAAAPwAAAL8AAAA/AAAAv"`), item(1, b64(1, 0, 0, 0)))},
		{"base64 of an infinity", "base64", reply(item(0, b64(0.5, -0.5, 0.5, float32(math.Inf(1)))), item(1, b64(1, 0, 0, 0)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			var bad sync.Mutex
			badCalls := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				bad.Lock()
				badCalls++
				bad.Unlock()
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			body := `{"model":"m","input":` + input + `,"dimensions":4,"encoding_format":"` + tc.format + `"}`

			// Alone, the upstream's reply fails the call: 502.
			badBE := openai.New(upstream.HTTPOptions{BaseURL: srv.URL + "/v1", APIKey: "k", Model: embedOAModel})
			gw := embedGateway(t, badBE)
			resp, rb := gw.do(t, http.MethodPost, "/svc/v1/embeddings", body)
			is.Equal(resp.StatusCode, http.StatusBadGateway)
			is.True(!strings.Contains(string(rb), "0.5"))
			is.True(badCalls >= 1)

			// Before a sound upstream, the call falls back to it.
			rec := newEmbedRecorder(t, 5)
			good := openai.New(upstream.HTTPOptions{BaseURL: rec.URL + "/v1", APIKey: "k", Model: embedOAModel})
			gw = newTestGateway(t, func(o *Options) {
				o.Router = upstream.NewRouter([]upstream.Candidate{
					{Name: "bad/model", Backend: badBE, Upstream: "bad", Model: "model"},
					{Name: "good/model", Backend: good, Upstream: "good", Model: "model"},
				})
			})
			before := badCalls
			resp, rb = gw.do(t, http.MethodPost, "/svc/v1/embeddings", body)
			is.Equal(resp.StatusCode, http.StatusOK)
			is.True(badCalls > before) // the first candidate was tried
			var r struct {
				Data []struct{ Embedding json.RawMessage }
			}
			is.NoErr(json.Unmarshal(rb, &r))
			is.Equal(len(r.Data), 2)
			want := string(mustJSON(upstreamVectors[0]))
			if tc.format == "base64" {
				want = `"` + embedrecorder.Base64(upstreamVectors[0]) + `"`
			}
			is.Equal(string(r.Data[0].Embedding), want) // the sound upstream's vector, as it sent it
		})
	}
}
