package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/svcgw/svcgw/classify"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// End-to-end tests of the chat-completions and Responses surfaces, driven by
// the official openai-go SDK against a real gateway with the fixture
// backend. Helpers carry an oai prefix: the package's other SDK tests live
// beside these.

// oaiClient is the SDK as a caller configures it for svcgw. Retries are
// off so each call reaches the gateway exactly once (metering is counted).
func oaiClient(gw *testGateway, key string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(gw.URL + "/svc/v1"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
	}, opts...)...)
}

func oaiParams(model, text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}

// oaiWeatherSchema is the JSON Schema of the weather tool's arguments.
var oaiWeatherSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city": map[string]any{"type": "string", "minLength": 2},
		"unit": map[string]any{"type": "string", "enum": []any{"celsius", "fahrenheit"}},
		"days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7},
	},
	"required":             []any{"city", "unit"},
	"additionalProperties": false,
}

// oaiPersonSchema is a response schema for JSON mode.
var oaiPersonSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"name":    map[string]any{"type": "string"},
		"age":     map[string]any{"type": "integer", "minimum": 0},
		"email":   map[string]any{"type": "string", "format": "email"},
		"hobbies": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1},
	},
	"required":             []any{"name", "age", "hobbies"},
	"additionalProperties": false,
}

var oaiWeatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Current weather in a city"),
	Parameters:  oaiWeatherSchema,
})

func oaiJSONSchemaFormat() openai.ChatCompletionNewParamsResponseFormatUnion {
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: oaiPersonSchema, Strict: openai.Bool(true)},
	}}
}

// oaiValidate checks that doc is JSON valid against schema.
func oaiValidate(t *testing.T, schema map[string]any, doc string) {
	t.Helper()
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", sdoc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("not JSON: %v: %q", err, doc)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("%q does not validate: %v", doc, err)
	}
}

// The inline files of the vision and document calls.
var (
	oaiPNG     = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0x0d, 'I', 'H', 'D', 'R'}
	oaiPNGURL  = "data:image/png;base64," + base64.StdEncoding.EncodeToString(oaiPNG)
	oaiPDF     = []byte("%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Count 0/Kids[]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")
	oaiPDFURL  = "data:application/pdf;base64," + base64.StdEncoding.EncodeToString(oaiPDF)
	oaiLongTxt = strings.Repeat("lorem ipsum dolor sit amet ", (4*classify.LongThreshold)/27+100)
)

// oaiGeneration polls GET /svc/v1/generation until the record of id is
// there: a streamed call is metered after its last frame, so a caller
// that asks at once may be a moment early.
func oaiGeneration(t *testing.T, gw *testGateway, id string) generation {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, body := gw.do(t, http.MethodGet, "/svc/v1/generation?id="+url.QueryEscape(id), "")
		if r.StatusCode == http.StatusOK {
			var g struct {
				Data generation `json:"data"`
			}
			if err := json.Unmarshal(body, &g); err != nil {
				t.Fatalf("generation %s: %v: %s", id, err, body)
			}
			return g.Data
		}
		if r.StatusCode != http.StatusNotFound || time.Now().After(deadline) {
			t.Fatalf("generation %s: status %d: %s", id, r.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// oaiEnvelope checks an OpenAI error envelope: all four keys present, and
// returns the error object.
func oaiEnvelope(t *testing.T, body []byte) (typ string, param, code *string) {
	t.Helper()
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("error body is not an OpenAI envelope: %v: %s", err, body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; !ok {
			t.Errorf("error envelope lacks %q: %s", k, body)
		}
	}
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	if e.Error.Message == "" {
		t.Errorf("error without message: %s", body)
	}
	return e.Error.Type, e.Error.Param, e.Error.Code
}

// oaiSSE splits a finished SSE body into its data payloads (event lines
// are checked to match the JSON type when present).
func oaiSSE(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	for _, frame := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		var event, data string
		for _, line := range strings.Split(frame, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, ":"):
			default:
				t.Fatalf("unexpected SSE line %q", line)
			}
		}
		if event != "" {
			var typed struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal([]byte(data), &typed); err != nil || typed.Type != event {
				t.Errorf("event %q carries %s", event, data)
			}
		}
		out = append(out, data)
	}
	return out
}

func oaiRawJSON(t *testing.T, f interface{ Raw() string }) string {
	t.Helper()
	return f.Raw()
}

func TestChatSDK_NonStreaming(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	var hr *http.Response
	c, err := client.Chat.Completions.New(context.Background(), oaiParams("svc-fusion", "Say hello."), option.WithResponseInto(&hr))
	is.NoErr(err)
	is.Equal(hr.Header.Get("X-SVC-Request-Type"), "pro")
	is.True(hr.Header.Get("X-Request-Id") != "") // the SDK surfaces it
	is.True(strings.HasPrefix(c.ID, "chatcmpl-"))
	is.Equal(string(c.Object), "chat.completion")
	is.Equal(c.Model, "svc-fusion")
	is.True(c.Created > 0)
	is.Equal(len(c.Choices), 1)
	ch := c.Choices[0]
	is.Equal(ch.FinishReason, "stop")
	is.Equal(string(ch.Message.Role), "assistant")
	is.True(strings.Contains(ch.Message.Content, `Fixture reply to: "Say hello."`))
	is.True(c.Usage.PromptTokens > 0 && c.Usage.CompletionTokens > 0)
	is.Equal(c.Usage.TotalTokens, c.Usage.PromptTokens+c.Usage.CompletionTokens)
	// message.reasoning is null when there is none, and reasoning_content
	// never appears.
	is.Equal(oaiRawJSON(t, ch.Message.JSON.ExtraFields["reasoning"]), "null")
	_, rc := ch.Message.JSON.ExtraFields["reasoning_content"]
	is.True(!rc)
}

