package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"google.golang.org/genai"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// End-to-end tests of the generate-content surface: Google's official Go
// SDK (google.golang.org/genai) against the real handler and the fixture
// backend, as a user configures it — the gateway's base URL (with /svc/)
// and an llm_live_ key.

// genaiClient returns the SDK pointed at base (the SDK appends
// v1beta/models/…), authenticating with key (sent as x-goog-api-key).
func genaiClient(t *testing.T, base, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: base},
	})
	if err != nil {
		t.Fatalf("genai client: %v", err)
	}
	return c
}

// genaiRequestType is the X-SVC-Request-Type header of a reply, which the
// SDK keeps in SDKHTTPResponse.
func genaiRequestType(r *genai.GenerateContentResponse) string {
	if r == nil || r.SDKHTTPResponse == nil {
		return ""
	}
	return r.SDKHTTPResponse.Headers.Get("X-SVC-Request-Type")
}

func genaiUserText(s string) []*genai.Content {
	return []*genai.Content{genai.NewContentFromText(s, genai.RoleUser)}
}

// A 1×1 PNG and a minimal PDF.
var (
	genaiPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\xdac\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x02\x01\xa1\xe3\xa2\xc7\x00\x00\x00\x00IEND\xaeB`\x82")
	genaiPDF = []byte("%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Count 0/Kids[]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")
)

func TestGenContentSDK_GenerateContent(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	ctx := context.Background()
	client := genaiClient(t, gw.URL+"/svc/", gw.Key)

	resp, err := client.Models.GenerateContent(ctx, "gemini-2.5-flash", genaiUserText("Say hello."), nil)
	is.NoErr(err) // generateContent
	is.Equal(resp.Text(), `Fixture reply to: "Say hello.". This reply is deterministic: the same request always gets the same answer.`)
	is.Equal(resp.ModelVersion, "gemini-2.5-flash") // the caller's id, echoed
	is.True(strings.HasPrefix(resp.ResponseID, "gw"))
	is.Equal(resp.Candidates[0].FinishReason, genai.FinishReasonStop)
	is.Equal(resp.Candidates[0].Content.Role, genai.RoleModel)
	u := resp.UsageMetadata
	is.True(u.PromptTokenCount > 0)
	is.True(u.CandidatesTokenCount > 0)
	is.Equal(u.TotalTokenCount, u.PromptTokenCount+u.CandidatesTokenCount)
	is.Equal(genaiRequestType(resp), "flash") // a flash-named id leans flash

	// The responseId is the id of the generation record and of feedback.
	is.NoErr(gw.Store.Sync(ctx))
	g := gw.generation(t, resp.ResponseID)
	is.Equal(g.ID, resp.ResponseID)
	is.Equal(g.RequestType, "flash")
	is.True(!g.Streamed)
	is.Equal(g.Usage.PromptTokens, int(u.PromptTokenCount))
	is.Equal(g.Usage.CompletionTokens, int(u.CandidatesTokenCount))
	is.Equal(gw.feedback(t, resp.ResponseID, "up"), http.StatusOK)
}

func TestGenContentSDK_GenerateContentStream(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	ctx := context.Background()
	client := genaiClient(t, gw.URL+"/svc/", gw.Key)

	var text strings.Builder
	var chunks []*genai.GenerateContentResponse
	for chunk, err := range client.Models.GenerateContentStream(ctx, "gemini-2.5-pro", genaiUserText("Tell me a story."), nil) {
		is.NoErr(err) // stream chunk
		chunks = append(chunks, chunk)
		text.WriteString(chunk.Text())
	}
	is.True(len(chunks) >= 2) // text arrives in several chunks
	is.Equal(text.String(), `Fixture reply to: "Tell me a story.". This reply is deterministic: the same request always gets the same answer.`)
	id := chunks[0].ResponseID
	is.True(strings.HasPrefix(id, "gw"))
	for i, c := range chunks {
		is.Equal(c.ResponseID, id)                 // every chunk carries the responseId
		is.Equal(c.ModelVersion, "gemini-2.5-pro") // and the caller's model id
		last := i == len(chunks)-1
		is.Equal(c.Candidates[0].FinishReason != "", last) // finishReason only on the last chunk
		is.Equal(c.UsageMetadata != nil, last)             // usage on the last chunk
	}
	last := chunks[len(chunks)-1]
	is.Equal(last.Candidates[0].FinishReason, genai.FinishReasonStop)
	is.True(last.UsageMetadata.PromptTokenCount > 0)
	is.Equal(genaiRequestType(last), "pro") // any other id leans pro

	is.NoErr(gw.Store.Sync(ctx))
	g := gw.generation(t, id)
	is.True(g.Streamed)
	is.Equal(g.RequestType, "pro")
	is.Equal(g.FinishReason, "stop")
	is.Equal(gw.feedback(t, id, "down"), http.StatusOK)
}

var genaiWeatherTool = &genai.Tool{FunctionDeclarations: []*genai.FunctionDeclaration{{
	Name:        "get_weather",
	Description: "Current weather for a city.",
	ParametersJsonSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required":   []string{"city"},
	},
}}}

// TestGenContentSDK_FunctionCalling runs the loop the way SDK users do,
// through a Chat: the model calls the function, the caller answers with a
// functionResponse built from the name alone, the model replies in text.
// Thinking is on, so thought signatures make the round trip too, and the
// chat helper must keep every turn in its history.
func TestGenContentSDK_FunctionCalling(t *testing.T) {
	ctx := context.Background()
	config := &genai.GenerateContentConfig{
		Tools:          []*genai.Tool{genaiWeatherTool},
		ThinkingConfig: &genai.ThinkingConfig{IncludeThoughts: true, ThinkingBudget: genai.Ptr[int32](1024)},
	}

	t.Run("generateContent", func(t *testing.T) {
		is := is.New(t)
		rec := &gcRecorder{Backend: fixture.New(fixture.Options{})}
		gw := newTestGateway(t, gcWithBackend(rec))
		client := genaiClient(t, gw.URL+"/svc/", gw.Key)
		chat, err := client.Chats.Create(ctx, "gemini-2.5-flash", config, nil)
		is.NoErr(err)

		resp, err := chat.SendMessage(ctx, genai.Part{Text: "What is the weather in Paris?"})
		is.NoErr(err) // first turn
		is.Equal(genaiRequestType(resp), "code")
		calls := resp.FunctionCalls()
		is.Equal(len(calls), 1)
		is.Equal(calls[0].Name, "get_weather")
		is.Equal(calls[0].Args["city"], "example") // the fixture's value for a string
		is.True(calls[0].ID != "")
		is.Equal(resp.Candidates[0].FinishReason, genai.FinishReasonStop) // no tool finish reason on this wire
		parts := resp.Candidates[0].Content.Parts
		is.True(parts[0].Thought && parts[0].Text != "") // thoughts shown, as asked
		is.True(len(parts[0].ThoughtSignature) > 0)      // and signed
		is.True(resp.UsageMetadata.ThoughtsTokenCount > 0)
		is.Equal(len(chat.History(true)), 2) // the turn was valid for the chat helper

		resp, err = chat.SendMessage(ctx, *genai.NewPartFromFunctionResponse("get_weather", map[string]any{"temp_c": 18, "sky": "clear"}))
		is.NoErr(err) // second turn
		is.Equal(resp.Text(), `Fixture received the result of get_weather: "{"sky":"clear","temp_c":18}". This reply is deterministic: the same request always gets the same answer.`)
		is.Equal(len(chat.History(true)), 4)

		// The backend got its own artifacts back: the reasoning with its
		// signature, and the call, whose id the result answers.
		reasoning, call, result := gcReplayedTurn(t, rec)
		is.True(strings.HasPrefix(reasoning.Signature, "fxsig_")) // the fixture's signature, unchanged
		is.True(strings.HasPrefix(reasoning.Text, "Thinking about"))
		is.Equal(call.ID, calls[0].ID)
		is.Equal(result.CallID, call.ID) // paired by name: the SDK sent no id
		is.Equal(result.Name, "get_weather")
	})

	t.Run("streamGenerateContent", func(t *testing.T) {
		is := is.New(t)
		rec := &gcRecorder{Backend: fixture.New(fixture.Options{})}
		gw := newTestGateway(t, gcWithBackend(rec))
		client := genaiClient(t, gw.URL+"/svc/", gw.Key)
		chat, err := client.Chats.Create(ctx, "gemini-2.5-flash", config, nil)
		is.NoErr(err)

		var calls []*genai.FunctionCall
		var thoughts strings.Builder
		for chunk, err := range chat.SendMessageStream(ctx, genai.Part{Text: "What is the weather in Paris?"}) {
			is.NoErr(err) // first turn
			calls = append(calls, chunk.FunctionCalls()...)
			for _, p := range chunk.Candidates[0].Content.Parts {
				if p.Thought {
					thoughts.WriteString(p.Text)
				}
			}
		}
		is.Equal(len(calls), 1) // one complete call, args in one object
		is.Equal(calls[0].Args["city"], "example")
		is.True(strings.HasPrefix(thoughts.String(), "Thinking about"))
		is.True(len(chat.History(true)) >= 2) // the turn was valid for the chat helper

		var text strings.Builder
		for chunk, err := range chat.SendMessageStream(ctx, *genai.NewPartFromFunctionResponse("get_weather", map[string]any{"temp_c": 18})) {
			is.NoErr(err) // second turn
			text.WriteString(chunk.Text())
		}
		is.Equal(text.String(), `Fixture received the result of get_weather: "{"temp_c":18}". This reply is deterministic: the same request always gets the same answer.`)

		// Streamed thoughts came back as one signed reasoning block.
		reasoning, call, result := gcReplayedTurn(t, rec)
		is.True(strings.HasPrefix(reasoning.Signature, "fxsig_"))
		is.Equal(reasoning.Text, thoughts.String())
		is.Equal(call.ID, calls[0].ID)
		is.Equal(result.CallID, call.ID)
	})
}

func TestGenContentSDK_JSONSchema(t *testing.T) {
	ctx := context.Background()
	gw := newTestGateway(t)
	client := genaiClient(t, gw.URL+"/svc/", gw.Key)
	tests := []struct {
		name   string
		config *genai.GenerateContentConfig
	}{
		{"responseSchema", &genai.GenerateContentConfig{
			ResponseMIMEType: "application/json",
			ResponseSchema: &genai.Schema{Type: genai.TypeObject, Required: []string{"name", "age"},
				Properties: map[string]*genai.Schema{"name": {Type: genai.TypeString}, "age": {Type: genai.TypeInteger}}},
		}},
		{"responseJsonSchema", &genai.GenerateContentConfig{
			ResponseMIMEType: "application/json",
			ResponseJsonSchema: map[string]any{"type": "object", "required": []string{"name", "age"},
				"properties": map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer"}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			resp, err := client.Models.GenerateContent(ctx, "gemini-2.5-flash", genaiUserText("Extract: Ada, 36."), tt.config)
			is.NoErr(err)
			is.Equal(genaiRequestType(resp), "json")
			var v struct {
				Name *string `json:"name"`
				Age  *int    `json:"age"`
			}
			is.NoErr(json.Unmarshal([]byte(resp.Text()), &v)) // the reply is JSON
			is.True(v.Name != nil && v.Age != nil)            // valid against the schema
		})
	}
}

func TestGenContentSDK_Classification(t *testing.T) {
	ctx := context.Background()
	gw := newTestGateway(t)
	client := genaiClient(t, gw.URL+"/svc/", gw.Key)
	tests := []struct {
		name, model string
		parts       []*genai.Part
		config      *genai.GenerateContentConfig
		want        string
	}{
		{"flash-named id", "gemini-2.5-flash-lite", []*genai.Part{genai.NewPartFromText("hi")}, nil, "flash"},
		{"other id", "gemini-2.5-pro", []*genai.Part{genai.NewPartFromText("hi")}, nil, "pro"},
		{"image input", "gemini-2.5-flash", []*genai.Part{genai.NewPartFromText("What is this?"), genai.NewPartFromBytes(genaiPNG, "image/png")}, nil, "vision"},
		{"pdf input beats the image", "gemini-2.5-flash", []*genai.Part{genai.NewPartFromBytes(genaiPNG, "image/png"), genai.NewPartFromBytes(genaiPDF, "application/pdf"), genai.NewPartFromText("Summarize.")}, nil, "document"},
		{"function declarations", "gemini-2.5-pro", []*genai.Part{genai.NewPartFromText("weather?")}, &genai.GenerateContentConfig{Tools: []*genai.Tool{genaiWeatherTool}}, "code"},
		{"response schema", "gemini-2.5-flash", []*genai.Part{genai.NewPartFromText("JSON please")}, &genai.GenerateContentConfig{ResponseMIMEType: "application/json", ResponseSchema: &genai.Schema{Type: genai.TypeString}}, "json"},
		{"thoughts", "gemini-2.5-flash", []*genai.Part{genai.NewPartFromText("think")}, &genai.GenerateContentConfig{ThinkingConfig: &genai.ThinkingConfig{IncludeThoughts: true}}, "reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			resp, err := client.Models.GenerateContent(ctx, tt.model, []*genai.Content{genai.NewContentFromParts(tt.parts, genai.RoleUser)}, tt.config)
			is.NoErr(err)
			is.Equal(genaiRequestType(resp), tt.want)
			is.NoErr(gw.Store.Sync(ctx))
			is.Equal(gw.generation(t, resp.ResponseID).RequestType, tt.want) // recorded under the same type
		})
	}
}

// TestGenContentSDK_CountTokens: countTokens is advisory; it changes
// neither the balance nor usage, and agrees with what a call is billed for.
func TestGenContentSDK_CountTokens(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := genaiClient(t, gw.URL+"/svc/", gw.Key)
	contents := []*genai.Content{genai.NewContentFromParts([]*genai.Part{
		genai.NewPartFromText("How many tokens is this?"), genai.NewPartFromBytes(genaiPNG, "image/png"),
	}, genai.RoleUser)}

	resp, err := client.Models.GenerateContent(ctx, "gemini-2.5-flash", contents, nil)
	is.NoErr(err) // a billed call first, so the snapshot is not all zeros
	is.NoErr(gw.Store.Sync(ctx))
	credits, days, types := gw.credits(t), gw.usage(t, "day"), gw.usage(t, "request_type")
	is.True(credits.TotalUsed != "0.000000")

	for range 3 {
		n, err := client.Models.CountTokens(ctx, "gemini-2.5-flash", contents, nil)
		is.NoErr(err) // countTokens
		is.Equal(n.TotalTokens, resp.UsageMetadata.PromptTokenCount)
	}
	// The REST form of the body, with the gateway key in the query.
	r, body := gw.do(t, http.MethodPost, "/svc/v1beta/models/gemini-2.5-flash:countTokens?key="+gw.Key,
		`{"generateContentRequest":{"model":"models/gemini-2.5-flash","contents":[{"role":"user","parts":[{"text":"hello"}]}]}}`,
		"Authorization", "")
	is.Equal(r.StatusCode, http.StatusOK)
	is.True(strings.Contains(string(body), `"totalTokens":`))

	is.NoErr(gw.Store.Sync(ctx))
	is.Equal(gw.credits(t), credits)                 // balance unchanged
	is.Equal(gw.usage(t, "day"), days)               // usage unchanged
	is.Equal(gw.usage(t, "request_type"), types)     // in every grouping
	is.Equal(r.Header.Get("X-SVC-Request-Type"), "") // never classified
}

func TestGenContentSDK_Models(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := genaiClient(t, gw.URL+"/svc/", gw.Key)

	page, err := client.Models.List(ctx, nil)
	is.NoErr(err) // Models.List
	var names []string
	for _, m := range page.Items {
		names = append(names, m.Name)
		is.True(m.InputTokenLimit > 0 && m.OutputTokenLimit > 0)
		is.True(slices.Contains(m.SupportedActions, "generateContent"))
	}
	is.Equal(names, []string{"models/svc-fusion", "models/svc-saver", "models/svc-max"})
	is.Equal(page.NextPageToken, "") // one page
	_, err = page.Next(ctx)
	is.Equal(err, genai.ErrPageDone)

	n := 0
	for m, err := range client.Models.All(ctx) {
		is.NoErr(err)
		is.True(m != nil)
		n++
	}
	is.Equal(n, 3) // All ends: no nextPageToken

	m, err := client.Models.Get(ctx, "gemini-2.5-flash", nil)
	is.NoErr(err) // any id resolves
	is.Equal(m.Name, "models/gemini-2.5-flash")
}

// TestGenContentSDK_Errors: failures reach SDK users as genai.APIError in
// Google's envelope.
func TestGenContentSDK_Errors(t *testing.T) {
	ctx := context.Background()
	gw := newTestGateway(t)

	t.Run("invalid argument", func(t *testing.T) {
		is := is.New(t)
		client := genaiClient(t, gw.URL+"/svc/", gw.Key)
		_, err := client.Models.GenerateContent(ctx, "gemini-2.5-flash", genaiUserText("hi"), &genai.GenerateContentConfig{CandidateCount: 2})
		var ae genai.APIError
		is.True(errors.As(err, &ae)) // an APIError
		is.Equal(ae.Code, 400)
		is.Equal(ae.Status, "INVALID_ARGUMENT")
		is.True(strings.Contains(ae.Message, "candidateCount"))
	})
	t.Run("bad key", func(t *testing.T) {
		is := is.New(t)
		client := genaiClient(t, gw.URL+"/svc/", "llm_live_nope")
		_, err := client.Models.GenerateContent(ctx, "gemini-2.5-flash", genaiUserText("hi"), nil)
		var ae genai.APIError
		is.True(errors.As(err, &ae)) // an APIError
		is.Equal(ae.Code, 401)
		is.Equal(ae.Status, "UNAUTHENTICATED")
	})
	t.Run("bad key, streaming", func(t *testing.T) {
		is := is.New(t)
		client := genaiClient(t, gw.URL+"/svc/", "llm_live_nope")
		for _, err := range client.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genaiUserText("hi"), nil) {
			var ae genai.APIError
			is.True(errors.As(err, &ae)) // an APIError
			is.Equal(ae.Code, 401)
			break
		}
	})
	t.Run("unknown method", func(t *testing.T) {
		is := is.New(t)
		r, body := gw.do(t, http.MethodPost, "/svc/v1beta/models/gemini-2.5-flash:embedText", `{"text":"hi"}`)
		is.Equal(r.StatusCode, http.StatusNotFound)
		is.True(strings.Contains(string(body), `"status":"NOT_FOUND"`))
	})
}

// TestGenContentSDK_Auth: the key is accepted in every spelling Gemini
// clients use, and in the x-gen-api-key of docs/contract.md#authentication.
func TestGenContentSDK_Auth(t *testing.T) {
	gw := newTestGateway(t)
	const path = "/svc/v1beta/models/gemini-2.5-flash:generateContent"
	const body = `{"contents":[{"parts":[{"text":"hi"}]}]}`
	tests := []struct {
		name   string
		query  string
		header []string
		status int
	}{
		{"x-goog-api-key", "", []string{"Authorization", "", "x-goog-api-key", gw.Key}, 200},
		{"key= query", "?key=" + gw.Key, []string{"Authorization", ""}, 200},
		{"Bearer", "", nil, 200},
		{"x-gen-api-key", "", []string{"Authorization", "", "x-gen-api-key", gw.Key}, 200},
		{"no key", "", []string{"Authorization", ""}, 401},
		{"unknown key", "", []string{"Authorization", "", "x-goog-api-key", "llm_live_unknown"}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			r, b := gw.do(t, http.MethodPost, path+tt.query, body, tt.header...)
			is.Equal(r.StatusCode, tt.status)
			var env struct {
				Error *struct {
					Code   int    `json:"code"`
					Status string `json:"status"`
				} `json:"error"`
				ResponseID string `json:"responseId"`
			}
			is.NoErr(json.Unmarshal(b, &env))
			if tt.status == 200 {
				is.True(strings.HasPrefix(env.ResponseID, "gw"))
				return
			}
			is.True(env.Error != nil) // Google's envelope
			is.Equal(env.Error.Code, 401)
			is.Equal(env.Error.Status, "UNAUTHENTICATED")
		})
	}
}

// TestGenContentSDK_BaseAddresses: the SDK works with the base URL given
// with or without /svc, and raw clients reach the same endpoints at
// /svc/v1beta/… and /v1beta/….
func TestGenContentSDK_BaseAddresses(t *testing.T) {
	ctx := context.Background()
	gw := newTestGateway(t)
	for _, base := range []string{gw.URL + "/svc/", gw.URL + "/svc", gw.URL + "/", gw.URL} {
		t.Run("sdk "+strings.TrimPrefix(base, gw.URL), func(t *testing.T) {
			is := is.New(t)
			client := genaiClient(t, base, gw.Key)
			resp, err := client.Models.GenerateContent(ctx, "svc-fusion", genaiUserText("hi"), nil)
			is.NoErr(err)
			is.Equal(resp.ModelVersion, "svc-fusion")
			for _, err := range client.Models.GenerateContentStream(ctx, "svc-fusion", genaiUserText("hi"), nil) {
				is.NoErr(err)
			}
			_, err = client.Models.CountTokens(ctx, "svc-fusion", genaiUserText("hi"), nil)
			is.NoErr(err)
			_, err = client.Models.List(ctx, nil)
			is.NoErr(err)
		})
	}
	for _, prefix := range []string{"/svc", ""} {
		t.Run("raw "+prefix+"/v1beta", func(t *testing.T) {
			is := is.New(t)
			r, b := gw.do(t, http.MethodPost, prefix+"/v1beta/models/gemini-2.5-flash:generateContent",
				`{"contents":[{"parts":[{"text":"hi"}]}]}`, "Authorization", "", "x-goog-api-key", gw.Key)
			is.Equal(r.StatusCode, http.StatusOK)
			is.Equal(r.Header.Get("X-SVC-Request-Type"), "flash")
			is.True(strings.Contains(string(b), `"modelVersion":"gemini-2.5-flash"`))

			r, b = gw.do(t, http.MethodPost, prefix+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
				`{"contents":[{"parts":[{"text":"hi"}]}]}`, "Authorization", "", "x-goog-api-key", gw.Key)
			is.Equal(r.StatusCode, http.StatusOK)
			is.True(strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream"))
			frames := strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n")
			for _, f := range frames {
				is.True(strings.HasPrefix(f, "data: {")) // data frames only: no event:, comments or [DONE]
			}
			is.True(strings.Contains(frames[len(frames)-1], `"finishReason":"STOP"`))

			r, b = gw.do(t, http.MethodGet, prefix+"/v1beta/models", "", "Authorization", "", "x-goog-api-key", gw.Key)
			is.Equal(r.StatusCode, http.StatusOK)
			is.True(strings.Contains(string(b), `"models/svc-fusion"`))
		})
	}
}

// gcScripted is a backend that streams its events, then either fails with
// err or, when err is nil, waits for its context to end (a generation the
// caller abandons). It records the cancellation.
type gcScripted struct {
	events   []llm.Event
	err      error
	once     sync.Once
	canceled chan struct{}
}

var _ upstream.Backend = (*gcScripted)(nil)

func newGCScripted(err error, events ...llm.Event) *gcScripted {
	return &gcScripted{events: events, err: err, canceled: make(chan struct{})}
}

func (b *gcScripted) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return nil, &llm.Error{Kind: llm.KindUpstream, Message: "scripted backend: streams only"}
}

func (b *gcScripted) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	return &gcScriptedStream{ctx: ctx, b: b, i: -1}, nil
}

type gcScriptedStream struct {
	ctx context.Context
	b   *gcScripted
	i   int
	err error
}

func (s *gcScriptedStream) Next() bool {
	if s.i+1 < len(s.b.events) {
		s.i++
		return true
	}
	if s.b.err != nil {
		s.err = s.b.err
		return false
	}
	<-s.ctx.Done()
	s.b.once.Do(func() { close(s.b.canceled) })
	s.err = s.ctx.Err()
	return false
}

func (s *gcScriptedStream) Event() llm.Event { return s.b.events[s.i] }
func (s *gcScriptedStream) Err() error       { return s.err }
func (s *gcScriptedStream) Close() error     { return nil }

func gcWithBackend(b upstream.Backend) gatewayOption {
	return func(o *Options) {
		o.Router = upstream.NewRouter([]upstream.Candidate{{Name: "scripted", Backend: b,
			Limits: upstream.Limits{ContextLength: 100000, MaxCompletionTokens: 8000}}})
	}
}

// gcRecorder wraps a backend and keeps the requests it serves.
type gcRecorder struct {
	upstream.Backend
	mu   sync.Mutex
	reqs []*llm.Request
}

func (r *gcRecorder) record(req *llm.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
}

func (r *gcRecorder) last() *llm.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

func (r *gcRecorder) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	r.record(req)
	return r.Backend.Complete(ctx, req)
}

func (r *gcRecorder) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	r.record(req)
	return r.Backend.Stream(ctx, req)
}

// gcReplayedTurn returns the model turn of the backend's last request: what
// the SDK's chat sent back of the first reply.
func gcReplayedTurn(t *testing.T, rec *gcRecorder) (reasoning llm.Part, call *llm.ToolCall, result *llm.ToolResult) {
	t.Helper()
	for _, m := range rec.last().Messages {
		for _, p := range m.Parts {
			switch p.Type {
			case llm.PartReasoning:
				if reasoning.Signature == "" {
					reasoning = p
				}
			case llm.PartToolCall:
				call = p.ToolCall
			case llm.PartToolResult:
				result = p.ToolResult
			}
		}
	}
	if call == nil || result == nil {
		t.Fatalf("the replayed history has no tool call or result: %+v", rec.last().Messages)
	}
	return reasoning, call, result
}

// TestGenContentSDK_MidStreamError: a failure after the first chunk reaches
// the SDK as an APIError from the iterator, after the chunks sent before it.
func TestGenContentSDK_MidStreamError(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	b := newGCScripted(&llm.Error{Kind: llm.KindOverloaded, Message: "The model is overloaded. Please try again later."},
		llm.Event{Type: llm.EventTextDelta, Text: "Once upon"},
		llm.Event{Type: llm.EventTextDelta, Text: " a time"})
	gw := newTestGateway(t, gcWithBackend(b))
	client := genaiClient(t, gw.URL+"/svc/", gw.Key)

	var text strings.Builder
	var streamErr error
	for chunk, err := range client.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genaiUserText("story"), nil) {
		if err != nil {
			streamErr = err
			break
		}
		text.WriteString(chunk.Text())
	}
	is.Equal(text.String(), "Once upon a time") // what came before the failure
	var ae genai.APIError
	is.True(errors.As(streamErr, &ae)) // the in-stream error is an APIError
	is.Equal(ae.Code, 503)
	is.Equal(ae.Status, "UNAVAILABLE")
	is.Equal(ae.Message, "The model is overloaded. Please try again later.")
}

// TestGenContentSDK_Disconnect: a caller that stops reading mid-stream
// cancels the upstream call, and the call is still recorded.
func TestGenContentSDK_Disconnect(t *testing.T) {
	is := is.New(t)
	b := newGCScripted(nil,
		llm.Event{Type: llm.EventTextDelta, Text: "Once upon"},
		llm.Event{Type: llm.EventTextDelta, Text: " a time"})
	gw := newTestGateway(t, gcWithBackend(b))
	client := genaiClient(t, gw.URL+"/svc/", gw.Key)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var id string
	for chunk, err := range client.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genaiUserText("story"), nil) {
		is.NoErr(err)
		id = chunk.ResponseID
		cancel() // the caller leaves after the first chunk
		break
	}
	is.True(id != "")
	select {
	case <-b.canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream call was not cancelled")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		is.NoErr(gw.Store.Sync(context.Background()))
		r, body := gw.do(t, http.MethodGet, "/svc/v1/generation?id="+id, "")
		if r.StatusCode == http.StatusOK {
			var g struct {
				Data generation `json:"data"`
			}
			is.NoErr(json.Unmarshal(body, &g))
			is.Equal(g.Data.FinishReason, FinishCanceled) // recorded, as canceled
			is.True(g.Data.Streamed)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no generation record for %s: %d %s", id, r.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
