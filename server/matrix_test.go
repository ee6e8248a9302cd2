package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/genai"

	"github.com/svcgw/svcgw/upstream"
)

// The end-to-end matrix (issue 6): every caller surface, driven by its
// official SDK, over every upstream protocol, each a fake upstream that
// speaks the vendor's real wire format (matrix_fakes_test.go); then the
// canary leak test, failure surfacing, retry, fallback, the circuit breaker
// and a caller's disconnect. Helpers carry an mx prefix.

// mxWeatherSchema is the arguments schema of the test tool.
var mxWeatherSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city": map[string]any{"type": "string", "minLength": 2},
		"unit": map[string]any{"type": "string", "enum": []any{"celsius", "fahrenheit"}},
	},
	"required": []any{"city", "unit"},
}

// mxPersonSchema is the JSON output schema.
var mxPersonSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"name": map[string]any{"type": "string"},
		"age":  map[string]any{"type": "integer", "minimum": 0},
	},
	"required":             []any{"name", "age"},
	"additionalProperties": false,
}

// mxToolResult is what the caller's tool returned.
const mxToolResult = `{"temp_c":18,"sky":"clear"}`

// mxSleeps is the router's clock for retries: it records each wait and
// returns at once.
type mxSleeps struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *mxSleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *mxSleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// mxEnv is a gateway routing every call to fake upstreams, and a tapped
// HTTP client for its callers.
type mxEnv struct {
	gw     *testGateway
	tap    *mxTap
	sleeps *mxSleeps
}

// newMXEnv starts a gateway whose every route is cands, with one retry per
// candidate, instant backoff and (unless opts say otherwise) a breaker that
// does not open.
func newMXEnv(t *testing.T, opts upstream.RouterOptions, cands ...upstream.Candidate) *mxEnv {
	t.Helper()
	sl := &mxSleeps{}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 1
	}
	if opts.BreakerThreshold == 0 {
		opts.BreakerThreshold = 1 << 20
	}
	opts.BaseBackoff, opts.Sleep = time.Millisecond, sl.sleep
	router := upstream.NewRouterWithOptions(opts, cands)
	gw := newTestGateway(t, func(o *Options) { o.Router = router })
	return &mxEnv{gw: gw, tap: newMXTap(), sleeps: sl}
}

// do sends a raw request through the tap with the gateway key.
func (env *mxEnv) do(t *testing.T, method, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, env.gw.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+env.gw.Key)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := env.tap.client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return resp, b
}

// generation reads the record of a call once the ledger has it.
func (env *mxEnv) generation(t *testing.T, id string) generation {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mxSync(t, env.gw)
		r, body := env.do(t, http.MethodGet, "/svc/v1/generation?id="+id, "")
		if r.StatusCode == http.StatusOK {
			var g struct {
				Data generation `json:"data"`
			}
			if err := json.Unmarshal(body, &g); err != nil {
				t.Fatalf("generation %s: %v", id, err)
			}
			return g.Data
		}
		if r.StatusCode != http.StatusNotFound || time.Now().After(deadline) {
			t.Fatalf("generation %s: %d %s", id, r.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mxSync waits for the ledger to commit what was recorded, failing (with
// the ledger's goroutines, to see where it is stuck) rather than hanging.
func mxSync(t *testing.T, gw *testGateway) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := gw.Store.Sync(ctx); err != nil {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var stuck []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "svcgw/store") || strings.Contains(g, "database/sql") {
				stuck = append(stuck, g)
			}
		}
		t.Fatalf("store sync: %v\n%s", err, strings.Join(stuck, "\n\n"))
	}
}

// mxCase is one call of a scenario.
type mxCase struct {
	stream bool
	tools  bool   // offer the weather tool
	json   bool   // ask for mxPersonSchema in the surface's native form
	answer *mxOut // the tool-call turn to replay, with mxToolResult as its result
}

func (c mxCase) question() string {
	switch {
	case c.tools:
		return "What is the weather in Paris?"
	case c.json:
		return "Invent a person."
	}
	return "What is the capital of France?"
}

// mxOut is one reply, read by the caller's SDK.
type mxOut struct {
	ID      string
	Text    string
	Finish  string // in the surface's own words
	Calls   []mxCall
	In, Out int64  // the surface's native usage
	Type    string // X-SVC-Request-Type
	turn    any    // the assistant turn as the SDK replays it
}

type mxCall struct{ ID, Name, Args string }

// mxSurface is a caller surface driven by its official SDK.
type mxSurface struct {
	name           string
	stop, toolStop string // the finish of a text reply and of a tool call
	send           func(t *testing.T, env *mxEnv, c mxCase) mxOut
}

var mxSurfaces = []mxSurface{
	{"chat", "stop", "tool_calls", mxChat},
	{"responses", "completed", "completed", mxResponses},
	{"messages", "end_turn", "tool_use", mxMessages},
	{"gencontent", "STOP", "STOP", mxGenContent},
}

func mxChat(t *testing.T, env *mxEnv, c mxCase) mxOut {
	t.Helper()
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(env.gw.URL+"/svc/v1"), option.WithAPIKey(env.gw.Key),
		option.WithMaxRetries(0), option.WithHTTPClient(env.tap.client()))
	params := openai.ChatCompletionNewParams{Model: "svc-fusion",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(c.question())}}
	if c.tools {
		params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Description: openai.String("Current weather in a city"), Parameters: mxWeatherSchema})}
	}
	if c.json {
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: mxPersonSchema, Strict: openai.Bool(true)}}}
	}
	if a := c.answer; a != nil {
		params.Messages = append(params.Messages, a.turn.(openai.ChatCompletionMessageParamUnion),
			openai.ToolMessage(mxToolResult, a.Calls[0].ID))
	}
	var hr *http.Response
	var cc openai.ChatCompletion
	if !c.stream {
		r, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&hr))
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
		cc = *r
	} else {
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&hr))
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			if !acc.AddChunk(s.Current()) {
				t.Fatalf("chat stream: the accumulator refused a chunk")
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("chat stream: %v", err)
		}
		_ = s.Close()
		cc = acc.ChatCompletion
	}
	out := mxOut{ID: cc.ID, In: cc.Usage.PromptTokens, Out: cc.Usage.CompletionTokens, Type: hr.Header.Get("X-SVC-Request-Type")}
	if len(cc.Choices) != 1 {
		t.Fatalf("chat: %d choices", len(cc.Choices))
	}
	msg := cc.Choices[0].Message
	out.Text, out.Finish, out.turn = msg.Content, cc.Choices[0].FinishReason, msg.ToParam()
	for _, tc := range msg.ToolCalls {
		out.Calls = append(out.Calls, mxCall{tc.ID, tc.Function.Name, tc.Function.Arguments})
	}
	return out
}