// openai-node's "create: only required params" sends a developer message
// alone, which OpenAI takes: so does svcgw (it was a 400 "messages must
// contain at least one user or assistant message"), on both endpoints.
func TestChatSDK_DeveloperMessageAlone(t *testing.T) {
	is := is.New(t)
	gw, rec := newRecordingGateway(t)
	client := oaiClient(gw, gw.Key)
	c, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.DeveloperMessage("string")},
	})
	is.NoErr(err)
	is.Equal(c.Choices[0].FinishReason, "stop")
	is.Equal(rec.lastRequest().System[0].Text, "string")
	is.Equal(len(rec.lastRequest().Messages), 0)

	r, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "gpt-4o",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("string", responses.EasyInputMessageRoleDeveloper)}},
		Store: openai.Bool(false),
	})
	is.NoErr(err)
	is.Equal(string(r.Status), "completed")
	is.Equal(rec.lastRequest().System[0].Text, "string")
}

func TestChatSDK_StreamingIncludeUsage(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	ctx := context.Background()
	params := oaiParams("svc-fusion", "Tell me about the sea, in a few words.")
	params.Temperature = openai.Float(0.2)
	params.MaxCompletionTokens = openai.Int(500)

	want, err := client.Chat.Completions.New(ctx, params)
	is.NoErr(err)

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	var hr *http.Response
	stream := client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&hr))
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	chunks, usageChunks := 0, 0
	for stream.Next() {
		chunk := stream.Current()
		is.True(acc.AddChunk(chunk)) // the SDK accumulator accepts every chunk
		chunks++
		if len(chunk.Choices) == 0 {
			usageChunks++
			is.True(chunk.JSON.Usage.Valid()) // the choices-less chunk carries usage
		}
	}
	is.NoErr(stream.Err())
	is.Equal(hr.Header.Get("Content-Type"), "text/event-stream")
	is.Equal(hr.Header.Get("X-SVC-Request-Type"), "pro")
	is.True(chunks >= 5)     // several frames
	is.Equal(usageChunks, 1) // exactly one usage chunk

	got := acc.ChatCompletion
	is.True(strings.HasPrefix(got.ID, "chatcmpl-"))
	is.True(got.ID != want.ID) // every call gets its own id
	is.Equal(got.Model, "svc-fusion")
	is.Equal(got.Choices[0].Message.Content, want.Choices[0].Message.Content)
	is.Equal(got.Choices[0].FinishReason, want.Choices[0].FinishReason)
	is.Equal(got.Usage.PromptTokens, want.Usage.PromptTokens)
	is.Equal(got.Usage.CompletionTokens, want.Usage.CompletionTokens)
	is.Equal(got.Usage.TotalTokens, want.Usage.TotalTokens)
	is.Equal(got.Usage.PromptTokensDetails.CachedTokens, want.Usage.PromptTokensDetails.CachedTokens)

	g := oaiGeneration(t, gw, got.ID)
	is.True(g.Streamed)
	is.Equal(g.FinishReason, "stop")
	is.Equal(int64(g.Usage.PromptTokens), got.Usage.PromptTokens)
	is.Equal(int64(g.Usage.CompletionTokens), got.Usage.CompletionTokens)
}

func TestChatSDK_Tools(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	ctx := context.Background()
	params := oaiParams("svc-fusion", "What is the weather in Paris?")
	params.Tools = []openai.ChatCompletionToolUnionParam{oaiWeatherTool}
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}

	var hr *http.Response
	c, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&hr))
	is.NoErr(err)
	is.Equal(hr.Header.Get("X-SVC-Request-Type"), "code")
	is.Equal(c.Choices[0].FinishReason, "tool_calls")
	msg := c.Choices[0].Message
	is.Equal(len(msg.ToolCalls), 1)
	call := msg.ToolCalls[0]
	is.True(call.ID != "")
	is.Equal(call.Function.Name, "get_weather")
	oaiValidate(t, oaiWeatherSchema, call.Function.Arguments) // arguments match the tool's schema

	// The same call streamed: the SDK accumulator reassembles the argument
	// deltas into the same call.
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		is.True(acc.AddChunk(stream.Current()))
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	is.NoErr(stream.Err())
	stream.Close()
	is.Equal(len(finished), 1)
	is.Equal(finished[0].Name, "get_weather")
	is.Equal(finished[0].Arguments, call.Function.Arguments)
	is.Equal(acc.Choices[0].FinishReason, "tool_calls")

	// The tool result goes back; the reply is text about it.
	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(`{"temp_c":18,"sky":"clear"}`, call.ID))
	c2, err := client.Chat.Completions.New(ctx, params)
	is.NoErr(err)
	is.Equal(c2.Choices[0].FinishReason, "stop")
	is.Equal(len(c2.Choices[0].Message.ToolCalls), 0)
	is.True(strings.Contains(c2.Choices[0].Message.Content, "Fixture received the result of get_weather"))
	is.True(strings.Contains(c2.Choices[0].Message.Content, "temp_c"))
}

func TestChatSDK_JSONSchema(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	params := oaiParams("svc-fusion", "Invent a person.")
	params.ResponseFormat = oaiJSONSchemaFormat()
	var hr *http.Response
	c, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&hr))
	is.NoErr(err)
	is.Equal(hr.Header.Get("X-SVC-Request-Type"), "json")
	is.Equal(c.Choices[0].FinishReason, "stop")
	oaiValidate(t, oaiPersonSchema, c.Choices[0].Message.Content)
	var p struct {
		Name string `json:"name"`
		Age  int    `json:"age"`
	}
	is.NoErr(json.Unmarshal([]byte(c.Choices[0].Message.Content), &p)) // content parses
}

func TestChatSDK_ImageInput(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	for _, u := range []string{oaiPNGURL, "https://example.com/cat.jpg"} {
		params := openai.ChatCompletionNewParams{
			Model: "gpt-4o-mini", // a flash-named id: vision still wins
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("What is in this picture?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: u, Detail: "low"}),
			})},
		}
		var hr *http.Response
		c, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&hr))
		is.NoErr(err)
		is.Equal(hr.Header.Get("X-SVC-Request-Type"), "vision")
		is.Equal(c.Model, "gpt-4o-mini")
		is.True(strings.Contains(c.Choices[0].Message.Content, "What is in this picture?"))
	}
}

