package messages

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// responseCases are the replies whose encoding is golden in
// testdata/response/<name>.json.
var responseCases = []struct {
	name string
	resp llm.Response
}{
	{"thinking_text_tool_use", llm.Response{
		ID: "msg_01GwX3q9", Model: "claude-sonnet-4-5",
		Content: []llm.Part{
			{Type: llm.PartReasoning, Text: "User wants weather.", Signature: "EqQBCkgI"},
			llm.TextPart("Let me check."),
			{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "toolu_01A", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}},
		},
		FinishReason: llm.FinishToolCalls,
		Usage:        llm.Usage{InputTokens: 1822, CachedInputTokens: 1800, OutputTokens: 64, ReasoningTokens: 20},
	}},
	{"text_end_turn", llm.Response{
		ID: "msg_text", Model: "svc-fusion",
		Content:      []llm.Part{llm.TextPart("Hello <b>&</b> welcome."), llm.TextPart("")},
		FinishReason: llm.FinishStop,
		Usage:        llm.Usage{InputTokens: 12, OutputTokens: 6},
	}},
	{"stop_sequence", llm.Response{
		ID: "msg_stop", Model: "svc-fusion",
		Content:      []llm.Part{llm.TextPart("one two")},
		FinishReason: llm.FinishStopSequence, StopSequence: "three",
		Usage: llm.Usage{InputTokens: 5, OutputTokens: 2},
	}},
	{"max_tokens_empty", llm.Response{
		ID: "msg_empty", Model: "svc-saver", FinishReason: llm.FinishLength,
		Usage: llm.Usage{InputTokens: 5, OutputTokens: 1},
	}},
	{"refusal", llm.Response{
		ID: "msg_refusal", Model: "svc-fusion", FinishReason: llm.FinishContentFilter,
		Usage: llm.Usage{InputTokens: 5},
	}},
	{"cache_write", llm.Response{
		ID: "msg_cache", Model: "svc-fusion",
		Content:      []llm.Part{llm.TextPart("Cached.")},
		FinishReason: llm.FinishStop,
		Usage:        llm.Usage{InputTokens: 3000, CacheCreationTokens: 2500, CacheCreation1hTokens: 1000, OutputTokens: 3},
	}},
	{"redacted_and_malformed_arguments", llm.Response{
		ID: "msg_odd", Model: "svc-max",
		Content: []llm.Part{
			{Type: llm.PartReasoning, Redacted: true, Signature: "opaque"},
			{Type: llm.PartReasoning, Signature: "sig-only"},
			{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "toolu_1", Name: "f"}},
			{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "toolu_2", Name: "g", Arguments: json.RawMessage(`{"a": 1`)}},
			{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "toolu_3", Name: "h", Arguments: json.RawMessage(`[1,2]`)}},
		},
		FinishReason: llm.FinishToolCalls,
		Usage:        llm.Usage{InputTokens: 10, OutputTokens: 10},
	}},
}

func TestCodec_WriteResponse(t *testing.T) {
	for _, tt := range responseCases {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			rec := httptest.NewRecorder()
			resp := tt.resp
			is.NoErr(Codec{}.WriteResponse(rec, &llm.Request{Model: resp.Model}, &resp))
			is.Equal(rec.Code, http.StatusOK)
			is.Equal(rec.Header().Get("Content-Type"), "application/json")
			goldenJSON(t, filepath.Join("response", tt.name+".json"), rec.Body.Bytes())

			// The official SDK reads it back.
			msg := sdkMessage(t, rec.Body.Bytes())
			is.Equal(msg.ID, resp.ID)
			is.Equal(string(msg.Model), resp.Model)
			is.Equal(msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens+msg.Usage.CacheCreationInputTokens, int64(resp.Usage.InputTokens)) // prompt total
		})
	}
}

func TestCodec_NewID(t *testing.T) {
	is := is.New(t)
	seen := map[string]bool{}
	for range 1000 {
		id := Codec{}.NewID()
		is.Equal(len(id), len("msg_")+24)
		is.Equal(id[:4], "msg_")
		for _, c := range id[4:] {
			is.True((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) // base62
		}
		is.True(!seen[id]) // unique
		seen[id] = true
	}
	is.Equal(Codec{}.Surface(), llm.SurfaceMessages)
}

func TestWriteModels(t *testing.T) {
	is := is.New(t)
	rec := httptest.NewRecorder()
	Codec{}.WriteModels(rec, surface.Limits{ContextLength: 200000, MaxCompletionTokens: 64000})
	is.Equal(rec.Code, http.StatusOK)
	goldenJSON(t, "models.json", rec.Body.Bytes())
	page := sdkModelsPage(t, rec.Body.Bytes())
	is.Equal(len(page.Data), 3)
	is.Equal(page.Data[0].ID, "svc-fusion")
	is.Equal(page.Data[2].MaxInputTokens, int64(200000))
	is.True(page.JSON.HasMore.Valid() && !page.HasMore) // pagers stop

	t.Run("one model, any id", func(t *testing.T) {
		is := is.New(t)
		rec := httptest.NewRecorder()
		Codec{}.WriteModel(rec, "claude-opus-4-1", surface.Limits{ContextLength: 100, MaxCompletionTokens: 10})
		is.Equal(rec.Code, http.StatusOK)
		goldenJSON(t, "model.json", rec.Body.Bytes())
	})
}