func mxResponses(t *testing.T, env *mxEnv, c mxCase) mxOut {
	t.Helper()
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(env.gw.URL+"/svc/v1"), option.WithAPIKey(env.gw.Key),
		option.WithMaxRetries(0), option.WithHTTPClient(env.tap.client()))
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(c.question(), responses.EasyInputMessageRoleUser)}
	params := responses.ResponseNewParams{Model: "svc-fusion", Store: openai.Bool(false)}
	if c.tools {
		params.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name: "get_weather", Description: openai.String("Current weather in a city"),
			Parameters: mxWeatherSchema, Strict: openai.Bool(false)}}}
	}
	if c.json {
		params.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "person", Schema: mxPersonSchema, Strict: openai.Bool(true)}}}
	}
	if a := c.answer; a != nil {
		call := a.Calls[0]
		input = append(input, responses.ResponseInputItemParamOfFunctionCall(call.Args, call.ID, call.Name),
			responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String(call.ID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(mxToolResult)},
			}})
	}
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
	var hr *http.Response
	var r responses.Response
	if !c.stream {
		got, err := client.Responses.New(ctx, params, option.WithResponseInto(&hr))
		if err != nil {
			t.Fatalf("responses: %v", err)
		}
		r = *got
	} else {
		s := client.Responses.NewStreaming(ctx, params, option.WithResponseInto(&hr))
		var text strings.Builder
		completed := false
		for s.Next() {
			switch e := s.Current().AsAny().(type) {
			case responses.ResponseTextDeltaEvent:
				text.WriteString(e.Delta)
			case responses.ResponseCompletedEvent:
				r, completed = e.Response, true
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("responses stream: %v", err)
		}
		_ = s.Close()
		if !completed {
			t.Fatal("responses stream: no response.completed")
		}
		if text.String() != r.OutputText() {
			t.Fatalf("responses stream: deltas %q, completed %q", text.String(), r.OutputText())
		}
	}
	out := mxOut{ID: r.ID, Text: r.OutputText(), Finish: string(r.Status), In: r.Usage.InputTokens, Out: r.Usage.OutputTokens,
		Type: hr.Header.Get("X-SVC-Request-Type")}
	for _, it := range r.Output {
		if it.Type == "function_call" {
			fc := it.AsFunctionCall()
			out.Calls = append(out.Calls, mxCall{fc.CallID, fc.Name, fc.Arguments})
		}
	}
	return out
}

func mxMessages(t *testing.T, env *mxEnv, c mxCase) mxOut {
	t.Helper()
	ctx := context.Background()
	client := anthropic.NewClient(anthropicoption.WithBaseURL(env.gw.URL+"/svc"), anthropicoption.WithAPIKey(env.gw.Key),
		anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(env.tap.client()))
	params := anthropic.MessageNewParams{Model: "svc-fusion", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(c.question()))}}
	if c.tools {
		params.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name: "get_weather", Description: anthropic.String("Current weather in a city"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: mxWeatherSchema["properties"], Required: []string{"city", "unit"}},
		}}}
	}
	if c.json {
		params.OutputConfig = anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: mxPersonSchema}}
	}
	if a := c.answer; a != nil {
		params.Messages = append(params.Messages, a.turn.(anthropic.MessageParam),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(a.Calls[0].ID, mxToolResult, false)))
	}
	var hr *http.Response
	var m anthropic.Message
	if !c.stream {
		got, err := client.Messages.New(ctx, params, anthropicoption.WithResponseInto(&hr))
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		m = *got
	} else {
		s := client.Messages.NewStreaming(ctx, params, anthropicoption.WithResponseInto(&hr))
		for s.Next() {
			if err := m.Accumulate(s.Current()); err != nil {
				t.Fatalf("messages stream: accumulate: %v", err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("messages stream: %v", err)
		}
		_ = s.Close()
	}
	out := mxOut{ID: m.ID, Finish: string(m.StopReason), In: m.Usage.InputTokens, Out: m.Usage.OutputTokens,
		Type: hr.Header.Get("X-SVC-Request-Type"), turn: m.ToParam()}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			out.Text += b.Text
		case "tool_use":
			out.Calls = append(out.Calls, mxCall{b.ID, b.Name, string(b.Input)})
		}
	}
	return out
}