func TestChatSDK_ReasoningEffort(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	params := oaiParams("svc-fusion", "Why is the sky blue?")
	params.ReasoningEffort = shared.ReasoningEffortHigh
	var hr *http.Response
	c, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&hr))
	is.NoErr(err)
	is.Equal(hr.Header.Get("X-SVC-Request-Type"), "reason")
	msg := c.Choices[0].Message
	var reasoning string
	is.NoErr(json.Unmarshal([]byte(oaiRawJSON(t, msg.JSON.ExtraFields["reasoning"])), &reasoning)) // message.reasoning is a string
	is.True(strings.Contains(reasoning, `Thinking about: "Why is the sky blue?"`))
	_, rc := msg.JSON.ExtraFields["reasoning_content"]
	is.True(!rc) // reasoning_content never appears
	is.True(c.Usage.CompletionTokensDetails.ReasoningTokens > 0)
	is.True(c.Usage.CompletionTokens > c.Usage.CompletionTokensDetails.ReasoningTokens)

	// Streamed, read off the wire: delta.reasoning chunks, then content.
	resp, body := gw.do(t, http.MethodPost, "/svc/v1/chat/completions",
		`{"model":"svc-fusion","stream":true,"reasoning_effort":"high","messages":[{"role":"user","content":"Why is the sky blue?"}]}`)
	is.Equal(resp.StatusCode, http.StatusOK)
	is.Equal(resp.Header.Get("X-SVC-Request-Type"), "reason")
	frames := oaiSSE(t, body)
	is.Equal(frames[len(frames)-1], "[DONE]")
	var streamedReasoning, content string
	reasoningChunks, firstContent, lastReasoning := 0, -1, -1
	for i, f := range frames[:len(frames)-1] {
		var chunk struct {
			Choices []struct {
				Delta map[string]json.RawMessage `json:"delta"`
			} `json:"choices"`
		}
		is.NoErr(json.Unmarshal([]byte(f), &chunk))
		if len(chunk.Choices) == 0 {
			continue
		}
		d := chunk.Choices[0].Delta
		_, bad := d["reasoning_content"]
		is.True(!bad) // no reasoning_content in deltas
		if r, ok := d["reasoning"]; ok {
			var s string
			is.NoErr(json.Unmarshal(r, &s)) // delta.reasoning is a string
			streamedReasoning += s
			reasoningChunks++
			lastReasoning = i
		}
		if r, ok := d["content"]; ok {
			var s string
			is.NoErr(json.Unmarshal(r, &s))
			content += s
			if firstContent < 0 {
				firstContent = i
			}
		}
	}
	is.True(reasoningChunks >= 2)          // reasoning arrives in several chunks
	is.True(firstContent > lastReasoning)  // every reasoning chunk comes before the first content
	is.Equal(streamedReasoning, reasoning) // the same reasoning as the complete reply
	is.Equal(content, msg.Content)
}

func TestResponsesSDK_NonStreaming(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	var hr *http.Response
	r, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model:        "svc-fusion",
		Instructions: openai.String("Be brief."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
		Store:        openai.Bool(false),
	}, option.WithResponseInto(&hr))
	is.NoErr(err)
	is.Equal(hr.Header.Get("X-SVC-Request-Type"), "pro")
	is.True(strings.HasPrefix(r.ID, "resp_"))
	is.Equal(string(r.Object), "response")
	is.Equal(string(r.Status), "completed")
	is.Equal(r.Model, "svc-fusion")
	is.True(strings.Contains(r.OutputText(), `Fixture reply to: "Say hello."`))
	is.True(r.Usage.InputTokens > 0 && r.Usage.OutputTokens > 0)
	is.Equal(r.Usage.TotalTokens, r.Usage.InputTokens+r.Usage.OutputTokens)
	is.Equal(oaiRawJSON(t, r.JSON.ExtraFields["store"]), "false") // served statelessly
}

func TestResponsesSDK_Streaming(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model:     "svc-fusion",
		Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("Why is the sky blue?")},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortMedium, Summary: shared.ReasoningSummaryAuto},
	}
	want, err := client.Responses.New(ctx, params)
	is.NoErr(err)

	var hr *http.Response
	stream := client.Responses.NewStreaming(ctx, params, option.WithResponseInto(&hr))
	defer stream.Close()
	var types []string
	var text, summary string
	var final responses.Response
	open := map[int64]string{} // output_index → item id, while open
	seq := int64(0)
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		is.Equal(ev.SequenceNumber, seq) // one counter from 0
		seq++
		switch e := ev.AsAny().(type) {
		case responses.ResponseOutputItemAddedEvent:
			is.Equal(e.OutputIndex, int64(len(open)+oaiCountDone(types))) // append-only
			open[e.OutputIndex] = e.Item.ID
		case responses.ResponseOutputItemDoneEvent:
			is.Equal(open[e.OutputIndex], e.Item.ID)
			delete(open, e.OutputIndex)
		case responses.ResponseTextDeltaEvent:
			is.Equal(open[e.OutputIndex], e.ItemID)
			text += e.Delta
		case responses.ResponseReasoningSummaryTextDeltaEvent:
			is.Equal(open[e.OutputIndex], e.ItemID)
			summary += e.Delta
		case responses.ResponseCompletedEvent:
			final = e.Response
		}
	}
	is.NoErr(stream.Err())
	is.Equal(hr.Header.Get("X-SVC-Request-Type"), "reason")
	is.Equal(types[0], "response.created")
	is.Equal(types[1], "response.in_progress")
	is.Equal(types[len(types)-1], "response.completed") // response.completed is last
	is.Equal(len(open), 0)                              // every item was closed
	// Reasoning before the message.
	firstText := oaiIndexOf(types, "response.output_text.delta")
	is.True(oaiIndexOf(types, "response.reasoning_summary_text.delta") < firstText)
	is.True(summary != "")
	is.Equal(text, final.OutputText())
	is.Equal(final.OutputText(), want.OutputText()) // same as the complete reply
	is.Equal(final.Usage.InputTokens, want.Usage.InputTokens)
	is.Equal(final.Usage.OutputTokens, want.Usage.OutputTokens)
	is.Equal(string(final.Status), "completed")
	is.Equal(final.Output[0].Type, "reasoning")
	is.True(final.Output[0].EncryptedContent != "") // replayable with store:false
}

func oaiCountDone(types []string) int {
	n := 0
	for _, t := range types {
		if t == "response.output_item.done" {
			n++
		}
	}
	return n
}

func oaiIndexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func TestResponsesSDK_Tools(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	ctx := context.Background()
	question := responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser)
	params := responses.ResponseNewParams{
		Model: "svc-fusion",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{question}},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name: "get_weather", Description: openai.String("Current weather in a city"),
			Parameters: oaiWeatherSchema, Strict: openai.Bool(false),
		}}},
		Store: openai.Bool(false),
	}
	var hr *http.Response
	r, err := client.Responses.New(ctx, params, option.WithResponseInto(&hr))
	is.NoErr(err)
	is.Equal(hr.Header.Get("X-SVC-Request-Type"), "code")
	var call responses.ResponseFunctionToolCall
	for _, it := range r.Output {
		if it.Type == "function_call" {
			call = it.AsFunctionCall()
		}
	}
	is.Equal(call.Name, "get_weather")
	is.True(call.CallID != "")
	oaiValidate(t, oaiWeatherSchema, call.Arguments)

	// Streamed: the argument deltas add up to the same arguments.
	stream := client.Responses.NewStreaming(ctx, params)
	var args, doneArgs string
	for stream.Next() {
		switch e := stream.Current().AsAny().(type) {
		case responses.ResponseFunctionCallArgumentsDeltaEvent:
			args += e.Delta
		case responses.ResponseFunctionCallArgumentsDoneEvent:
			doneArgs = e.Arguments
		}
	}
	is.NoErr(stream.Err())
	stream.Close()
	is.Equal(args, call.Arguments)
	is.Equal(doneArgs, call.Arguments)

	// Stateless round trip: replay the call and send its output.
	params.Input.OfInputItemList = responses.ResponseInputParam{
		question,
		responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
		{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: openai.String(call.CallID),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(`{"temp_c":18}`)},
		}},
	}
	r2, err := client.Responses.New(ctx, params)
	is.NoErr(err)
	is.True(strings.Contains(r2.OutputText(), "Fixture received the result of get_weather"))
}

func TestResponsesSDK_JSONSchema(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	var hr *http.Response
	r, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "svc-fusion",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Invent a person.")},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "person", Schema: oaiPersonSchema, Strict: openai.Bool(true)},
		}},
	}, option.WithResponseInto(&hr))
	is.NoErr(err)
	is.Equal(hr.Header.Get("X-SVC-Request-Type"), "json")
	oaiValidate(t, oaiPersonSchema, r.OutputText())
	is.Equal(r.Text.Format.Type, "json_schema") // the format is echoed
}

func TestResponsesSDK_PreviousResponseIDRefused(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model:              "svc-fusion",
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")},
		PreviousResponseID: openai.String("resp_abc"),
	})
	var apiErr *openai.Error
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.StatusCode, http.StatusBadRequest)
	is.Equal(apiErr.Type, "invalid_request_error")
	is.Equal(apiErr.Param, "previous_response_id")
}

func TestOpenAISDK_ModelsList(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	page, err := client.Models.List(context.Background())
	is.NoErr(err)
	lim := gw.Fixture.Limits()
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		is.Equal(string(m.Object), "model")
		is.True(m.OwnedBy != "")
		is.Equal(oaiRawJSON(t, m.JSON.ExtraFields["context_length"]), fmt.Sprint(lim.ContextLength))
		is.Equal(oaiRawJSON(t, m.JSON.ExtraFields["root"]), `"svc-fusion"`)
		var tp struct {
			ContextLength       *int `json:"context_length"`
			MaxCompletionTokens *int `json:"max_completion_tokens"`
		}
		is.NoErr(json.Unmarshal([]byte(oaiRawJSON(t, m.JSON.ExtraFields["top_provider"])), &tp))
		is.True(tp.ContextLength != nil && tp.MaxCompletionTokens != nil) // top_provider limits present
		is.Equal(*tp.ContextLength, lim.ContextLength)
		is.Equal(*tp.MaxCompletionTokens, lim.MaxCompletionTokens)
		var params []string
		is.NoErr(json.Unmarshal([]byte(oaiRawJSON(t, m.JSON.ExtraFields["supported_parameters"])), &params))
		for _, p := range []string{"max_tokens", "temperature", "top_p", "stop", "stream", "response_format", "reasoning_effort", "reasoning", "tools", "tool_choice"} {
			is.True(oaiContains(params, p)) // supported_parameters lists p
		}
	}
	is.Equal(ids, []string{"svc-fusion", "svc-saver", "svc-max"})

	// Raw, the list wrapper itself.
	resp, body := gw.do(t, http.MethodGet, "/svc/v1/models", "")
	is.Equal(resp.StatusCode, http.StatusOK)
	var list struct {
		Object string            `json:"object"`
		Data   []json.RawMessage `json:"data"`
	}
	is.NoErr(json.Unmarshal(body, &list))
	is.Equal(list.Object, "list")
	is.Equal(len(list.Data), 3)
}

func oaiContains(xs []string, x string) bool { return oaiIndexOf(xs, x) >= 0 }

// oaiTypeCase is one request type reached on the chat surface.
type oaiTypeCase struct {
	want   llm.RequestType
	name   string
	params func() openai.ChatCompletionNewParams
}