func mxGenContent(t *testing.T, env *mxEnv, c mxCase) mxOut {
	t.Helper()
	ctx := context.Background()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: env.gw.Key, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: env.gw.URL + "/svc/"}, HTTPClient: env.tap.client()})
	if err != nil {
		t.Fatal(err)
	}
	contents := []*genai.Content{genai.NewContentFromText(c.question(), genai.RoleUser)}
	config := &genai.GenerateContentConfig{}
	if c.tools {
		config.Tools = []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
			Name: "get_weather", Description: "Current weather in a city", ParametersJsonSchema: mxWeatherSchema}}}}
	}
	if c.json {
		config.ResponseMIMEType, config.ResponseJsonSchema = "application/json", mxPersonSchema
	}
	if a := c.answer; a != nil {
		var res map[string]any
		_ = json.Unmarshal([]byte(mxToolResult), &res)
		contents = append(contents, a.turn.(*genai.Content), &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{
			{FunctionResponse: &genai.FunctionResponse{ID: a.Calls[0].ID, Name: a.Calls[0].Name, Response: res}}}})
	}
	out := mxOut{}
	model := &genai.Content{Role: genai.RoleModel}
	read := func(r *genai.GenerateContentResponse) {
		out.ID = r.ResponseID
		if r.SDKHTTPResponse != nil {
			out.Type = r.SDKHTTPResponse.Headers.Get("X-SVC-Request-Type")
		}
		if len(r.Candidates) > 0 {
			cand := r.Candidates[0]
			if cand.FinishReason != "" {
				out.Finish = string(cand.FinishReason)
			}
			if cand.Content != nil {
				model.Parts = append(model.Parts, cand.Content.Parts...)
			}
		}
		if u := r.UsageMetadata; u != nil {
			out.In, out.Out = int64(u.PromptTokenCount), int64(u.CandidatesTokenCount)
		}
	}
	if !c.stream {
		r, err := client.Models.GenerateContent(ctx, "svc-fusion", contents, config)
		if err != nil {
			t.Fatalf("generateContent: %v", err)
		}
		read(r)
	} else {
		for r, err := range client.Models.GenerateContentStream(ctx, "svc-fusion", contents, config) {
			if err != nil {
				t.Fatalf("streamGenerateContent: %v", err)
			}
			read(r)
		}
	}
	for _, p := range model.Parts {
		switch {
		case p.FunctionCall != nil:
			b, _ := json.Marshal(p.FunctionCall.Args)
			out.Calls = append(out.Calls, mxCall{p.FunctionCall.ID, p.FunctionCall.Name, string(b)})
		case !p.Thought:
			out.Text += p.Text
		}
	}
	out.turn = model
	return out
}