var oaiTypeCases = []oaiTypeCase{
	{llm.TypeVision, "image part", func() openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "svc-fusion", Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("Describe."),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: oaiPNGURL}),
			})}}
	}},
	{llm.TypeDocument, "file PDF, beating an image and tools", func() openai.ChatCompletionNewParams {
		p := openai.ChatCompletionNewParams{Model: "svc-saver", Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("Summarize the report."),
				openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{FileData: openai.String(oaiPDFURL), Filename: openai.String("report.pdf")}),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: oaiPNGURL}),
			})}}
		p.Tools = []openai.ChatCompletionToolUnionParam{oaiWeatherTool}
		return p
	}},
	{llm.TypeLong, "a prompt over the long threshold", func() openai.ChatCompletionNewParams {
		return oaiParams("svc-fusion", oaiLongTxt)
	}},
	{llm.TypeCode, "tools offered", func() openai.ChatCompletionNewParams {
		p := oaiParams("svc-fusion", "Weather in Paris?")
		p.Tools = []openai.ChatCompletionToolUnionParam{oaiWeatherTool}
		return p
	}},
	{llm.TypeJSON, "json_schema response format", func() openai.ChatCompletionNewParams {
		p := oaiParams("svc-fusion", "Invent a person.")
		p.ResponseFormat = oaiJSONSchemaFormat()
		return p
	}},
	{llm.TypeReason, "reasoning_effort", func() openai.ChatCompletionNewParams {
		p := oaiParams("svc-fusion", "Prove it.")
		p.ReasoningEffort = shared.ReasoningEffortMedium
		return p
	}},
	{llm.TypeFlash, "svc-saver", func() openai.ChatCompletionNewParams { return oaiParams("svc-saver", "Hi.") }},
	{llm.TypeFlash, "a mini-named id", func() openai.ChatCompletionNewParams { return oaiParams("gpt-4o-mini", "Hi.") }},
	{llm.TypePro, "svc-fusion", func() openai.ChatCompletionNewParams { return oaiParams("svc-fusion", "Hi.") }},
	{llm.TypePro, "svc-max", func() openai.ChatCompletionNewParams { return oaiParams("svc-max", "Hi.") }},
}

func TestChat_EveryRequestType(t *testing.T) {
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	seen := map[llm.RequestType]bool{}
	for _, tc := range oaiTypeCases {
		t.Run(string(tc.want)+": "+tc.name, func(t *testing.T) {
			is := is.New(t)
			var hr *http.Response
			c, err := client.Chat.Completions.New(context.Background(), tc.params(), option.WithResponseInto(&hr))
			is.NoErr(err)
			is.Equal(hr.Header.Get("X-SVC-Request-Type"), string(tc.want))
			is.Equal(oaiGeneration(t, gw, c.ID).RequestType, string(tc.want)) // recorded with the same type

			// Streamed, the header is there too.
			var shr *http.Response
			stream := client.Chat.Completions.NewStreaming(context.Background(), tc.params(), option.WithResponseInto(&shr))
			for stream.Next() {
			}
			is.NoErr(stream.Err())
			stream.Close()
			is.Equal(shr.Header.Get("X-SVC-Request-Type"), string(tc.want))
			seen[tc.want] = true
		})
	}
	for _, rt := range llm.RequestTypes {
		// Embeddings have their own endpoint (embed_sdk_test.go).
		if !seen[rt] && rt != llm.TypeEmbedding {
			t.Errorf("request type %s not reached on the chat surface", rt)
		}
	}
}

func TestChat_ModelEcho(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	ctx := context.Background()
	const model = "acme/never-heard-of-it-7b"
	c, err := client.Chat.Completions.New(ctx, oaiParams(model, "Hi."))
	is.NoErr(err) // an unknown id is never an error
	is.Equal(c.Model, model)

	stream := client.Chat.Completions.NewStreaming(ctx, oaiParams(model, "Hi."))
	n := 0
	for stream.Next() {
		is.Equal(stream.Current().Model, model) // every chunk echoes it
		n++
	}
	is.NoErr(stream.Err())
	stream.Close()
	is.True(n > 0)

	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi.")}})
	is.NoErr(err)
	is.Equal(r.Model, model)
}

func TestChat_IDAcceptedByGenerationAndFeedback(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	client := oaiClient(gw, gw.Key)
	ctx := context.Background()

	c, err := client.Chat.Completions.New(ctx, oaiParams("svc-fusion", "Hi."))
	is.NoErr(err)
	stream := client.Chat.Completions.NewStreaming(ctx, oaiParams("svc-fusion", "Hi again."))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	is.NoErr(stream.Err())
	stream.Close()
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "svc-fusion",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi.")}})
	is.NoErr(err)

	for _, tc := range []struct {
		id       string
		streamed bool
	}{{c.ID, false}, {acc.ID, true}, {r.ID, false}} {
		g := oaiGeneration(t, gw, tc.id)
		is.Equal(g.ID, tc.id)
		is.Equal(g.RequestType, "pro")
		is.Equal(g.Streamed, tc.streamed)
		is.Equal(g.FinishReason, "stop")
		is.Equal(g.Application, "test-key")
		is.Equal(gw.feedback(t, tc.id, "up"), http.StatusOK)
		is.Equal(gw.feedback(t, tc.id, "down"), http.StatusOK) // a second rating updates the first
	}
	is.Equal(gw.feedback(t, "chatcmpl-unknown", "up"), http.StatusNotFound)
	resp, _ := gw.do(t, http.MethodGet, "/svc/v1/generation?id=chatcmpl-unknown", "")
	is.Equal(resp.StatusCode, http.StatusNotFound)
}

func TestChat_BadInput400(t *testing.T) {
	gw := newTestGateway(t)
	before := gw.credits(t)
	cases := []struct {
		name, path, body, param string
	}{
		{"malformed JSON", "/svc/v1/chat/completions", `{"model":"svc-fusion","messages":[`, ""},
		{"missing messages", "/svc/v1/chat/completions", `{"model":"svc-fusion"}`, "messages"},
		{"empty messages", "/svc/v1/chat/completions", `{"model":"svc-fusion","messages":[]}`, "messages"},
		{"unknown role", "/svc/v1/chat/completions", `{"model":"svc-fusion","messages":[{"role":"wizard","content":"hi"}]}`, "messages[0].role"},
		{"content of the wrong type", "/svc/v1/chat/completions", `{"model":"svc-fusion","messages":[{"role":"user","content":42}]}`, "messages.content"},
		{"temperature of the wrong type", "/svc/v1/chat/completions", `{"model":"svc-fusion","temperature":"hot","messages":[{"role":"user","content":"hi"}]}`, "temperature"},
		{"n above 1", "/svc/v1/chat/completions", `{"model":"svc-fusion","n":3,"messages":[{"role":"user","content":"hi"}]}`, "n"},
		{"stream_options without stream", "/svc/v1/chat/completions", `{"model":"svc-fusion","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "stream_options"},
		{"file_id", "/svc/v1/chat/completions", `{"model":"svc-fusion","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, "messages[0].content[0].file.file_id"},
		{"bad data URL", "/svc/v1/chat/completions", `{"model":"svc-fusion","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,@@"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"Responses without input", "/svc/v1/responses", `{"model":"svc-fusion"}`, "input"},
		{"Responses previous_response_id", "/svc/v1/responses", `{"model":"svc-fusion","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id"},
		{"Responses malformed JSON", "/svc/v1/responses", `{"model":`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			resp, body := gw.do(t, http.MethodPost, tc.path, tc.body)
			is.Equal(resp.StatusCode, http.StatusBadRequest)
			is.Equal(resp.Header.Get("Content-Type"), "application/json")
			typ, param, _ := oaiEnvelope(t, body)
			is.Equal(typ, "invalid_request_error")
			if tc.param == "" {
				is.Equal(param, nil) // param is null
			} else {
				is.True(param != nil)
				is.Equal(*param, tc.param)
			}
		})
	}
	// Through the SDK: a typed 400 error naming the param.
	is := is.New(t)
	client := oaiClient(gw, gw.Key)
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "svc-fusion",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, N: openai.Int(2)})
	var apiErr *openai.Error
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.StatusCode, http.StatusBadRequest)
	is.Equal(apiErr.Param, "n")
	is.Equal(gw.credits(t), before) // bad requests cost nothing
}

func TestChat_Unauthorized401(t *testing.T) {
	gw := newTestGateway(t)
	for _, path := range []string{"/svc/v1/chat/completions", "/svc/v1/responses", "/svc/v1/models", "/v1/chat/completions"} {
		method, body := http.MethodPost, `{"model":"svc-fusion","messages":[{"role":"user","content":"hi"}],"input":"hi"}`
		if strings.HasSuffix(path, "/models") {
			method, body = http.MethodGet, ""
		}
		for _, auth := range []struct{ name, value string }{
			{"missing key", ""},
			{"unknown key", "Bearer llm_live_0000000000000000000000000000"},
			{"not a bearer token", "Basic dXNlcjpwYXNz"},
		} {
			t.Run(path+" "+auth.name, func(t *testing.T) {
				is := is.New(t)
				resp, b := gw.do(t, method, path, body, "Authorization", auth.value)
				is.Equal(resp.StatusCode, http.StatusUnauthorized)
				typ, _, code := oaiEnvelope(t, b)
				is.Equal(typ, "invalid_request_error")
				is.True(code != nil && *code == "invalid_api_key")
			})
		}
	}
	is := is.New(t)
	bogus := oaiClient(gw, "llm_live_bogus")
	_, err := bogus.Chat.Completions.New(context.Background(), oaiParams("svc-fusion", "hi"))
	var apiErr *openai.Error
	is.True(errors.As(err, &apiErr))
	is.Equal(apiErr.StatusCode, http.StatusUnauthorized)
	is.Equal(apiErr.Code, "invalid_api_key")
}

// oaiCancelSpy wraps a backend and reports when a stream it served ended
// because its context was cancelled.
type oaiCancelSpy struct {
	upstream.Backend
	once     sync.Once
	canceled chan struct{}
}

var _ upstream.Backend = (*oaiCancelSpy)(nil)

func (b *oaiCancelSpy) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	s, err := b.Backend.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return &oaiSpyStream{Stream: s, ctx: ctx, spy: b}, nil
}

type oaiSpyStream struct {
	upstream.Stream
	ctx context.Context
	spy *oaiCancelSpy
}

func (s *oaiSpyStream) Next() bool {
	if s.Stream.Next() {
		return true
	}
	if s.ctx.Err() != nil {
		s.spy.once.Do(func() { close(s.spy.canceled) })
	}
	return false
}

// oaiWithBackend routes every call to b.
func oaiWithBackend(b upstream.Backend, lim upstream.Limits) gatewayOption {
	return func(o *Options) {
		o.Router = upstream.NewRouter([]upstream.Candidate{{Name: "spy", Backend: b, Limits: lim}})
	}
}

func TestChat_StreamDisconnectIsMetered(t *testing.T) {
	is := is.New(t)
	slow := fixture.New(fixture.Options{TokensPerSecond: 8})
	spy := &oaiCancelSpy{Backend: slow, canceled: make(chan struct{})}
	gw := newTestGateway(t, oaiWithBackend(spy, slow.Limits()))
	client := oaiClient(gw, gw.Key)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	params := oaiParams("svc-fusion", "Tell me a long story about a lighthouse keeper and the sea.")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var id string
	for stream.Next() {
		chunk := stream.Current()
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			id = chunk.ID
			cancel() // the caller leaves after the first content chunk
			break
		}
	}
	stream.Close()
	is.True(strings.HasPrefix(id, "chatcmpl-"))

	select {
	case <-spy.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream stream did not see its context cancelled")
	}
	g := oaiGeneration(t, gw, id)
	is.Equal(g.FinishReason, FinishCanceled) // recorded as canceled
	is.True(g.Streamed)
	is.Equal(g.RequestType, "pro")
	is.True(g.Usage.PromptTokens > 0)     // billed for the prompt
	is.True(g.Usage.CompletionTokens > 0) // and for what was generated before the caller left
	cost, _, err := apd.NewFromString(g.TotalCost)
	is.NoErr(err)
	is.True(cost.Sign() > 0) // a non-zero cost

	// The charge reached the balance.
	var want apd.Decimal
	_, err = apd.BaseContext.Sub(&want, apd.New(10, 0), cost)
	is.NoErr(err)
	oaiSameMoney(t, "balance", gw.credits(t).Balance, &want)
}