// mxPath walks decoded JSON: string keys index objects, ints index arrays
// (negative from the end). It returns nil where the path does not exist.
func mxPath(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k < 0 {
				k += len(a)
			}
			if k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// mxCheckRecord checks the generation record of a reply: the fake's usage,
// a positive cost, and the reply's request type and mode.
func mxCheckRecord(t *testing.T, env *mxEnv, out mxOut, stream bool, finish string) {
	t.Helper()
	is := is.NewRelaxed(t)
	g := env.generation(t, out.ID)
	is.Equal(g.Usage.PromptTokens, mxInputTokens)      // the upstream's input tokens
	is.Equal(g.Usage.CompletionTokens, mxOutputTokens) // the upstream's output tokens
	is.Equal(g.Streamed, stream)
	is.Equal(g.FinishReason, finish)
	is.Equal(g.RequestType, out.Type) // the record's type is the header's
	cost, _, err := apd.NewFromString(g.TotalCost)
	is.NoErr(err)            // total_cost is a decimal
	is.True(cost.Sign() > 0) // the call was charged
}

// mxCheckToolSent checks that the fake got the tool in its native form.
func mxCheckToolSent(t *testing.T, f *mxFake) {
	t.Helper()
	b := f.last(t).Body
	var name, schemaType any
	switch f.proto {
	case mxOpenAI:
		name, schemaType = mxPath(b, "tools", 0, "function", "name"), mxPath(b, "tools", 0, "function", "parameters", "type")
	case mxAnthropic:
		name, schemaType = mxPath(b, "tools", 0, "name"), mxPath(b, "tools", 0, "input_schema", "type")
	case mxGemini:
		name, schemaType = mxPath(b, "tools", 0, "functionDeclarations", 0, "name"),
			mxPath(b, "tools", 0, "functionDeclarations", 0, "parametersJsonSchema", "type")
	}
	if name != "get_weather" || schemaType != "object" {
		t.Errorf("%s fake got no native tool declaration: %s", f.proto, f.last(t).Raw)
	}
}

// mxCheckResultSent checks that the fake got the replayed call and its
// result in its native form, paired by id (or by name, for Gemini).
func mxCheckResultSent(t *testing.T, f *mxFake) {
	t.Helper()
	b := f.last(t).Body
	ok := false
	switch f.proto {
	case mxOpenAI:
		id := mxPath(b, "messages", -2, "tool_calls", 0, "id")
		ok = mxPath(b, "messages", -2, "role") == "assistant" &&
			mxPath(b, "messages", -2, "tool_calls", 0, "function", "name") == "get_weather" &&
			mxPath(b, "messages", -1, "role") == "tool" && id != nil && mxPath(b, "messages", -1, "tool_call_id") == id &&
			mxSameJSON(mxPath(b, "messages", -1, "content"), mxToolResult)
	case mxAnthropic:
		id := mxPath(b, "messages", -2, "content", -1, "id")
		ok = mxPath(b, "messages", -2, "role") == "assistant" &&
			mxPath(b, "messages", -2, "content", -1, "type") == "tool_use" &&
			mxPath(b, "messages", -1, "role") == "user" &&
			mxPath(b, "messages", -1, "content", 0, "type") == "tool_result" &&
			id != nil && mxPath(b, "messages", -1, "content", 0, "tool_use_id") == id &&
			mxSameJSON(mxAnthropicText(mustJSON(mxPath(b, "messages", -1, "content", 0, "content"))), mxToolResult)
	case mxGemini:
		ok = mxPath(b, "contents", -2, "role") == "model" &&
			mxPath(b, "contents", -2, "parts", 0, "functionCall", "name") == "get_weather" &&
			mxPath(b, "contents", -1, "role") == "user" &&
			mxPath(b, "contents", -1, "parts", 0, "functionResponse", "name") == "get_weather" &&
			mxPath(b, "contents", -1, "parts", 0, "functionResponse", "response", "temp_c") == 18.0
	}
	if !ok {
		t.Errorf("%s fake did not get the tool result in its native form: %s", f.proto, f.last(t).Raw)
	}
}

// mxSameJSON reports whether s (a string holding JSON) and want decode to
// the same value: a gencontent caller's result object goes upstream
// re-encoded, with its keys sorted.
func mxSameJSON(s any, want string) bool {
	str, _ := s.(string)
	var a, b any
	if json.Unmarshal([]byte(str), &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// mxCheckSchemaSent checks that the fake got the output schema in its
// native structured-output form.
func mxCheckSchemaSent(t *testing.T, f *mxFake) {
	t.Helper()
	b := f.last(t).Body
	ok := false
	switch f.proto {
	case mxOpenAI:
		ok = mxPath(b, "response_format", "type") == "json_schema" &&
			mxPath(b, "response_format", "json_schema", "schema", "properties", "name", "type") == "string"
	case mxAnthropic:
		ok = mxPath(b, "output_config", "format", "type") == "json_schema" &&
			mxPath(b, "output_config", "format", "schema", "properties", "name", "type") == "string"
	case mxGemini:
		ok = mxPath(b, "generationConfig", "responseMimeType") == "application/json" &&
			mxPath(b, "generationConfig", "responseJsonSchema", "properties", "name", "type") == "string"
	}
	if !ok {
		t.Errorf("%s fake did not get the schema in its native form: %s", f.proto, f.last(t).Raw)
	}
}

// TestMatrix_SurfacesByUpstreams runs every caller surface over every
// upstream protocol, complete and streamed: plain text, a tool call and
// its result, and JSON schema output.
func TestMatrix_SurfacesByUpstreams(t *testing.T) {
	for _, sf := range mxSurfaces {
		for _, proto := range mxProtos {
			t.Run(sf.name+"/"+string(proto), func(t *testing.T) {
				t.Parallel()
				f := newMXFake(t, proto)
				env := newMXEnv(t, upstream.RouterOptions{}, f.candidate("fake"))
				for _, stream := range []bool{false, true} {
					t.Run(map[bool]string{false: "complete", true: "stream"}[stream], func(t *testing.T) {
						is := is.New(t)
						text := sf.send(t, env, mxCase{stream: stream})
						is.Equal(text.Text, mxText)
						is.Equal(text.Finish, sf.stop)
						is.Equal(len(text.Calls), 0)
						is.Equal(text.In, int64(mxInputTokens)) // native usage: input
						is.Equal(text.Out, int64(mxOutputTokens))
						is.Equal(text.Type, "pro")
						mxCheckRecord(t, env, text, stream, "stop")
						if proto == mxOpenAI && stream {
							// Usage is always asked for upstream (the stream is billed by it).
							is.Equal(mxPath(f.last(t).Body, "stream_options", "include_usage"), true)
						}

						call := sf.send(t, env, mxCase{stream: stream, tools: true})
						mxCheckToolSent(t, f)
						is.Equal(len(call.Calls), 1) // one tool call
						is.Equal(call.Calls[0].Name, "get_weather")
						is.True(call.Calls[0].ID != "")
						oaiValidate(t, mxWeatherSchema, call.Calls[0].Args) // arguments valid for the tool's schema
						is.Equal(call.Finish, sf.toolStop)
						is.Equal(call.In, int64(mxInputTokens))
						is.Equal(call.Type, "code")
						mxCheckRecord(t, env, call, stream, "tool_calls")

						final := sf.send(t, env, mxCase{stream: stream, tools: true, answer: &call})
						mxCheckResultSent(t, f)
						is.Equal(len(final.Calls), 0)
						is.True(strings.HasPrefix(final.Text, "The tool returned "))
						is.True(strings.Contains(final.Text, `"temp_c":18`)) // the reply is about the result
						is.True(strings.Contains(final.Text, `"sky":"clear"`))
						is.Equal(final.Finish, sf.stop)
						is.Equal(final.Out, int64(mxOutputTokens))
						mxCheckRecord(t, env, final, stream, "stop")

						js := sf.send(t, env, mxCase{stream: stream, json: true})
						mxCheckSchemaSent(t, f)
						oaiValidate(t, mxPersonSchema, js.Text) // the reply parses and fits the schema
						var p struct {
							Name string `json:"name"`
							Age  *int   `json:"age"`
						}
						is.NoErr(json.Unmarshal([]byte(js.Text), &p))
						is.True(p.Name != "" && p.Age != nil)
						is.Equal(js.Finish, sf.stop)
						is.Equal(js.Type, "json")
						mxCheckRecord(t, env, js, stream, "stop")
					})
				}
				env.tap.assertClean(t)
				mxCheckRows(t, env, "svc-fusion")
			})
		}
	}
}

// mxCheckRows checks every generation row in the database: the model is
// the caller's id and nothing names the backend.
func mxCheckRows(t *testing.T, env *mxEnv, model string) {
	t.Helper()
	ctx := context.Background()
	is := is.NewRelaxed(t)
	mxSync(t, env.gw)
	ids := mxIDs(env.tap.bytes())
	rows := 0
	for _, id := range ids {
		g, err := env.gw.Store.GenerationByID(ctx, id)
		if err != nil {
			continue // a Responses item id, not a call's
		}
		rows++
		is.Equal(g.Model, model) // the caller's model id, never the backend's
		mxAssertNoCanary(t, "generation row "+id, fmt.Sprintf("%+v", g))
	}
	is.True(rows > 0) // the calls were recorded
}

// mxIDs finds the gateway ids in caller-visible bytes: chatcmpl-, resp_,
// msg_ (call ids, and Responses message item ids), each in the order seen,
// then the generate-content responseIds.
func mxIDs(s string) []string {
	seen := map[string]bool{}
	var out []string
	for _, key := range []string{`"id":"`, `"responseId":"`} {
		for rest := s; ; {
			i := strings.Index(rest, key)
			if i < 0 {
				break
			}
			rest = rest[i+len(key):]
			j := strings.IndexByte(rest, '"')
			if j < 0 {
				break
			}
			id := rest[:j]
			if (strings.HasPrefix(id, "chatcmpl-") || strings.HasPrefix(id, "resp_") || strings.HasPrefix(id, "msg_") ||
				key == `"responseId":"`) && !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

// mxRoute is one inference endpoint, called with raw HTTP.
type mxRoute struct {
	surface, path, streamPath, body string
}

var mxRoutes = []mxRoute{
	{"chat", "/svc/v1/chat/completions", "/svc/v1/chat/completions",
		`{"model":"svc-fusion","messages":[{"role":"user","content":"What is the capital of France?"}]}`},
	{"responses", "/svc/v1/responses", "/svc/v1/responses",
		`{"model":"svc-fusion","input":"What is the capital of France?","store":false}`},
	{"messages", "/svc/v1/messages", "/svc/v1/messages",
		`{"model":"svc-fusion","max_tokens":256,"messages":[{"role":"user","content":"What is the capital of France?"}]}`},
	{"gencontent", "/svc/v1beta/models/svc-fusion:generateContent", "/svc/v1beta/models/svc-fusion:streamGenerateContent?alt=sse",
		`{"contents":[{"role":"user","parts":[{"text":"What is the capital of France?"}]}]}`},
}

// call returns the path and body of a complete or streamed call.
func (r mxRoute) call(stream bool) (path, body string) {
	switch {
	case !stream:
		return r.path, r.body
	case r.surface == "gencontent":
		return r.streamPath, r.body
	case r.surface == "chat":
		return r.path, `{"stream":true,"stream_options":{"include_usage":true},` + r.body[1:]
	}
	return r.path, `{"stream":true,` + r.body[1:]
}

func (r mxRoute) name(stream bool) string {
	return r.surface + map[bool]string{false: "/complete", true: "/stream"}[stream]
}

// mxWant is how a caller must see an upstream failure.
type mxWant struct {
	status   int
	envelope string // envelopeKind's name for the surface
	typ      string // error type, or the google.rpc status
	retry    bool   // retry guidance carrying the upstream's delay (1s)
	hits     int64  // upstream attempts: the router retries once what may pass
}

// mxWantFailure maps an upstream status to what each surface answers
// (docs/translation.md#errors): the fakes send retry guidance with 429 and 503.
func mxWantFailure(surface string, upstreamStatus int) mxWant {
	w := mxWant{envelope: surface, hits: 2, retry: upstreamStatus == 429 || upstreamStatus == 503}
	if upstreamStatus == 400 || upstreamStatus == 401 {
		w.hits = 1 // a rejected request or the gateway's own credentials: retrying cannot help
	}
	type row struct {
		status int
		typ    string
	}
	var m map[int]row
	switch surface {
	case "chat", "responses":
		w.envelope = "chat"
		m = map[int]row{400: {400, "invalid_request_error"}, 401: {502, "server_error"}, 429: {429, "requests"},
			500: {502, "server_error"}, 503: {503, "server_error"}, 529: {503, "server_error"}}
	case "messages":
		m = map[int]row{400: {400, "invalid_request_error"}, 401: {502, "api_error"}, 429: {429, "rate_limit_error"},
			500: {502, "api_error"}, 503: {529, "overloaded_error"}, 529: {529, "overloaded_error"}}
	case "gencontent":
		m = map[int]row{400: {400, "INVALID_ARGUMENT"}, 401: {502, "UNAVAILABLE"}, 429: {429, "RESOURCE_EXHAUSTED"},
			500: {502, "UNAVAILABLE"}, 503: {503, "UNAVAILABLE"}, 529: {503, "UNAVAILABLE"}}
	}
	w.status, w.typ = m[upstreamStatus].status, m[upstreamStatus].typ
	return w
}

// mxRetryDelay is the RetryInfo delay of a generate-content error body.
func mxRetryDelay(body []byte) string {
	var e struct {
		Error struct {
			Details []map[string]any `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	for _, d := range e.Error.Details {
		if d["@type"] == "type.googleapis.com/google.rpc.RetryInfo" {
			s, _ := d["retryDelay"].(string)
			return s
		}
	}
	return ""
}

// TestMatrix_UpstreamFailuresSurfaceNatively: an upstream that keeps
// failing, once the router's retry is spent, reaches each caller as its
// surface's own error envelope and status, with retry guidance where the
// upstream gave some, streamed or not (nothing was sent yet).
func TestMatrix_UpstreamFailuresSurfaceNatively(t *testing.T) {
	for _, proto := range mxProtos {
		t.Run(string(proto), func(t *testing.T) {
			t.Parallel()
			f := newMXFake(t, proto)
			env := newMXEnv(t, upstream.RouterOptions{}, f.candidate("fake"))
			for _, status := range []int{429, 500, 503, 529, 400, 401} {
				for _, r := range mxRoutes {
					for _, stream := range []bool{false, true} {
						t.Run(fmt.Sprintf("%d/%s", status, r.name(stream)), func(t *testing.T) {
							is := is.New(t)
							want := mxWantFailure(r.surface, status)
							f.fail(&mxFailure{Status: status})
							before := f.hits.Load()
							path, body := r.call(stream)
							resp, out := env.do(t, http.MethodPost, path, body)
							is.Equal(resp.StatusCode, want.status) // the surface's status
							envelope, typ := envelopeKind(t, out)
							is.Equal(envelope, want.envelope) // the surface's envelope
							is.Equal(typ, want.typ)
							is.True(strings.Contains(resp.Header.Get("Content-Type"), "application/json"))
							is.Equal(f.hits.Load()-before, want.hits) // the router's attempts
							// The SDKs' own retry switch: only the rejected request is final.
							switch {
							case r.surface == "chat" || r.surface == "responses":
								is.Equal(resp.Header.Get("X-Should-Retry"), map[bool]string{true: "false", false: "true"}[status == 400])
							case r.surface == "messages" && status == 400:
								is.Equal(resp.Header.Get("X-Should-Retry"), "false")
							}
							if !want.retry {
								is.Equal(resp.Header.Get("Retry-After"), "")
								return
							}
							is.Equal(resp.Header.Get("Retry-After"), "1") // the upstream's delay, passed on
							switch r.surface {
							case "gencontent":
								is.Equal(mxRetryDelay(out), "1s") // google.rpc.RetryInfo
							default:
								is.Equal(resp.Header.Get("Retry-After-Ms"), "1000")
							}
						})
					}
				}
			}
			f.fail(nil)
			env.tap.assertClean(t)
		})
	}
}

// TestMatrix_UpstreamRateLimitThroughTheSDKs: the 429 reaches each SDK as
// its own typed error with the retry delay it reads.
func TestMatrix_UpstreamRateLimitThroughTheSDKs(t *testing.T) {
	for _, proto := range mxProtos {
		t.Run(string(proto), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			ctx := context.Background()
			f := newMXFake(t, proto)
			env := newMXEnv(t, upstream.RouterOptions{}, f.candidate("fake"))
			f.fail(&mxFailure{Status: http.StatusTooManyRequests})

			oc := openai.NewClient(option.WithBaseURL(env.gw.URL+"/svc/v1"), option.WithAPIKey(env.gw.Key),
				option.WithMaxRetries(0), option.WithHTTPClient(env.tap.client()))
			_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "svc-fusion",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			var oe *openai.Error
			is.True(errors.As(err, &oe)) // an openai.Error
			is.Equal(oe.StatusCode, http.StatusTooManyRequests)
			is.Equal(oe.Code, "rate_limit_exceeded")
			is.Equal(oe.Response.Header.Get("Retry-After-Ms"), "1000")

			ac := anthropic.NewClient(anthropicoption.WithBaseURL(env.gw.URL+"/svc"), anthropicoption.WithAPIKey(env.gw.Key),
				anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(env.tap.client()))
			_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "svc-fusion", MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			var ae *anthropic.Error
			is.True(errors.As(err, &ae)) // an anthropic.Error
			is.Equal(ae.StatusCode, http.StatusTooManyRequests)
			is.Equal(string(ae.Type()), "rate_limit_error")
			is.Equal(ae.Response.Header.Get("Retry-After"), "1")

			gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: env.gw.Key, Backend: genai.BackendGeminiAPI,
				HTTPOptions: genai.HTTPOptions{BaseURL: env.gw.URL + "/svc/"}, HTTPClient: env.tap.client()})
			is.NoErr(err)
			_, err = gc.Models.GenerateContent(ctx, "svc-fusion", genai.Text("hi"), nil)
			var ge genai.APIError
			is.True(errors.As(err, &ge)) // a genai.APIError
			is.Equal(ge.Code, http.StatusTooManyRequests)
			is.Equal(ge.Status, "RESOURCE_EXHAUSTED")
			delay := ""
			for _, d := range ge.Details {
				if d["@type"] == "type.googleapis.com/google.rpc.RetryInfo" {
					delay, _ = d["retryDelay"].(string)
				}
			}
			is.Equal(delay, "1s") // RetryInfo

			// The router waited what the upstream asked (header or RetryInfo).
			for _, w := range env.sleeps.all() {
				is.Equal(w, time.Second)
			}
			is.Equal(len(env.sleeps.all()), 3) // one retry per call
			env.tap.assertClean(t)
		})
	}
}

// TestMatrix_UpstreamRetryThenSuccessIsInvisible: a failure before the
// first byte — an error status, or a stream whose first frame is an error
// — is retried, and the caller sees one successful call, billed once.
func TestMatrix_UpstreamRetryThenSuccessIsInvisible(t *testing.T) {
	for _, proto := range mxProtos {
		t.Run(string(proto), func(t *testing.T) {
			t.Parallel()
			f := newMXFake(t, proto)
			env := newMXEnv(t, upstream.RouterOptions{}, f.candidate("fake"))
			calls := 0
			for _, fl := range []mxFailure{{Status: 429, Times: 1}, {Status: 503, Times: 1}, {Status: 500, Times: 1}, {ErrorFirst: true, Times: 1}} {
				for _, r := range mxRoutes {
					for _, stream := range []bool{false, true} {
						if fl.ErrorFirst && !stream {
							continue
						}
						name := fmt.Sprint(fl.Status)
						if fl.ErrorFirst {
							name = "error-first"
						}
						t.Run(name+"/"+r.name(stream), func(t *testing.T) {
							is := is.New(t)
							f.fail(&fl)
							before := f.hits.Load()
							path, body := r.call(stream)
							resp, out := env.do(t, http.MethodPost, path, body)
							calls++
							is.Equal(resp.StatusCode, http.StatusOK)
							is.Equal(f.hits.Load()-before, int64(2)) // failed once, then served
							is.True(strings.Contains(mxStreamText(string(out)), mxText))
							is.True(!strings.Contains(string(out), `"error":{`)) // no trace of the failure
							is.True(!strings.Contains(string(out), "event: error"))
						})
					}
				}
			}
			f.fail(nil)
			is := is.New(t)
			mxSync(t, env.gw)
			var total int64
			for _, b := range env.gw.usage(t, "day").Data {
				total += b.Requests
			}
			is.Equal(total, int64(calls)) // one record per caller call, however many upstream attempts
			env.tap.assertClean(t)
		})
	}
}

// mxStreamText joins a body's text fragments: SSE frames split the reply,
// so the reply is searched with the JSON string boundaries removed.
func mxStreamText(s string) string {
	var b strings.Builder
	for _, key := range []string{`"content":"`, `"delta":"`, `"text":"`} {
		for rest := s; ; {
			i := strings.Index(rest, key)
			if i < 0 {
				break
			}
			rest = rest[i+len(key):]
			j := strings.IndexByte(rest, '"')
			if j < 0 {
				break
			}
			b.WriteString(rest[:j])
			rest = rest[j:]
		}
		if strings.Contains(b.String(), mxText) {
			return b.String()
		}
		b.Reset()
	}
	return s
}

// TestMatrix_UpstreamFallbackToAnotherProtocol: when the first candidate
// keeps failing, the call moves to the next one, which speaks another
// protocol, and the caller sees a normal reply, streamed or not.
func TestMatrix_UpstreamFallbackToAnotherProtocol(t *testing.T) {
	for i, proto := range mxProtos {
		next := mxProtos[(i+1)%len(mxProtos)]
		t.Run(string(proto)+"→"+string(next), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			first, second := newMXFake(t, proto), newMXFake(t, next)
			first.fail(&mxFailure{Status: http.StatusInternalServerError})
			env := newMXEnv(t, upstream.RouterOptions{}, first.candidate("first"), second.candidate("second"))
			calls := int64(0)
			for _, sf := range mxSurfaces {
				for _, stream := range []bool{false, true} {
					out := sf.send(t, env, mxCase{stream: stream})
					calls++
					is.Equal(out.Text, mxText) // served by the second candidate
					is.Equal(out.Finish, sf.stop)
					is.Equal(out.In, int64(mxInputTokens))
				}
			}
			// A tool call and its result cross protocols too.
			call := mxChat(t, env, mxCase{tools: true})
			final := mxChat(t, env, mxCase{tools: true, answer: &call})
			calls += 2
			is.True(strings.Contains(final.Text, `"temp_c":18`))
			mxCheckResultSent(t, second)

			is.Equal(first.hits.Load(), 2*calls) // each call: one try and one retry
			is.Equal(second.hits.Load(), calls)  // then the fallback, once
			env.tap.assertClean(t)
		})
	}
}

// TestMatrix_UpstreamCircuitBreaker: after BreakerThreshold failures in a
// row the first candidate is skipped and the second serves directly; past
// the cooldown one call probes the first again, and its success closes the
// breaker.
func TestMatrix_UpstreamCircuitBreaker(t *testing.T) {
	for i, proto := range mxProtos {
		next := mxProtos[(i+1)%len(mxProtos)]
		t.Run(string(proto)+"→"+string(next), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			clock := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			first, second := newMXFake(t, proto), newMXFake(t, next)
			first.fail(&mxFailure{Status: http.StatusServiceUnavailable})
			env := newMXEnv(t, upstream.RouterOptions{BreakerThreshold: 2, BreakerCooldown: time.Minute, Now: clock.Now},
				first.candidate("first"), second.candidate("second"))
			hits := func() [2]int64 { return [2]int64{first.hits.Load(), second.hits.Load()} }
			send := func(i int) mxOut {
				sf := mxSurfaces[i%len(mxSurfaces)]
				out := sf.send(t, env, mxCase{stream: i%2 == 1})
				is.Equal(out.Text, mxText)
				return out
			}

			send(0)
			is.Equal(hits(), [2]int64{2, 1}) // two failures open the breaker; the second candidate serves
			send(1)
			send(2)
			send(3)
			is.Equal(hits(), [2]int64{2, 4}) // the open breaker skips the first candidate: no more hits

			clock.Set(clock.Now().Add(2 * time.Minute))
			first.fail(nil)
			send(4)
			is.Equal(hits(), [2]int64{3, 4}) // past the cooldown, one call probes the first, and succeeds
			send(5)
			is.Equal(hits(), [2]int64{4, 4}) // closed again
			env.tap.assertClean(t)
		})
	}
}

// mxFirstID is the gateway id in a stream frame of any surface.
func mxFirstID(data string) string {
	var v struct {
		ID       string `json:"id"`
		Response struct {
			ID string `json:"id"`
		} `json:"response"`
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
		ResponseID string `json:"responseId"`
	}
	if json.Unmarshal([]byte(data), &v) != nil {
		return ""
	}
	for _, id := range []string{v.ID, v.Response.ID, v.Message.ID, v.ResponseID} {
		if id != "" {
			return id
		}
	}
	return ""
}

// TestMatrix_DisconnectCancelsUpstream: a caller that leaves mid-stream
// cancels the upstream request (the fake's handler sees its context done),
// for every upstream protocol and caller surface, and the call is still
// recorded, as canceled.
func TestMatrix_DisconnectCancelsUpstream(t *testing.T) {
	for _, proto := range mxProtos {
		for _, r := range mxRoutes {
			t.Run(string(proto)+"/"+r.surface, func(t *testing.T) {
				t.Parallel()
				is := is.New(t)
				f := newMXFake(t, proto)
				f.fail(&mxFailure{Hang: true})
				env := newMXEnv(t, upstream.RouterOptions{}, f.candidate("fake"))

				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				path, body := r.call(true)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.gw.URL+path, strings.NewReader(body))
				is.NoErr(err)
				req.Header.Set("Authorization", "Bearer "+env.gw.Key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := env.tap.client().Do(req)
				is.NoErr(err)
				is.Equal(resp.StatusCode, http.StatusOK)
				// Read until the first text, noting the call's id.
				id := ""
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					line := strings.TrimPrefix(sc.Text(), "data: ")
					if id == "" {
						id = mxFirstID(line)
					}
					if strings.Contains(line, "Paris") {
						break
					}
				}
				is.True(id != "") // the stream named the call
				cancel()          // the caller leaves
				resp.Body.Close()

				select {
				case <-f.canceled:
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream request was not cancelled")
				}
				g := env.generation(t, id)
				is.Equal(g.FinishReason, FinishCanceled) // recorded, as canceled
				is.True(g.Streamed)
				is.True(g.Usage.PromptTokens > 0) // billed for what it used
				is.Equal(f.hits.Load(), int64(1)) // never retried
				env.tap.assertClean(t)
			})
		}
	}
}

// TestLeak_CanaryNeverReachesCallers calls every endpoint — all surfaces,
// complete and streamed, tools and JSON, count tokens, models, generation,
// usage, credits, feedback, and calls whose upstream fails with each error
// status or mid-stream — and proves that the canary the fake upstream puts
// in its model name, ids, fingerprint, headers and error messages shows in
// no byte a caller reads, nor in any generation row.
func TestLeak_CanaryNeverReachesCallers(t *testing.T) {
	for _, proto := range mxProtos {
		t.Run(string(proto), func(t *testing.T) {
			t.Parallel()
			is := is.NewRelaxed(t)
			f := newMXFake(t, proto)
			env := newMXEnv(t, upstream.RouterOptions{}, f.candidate("fake"))
			post := func(path, body string, header ...string) (*http.Response, []byte) {
				return env.do(t, http.MethodPost, path, body, header...)
			}

			// Successes on every surface.
			for _, r := range mxRoutes {
				for _, stream := range []bool{false, true} {
					path, body := r.call(stream)
					resp, out := post(path, body)
					is.Equal(resp.StatusCode, http.StatusOK)
					is.True(strings.Contains(mxStreamText(string(out)), mxText))
				}
			}
			for _, sf := range mxSurfaces {
				for _, stream := range []bool{false, true} {
					call := sf.send(t, env, mxCase{stream: stream, tools: true})
					sf.send(t, env, mxCase{stream: stream, tools: true, answer: &call})
					sf.send(t, env, mxCase{stream: stream, json: true})
				}
			}

			// Failures: before the first byte, and mid-stream.
			for _, status := range []int{400, 401, 429, 500, 503, 529} {
				f.fail(&mxFailure{Status: status})
				for _, r := range mxRoutes {
					for _, stream := range []bool{false, true} {
						path, body := r.call(stream)
						resp, _ := post(path, body)
						is.True(resp.StatusCode >= 400) // an error envelope
					}
				}
			}
			f.fail(&mxFailure{MidStream: true})
			for _, r := range mxRoutes {
				path, body := r.call(true)
				resp, out := post(path, body)
				is.Equal(resp.StatusCode, http.StatusOK)
				is.True(strings.Contains(string(out), "Paris")) // the text before the failure
				is.True(strings.Contains(string(out), "error")) // then the surface's error frame
				// The first id in a stream is the call's (Responses item ids follow).
				ids := mxIDs(string(out))
				is.True(len(ids) > 0)
				if len(ids) > 0 {
					g := env.generation(t, ids[0])
					is.Equal(g.FinishReason, "error")     // recorded as failed
					is.True(g.Usage.CompletionTokens > 0) // billed for the text that reached the caller
					is.True(g.TotalCost != "0.000000")
				}
			}
			f.fail(nil)

			// Everything else a caller can read.
			mxSync(t, env.gw)
			ids := mxIDs(env.tap.bytes())
			is.True(len(ids) >= 30)
			for _, id := range ids {
				env.do(t, http.MethodGet, "/svc/v1/generation?id="+id, "")
			}
			resp, _ := post("/svc/v1/feedback", `{"id":"`+ids[0]+`","rating":"up","comment":"fine"}`)
			is.Equal(resp.StatusCode, http.StatusOK)
			for _, g := range []string{"day", "request_type", "application", "api_key"} {
				resp, _ := env.do(t, http.MethodGet, "/svc/v1/usage?group_by="+g, "")
				is.Equal(resp.StatusCode, http.StatusOK)
			}
			resp, _ = env.do(t, http.MethodGet, "/svc/v1/credits", "")
			is.Equal(resp.StatusCode, http.StatusOK)
			for _, m := range []struct {
				path   string
				header []string
			}{
				{"/svc/v1/models", nil},
				{"/svc/v1/models/svc-fusion", nil},
				{"/svc/v1/models", []string{"Anthropic-Version", "2023-06-01"}},
				{"/svc/v1/models/svc-fusion", []string{"Anthropic-Version", "2023-06-01"}},
				{"/svc/v1/models", []string{"X-Goog-Api-Key", env.gw.Key}},
				{"/svc/v1beta/models", nil},
				{"/svc/v1beta/models/svc-fusion", nil},
			} {
				resp, _ := env.do(t, http.MethodGet, m.path, "", m.header...)
				is.Equal(resp.StatusCode, http.StatusOK)
			}
			for _, c := range []struct{ path, body string }{
				{"/svc/v1/messages/count_tokens", mxRoutes[2].body},
				{"/svc/v1/responses/input_tokens", mxRoutes[1].body},
				{"/svc/v1beta/models/svc-fusion:countTokens", mxRoutes[3].body},
			} {
				resp, _ := post(c.path, c.body)
				is.Equal(resp.StatusCode, http.StatusOK)
			}
			env.do(t, http.MethodGet, "/svc/v1/responses/resp_0123456789", "")

			// Control: the same tap, reading the fake directly, does see
			// the canary, in headers and body alike.
			ctl := newMXTap()
			cr, err := ctl.client().Post(f.srv.URL+"/v1/messages", "application/json", strings.NewReader(`{}`))
			is.NoErr(err)
			_, _ = io.Copy(io.Discard, cr.Body)
			cr.Body.Close()
			raw := strings.ToLower(ctl.bytes())
			is.True(strings.Contains(raw, "x-canary-backend: "+mxCanaryModel)) // headers are tapped
			is.True(strings.Contains(raw, `"model":"`+mxCanaryModel+`"`) ||
				strings.Contains(raw, `"modelversion":"`+mxCanaryModel+`"`)) // and bodies

			seen := env.tap.bytes()
			is.True(strings.Contains(seen, mxText)) // the tap saw the replies
			is.True(f.hits.Load() > 60)             // and the fake sent its canary that often
			env.tap.assertClean(t)
			mxCheckRows(t, env, "svc-fusion")
		})
	}
}