// oaiSameMoney checks that a six-decimal USD string equals want.
func oaiSameMoney(t *testing.T, what, got string, want *apd.Decimal) {
	t.Helper()
	g, _, err := apd.NewFromString(got)
	if err != nil {
		t.Fatalf("%s %q: %v", what, got, err)
	}
	if g.Cmp(want) != 0 {
		t.Errorf("%s = %s, want %s", what, got, want.Text('f'))
	}
	if i := strings.IndexByte(got, '.'); i < 0 || len(got)-i-1 != 6 {
		t.Errorf("%s %q does not have six decimal places", what, got)
	}
}

// oaiOutcome is what one call of the scripted series returned and should
// have been recorded as.
type oaiOutcome struct {
	id, requestType, app, keyID string
	streamed                    bool
	in, out, cached             int64
}

func TestChat_ScriptedSeriesMatchesUsageCreditsAndGenerations(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	key2, key2ID := gw.newKey(t, "acme", "") // a second key of the same account
	other, _ := gw.newKey(t, "globex", "5")  // another account: never in acme's figures
	ctx := context.Background()

	longSystem := strings.Repeat("You are a careful assistant for a shipping company. ", 120) // > 1024 tokens
	cacheParams := func() openai.ChatCompletionNewParams {
		p := oaiParams("svc-fusion", "Where is parcel 42?")
		p.Messages = append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage(longSystem)}, p.Messages...)
		return p
	}
	cacheBreakpoint := option.WithJSONSet("cache_control", map[string]any{"type": "ephemeral"})
	toolParams := func() openai.ChatCompletionNewParams {
		p := oaiParams("svc-fusion", "Weather in Oslo?")
		p.Tools = []openai.ChatCompletionToolUnionParam{oaiWeatherTool}
		return p
	}
	jsonParams := func() openai.ChatCompletionNewParams {
		p := oaiParams("svc-fusion", "Invent a person.")
		p.ResponseFormat = oaiJSONSchemaFormat()
		return p
	}
	reasonParams := func() openai.ChatCompletionNewParams {
		p := oaiParams("svc-fusion", "Think hard.")
		p.ReasoningEffort = shared.ReasoningEffortHigh
		return p
	}

	type call struct {
		name    string
		key     string
		title   string
		referer string
		want    llm.RequestType
		app     string
		run     func(client openai.Client, opts ...option.RequestOption) oaiOutcome
	}
	chatComplete := func(p func() openai.ChatCompletionNewParams, extra ...option.RequestOption) func(openai.Client, ...option.RequestOption) oaiOutcome {
		return func(client openai.Client, opts ...option.RequestOption) oaiOutcome {
			var hr *http.Response
			c, err := client.Chat.Completions.New(ctx, p(), append(append(opts, extra...), option.WithResponseInto(&hr))...)
			is.NoErr(err)
			return oaiOutcome{id: c.ID, requestType: hr.Header.Get("X-SVC-Request-Type"),
				in: c.Usage.PromptTokens, out: c.Usage.CompletionTokens, cached: c.Usage.PromptTokensDetails.CachedTokens}
		}
	}
	chatStream := func(p func() openai.ChatCompletionNewParams) func(openai.Client, ...option.RequestOption) oaiOutcome {
		return func(client openai.Client, opts ...option.RequestOption) oaiOutcome {
			params := p()
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			var hr *http.Response
			stream := client.Chat.Completions.NewStreaming(ctx, params, append(opts, option.WithResponseInto(&hr))...)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				is.True(acc.AddChunk(stream.Current()))
			}
			is.NoErr(stream.Err())
			stream.Close()
			return oaiOutcome{id: acc.ID, requestType: hr.Header.Get("X-SVC-Request-Type"), streamed: true,
				in: acc.Usage.PromptTokens, out: acc.Usage.CompletionTokens, cached: acc.Usage.PromptTokensDetails.CachedTokens}
		}
	}
	respComplete := func(text string) func(openai.Client, ...option.RequestOption) oaiOutcome {
		return func(client openai.Client, opts ...option.RequestOption) oaiOutcome {
			var hr *http.Response
			r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "svc-fusion",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}}, append(opts, option.WithResponseInto(&hr))...)
			is.NoErr(err)
			return oaiOutcome{id: r.ID, requestType: hr.Header.Get("X-SVC-Request-Type"),
				in: r.Usage.InputTokens, out: r.Usage.OutputTokens, cached: r.Usage.InputTokensDetails.CachedTokens}
		}
	}
	respStreamTools := func(client openai.Client, opts ...option.RequestOption) oaiOutcome {
		var hr *http.Response
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "svc-fusion",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Rome?")},
			Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: oaiWeatherSchema, Strict: openai.Bool(false)}}},
		}, append(opts, option.WithResponseInto(&hr))...)
		var final responses.Response
		for stream.Next() {
			if e, ok := stream.Current().AsAny().(responses.ResponseCompletedEvent); ok {
				final = e.Response
			}
		}
		is.NoErr(stream.Err())
		stream.Close()
		return oaiOutcome{id: final.ID, requestType: hr.Header.Get("X-SVC-Request-Type"), streamed: true,
			in: final.Usage.InputTokens, out: final.Usage.OutputTokens, cached: final.Usage.InputTokensDetails.CachedTokens}
	}

	calls := []call{
		{"pro", gw.Key, "Alpha", "", llm.TypePro, "Alpha", chatComplete(func() openai.ChatCompletionNewParams { return oaiParams("svc-fusion", "Hello.") })},
		{"flash streamed", gw.Key, "", "https://beta.example.com/chat?x=1", llm.TypeFlash, "beta.example.com", chatStream(func() openai.ChatCompletionNewParams { return oaiParams("svc-saver", "Quick one.") })},
		{"code, title beats referer", gw.Key, "Alpha", "https://beta.example.com/", llm.TypeCode, "Alpha", chatComplete(toolParams)},
		{"json, no label", gw.Key, "", "", llm.TypeJSON, "test-key", chatComplete(jsonParams)},
		{"vision streamed, referer with port", key2, "", "http://gamma.example.org:8080/app", llm.TypeVision, "gamma.example.org", chatStream(oaiTypeCases[0].params)},
		{"reason", key2, "Gamma App", "", llm.TypeReason, "Gamma App", chatComplete(reasonParams)},
		{"document", gw.Key, "", "", llm.TypeDocument, "test-key", chatComplete(oaiTypeCases[1].params)},
		{"Responses pro", gw.Key, "Alpha", "", llm.TypePro, "Alpha", respComplete("Hello from Responses.")},
		{"Responses code streamed", key2, "", "https://beta.example.com/", llm.TypeCode, "beta.example.com", respStreamTools},
		{"cache write", gw.Key, "Cache", "", llm.TypePro, "Cache", chatComplete(cacheParams, cacheBreakpoint)},
		{"cache read", gw.Key, "Cache", "", llm.TypePro, "Cache", chatComplete(cacheParams, cacheBreakpoint)},
		{"long streamed", key2, "", "", llm.TypeLong, "test-key", chatStream(oaiTypeCases[2].params)},
		{"flash mini id", gw.Key, "  Alpha  ", "", llm.TypeFlash, "Alpha", chatComplete(func() openai.ChatCompletionNewParams { return oaiParams("gpt-4o-mini", "Hi.") })},
	}

	keyIDs := map[string]string{gw.Key: gw.KeyID, key2: key2ID}
	var outcomes []oaiOutcome
	for _, c := range calls {
		var opts []option.RequestOption
		if c.title != "" {
			opts = append(opts, option.WithHeader("X-Title", c.title))
		}
		if c.referer != "" {
			opts = append(opts, option.WithHeader("Referer", c.referer))
		}
		o := c.run(oaiClient(gw, c.key), opts...)
		if o.requestType != string(c.want) {
			t.Errorf("%s: X-SVC-Request-Type %q, want %q", c.name, o.requestType, c.want)
		}
		o.app, o.keyID = c.app, keyIDs[c.key]
		outcomes = append(outcomes, o)
	}
	is.True(outcomes[10].cached > 0) // the repeated prefix was read from the cache

	// Calls that must not count: a bad request, and another account's call.
	resp, _ := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", `{"model":"svc-fusion","messages":[]}`)
	is.Equal(resp.StatusCode, http.StatusBadRequest)
	otherClient := oaiClient(gw, other)
	_, err := otherClient.Chat.Completions.New(ctx, oaiParams("svc-fusion", "Not acme."), option.WithHeader("X-Title", "Alpha"))
	is.NoErr(err)

	// Each generation agrees with its call.
	type sums struct {
		requests, in, out, cached int64
		cost                      apd.Decimal
	}
	add := func(m map[string]*sums, k string, o oaiOutcome, cost *apd.Decimal) {
		s := m[k]
		if s == nil {
			s = &sums{}
			m[k] = s
		}
		s.requests++
		s.in += o.in
		s.out += o.out
		s.cached += o.cached
		_, err := apd.BaseContext.Add(&s.cost, &s.cost, cost)
		is.NoErr(err)
	}
	want := map[string]map[string]*sums{"day": {}, "request_type": {}, "application": {}, "api_key": {}}
	var total sums
	for i, o := range outcomes {
		g := oaiGeneration(t, gw, o.id)
		name := calls[i].name
		if g.RequestType != o.requestType || g.Application != o.app || g.Streamed != o.streamed {
			t.Errorf("%s: generation %+v, want type %s app %q streamed %v", name, g, o.requestType, o.app, o.streamed)
		}
		if int64(g.Usage.PromptTokens) != o.in || int64(g.Usage.CompletionTokens) != o.out ||
			int64(g.Usage.CachedPromptTokens) != o.cached || int64(g.Usage.TotalTokens) != o.in+o.out {
			t.Errorf("%s: generation usage %+v, response usage in %d out %d cached %d", name, g.Usage, o.in, o.out, o.cached)
		}
		cost, _, err := apd.NewFromString(g.TotalCost)
		is.NoErr(err)
		is.True(cost.Sign() > 0) // every completed call costs something
		created, err := time.Parse(time.RFC3339, g.CreatedAt)
		is.NoErr(err)
		add(want["day"], created.UTC().Format("2006-01-02"), o, cost)
		add(want["request_type"], o.requestType, o, cost)
		add(want["application"], o.app, o, cost)
		add(want["api_key"], o.keyID, o, cost)
		total.requests++
		_, err = apd.BaseContext.Add(&total.cost, &total.cost, cost)
		is.NoErr(err)
	}

	// /usage, in all four groupings, is exactly those sums.
	for groupBy, buckets := range want {
		u := gw.usage(t, groupBy)
		is.Equal(u.Object, "usage")
		is.Equal(u.GroupBy, groupBy)
		var got []string
		for _, b := range u.Data {
			got = append(got, b.Bucket)
			w, ok := buckets[b.Bucket]
			if !ok {
				t.Errorf("group_by=%s: unexpected bucket %q: %+v", groupBy, b.Bucket, b)
				continue
			}
			if b.Requests != w.requests || b.InputTokens != w.in || b.OutputTokens != w.out ||
				b.TotalTokens != w.in+w.out || b.CachedInputTokens != w.cached {
				t.Errorf("group_by=%s bucket %q: %+v, want requests %d in %d out %d cached %d",
					groupBy, b.Bucket, b, w.requests, w.in, w.out, w.cached)
			}
			oaiSameMoney(t, "cost of "+groupBy+" "+b.Bucket, b.Cost, &w.cost)
		}
		var wantKeys []string
		for k := range buckets {
			wantKeys = append(wantKeys, k)
		}
		sort.Strings(got)
		sort.Strings(wantKeys)
		is.Equal(got, wantKeys) // exactly the expected buckets
	}

	// /credits: balance = 10 − Σcost, total_used = Σcost.
	cr := gw.credits(t)
	var balance apd.Decimal
	_, err = apd.BaseContext.Sub(&balance, apd.New(10, 0), &total.cost)
	is.NoErr(err)
	oaiSameMoney(t, "balance", cr.Balance, &balance)
	oaiSameMoney(t, "total_used", cr.TotalUsed, &total.cost)
}
