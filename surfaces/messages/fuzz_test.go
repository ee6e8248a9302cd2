package messages

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/svcgw/svcgw/llm"
)

// encodeRequest renders a canonical request as a messages request body, the
// inverse of decodeRequest on everything the decoder produces. It exists for
// the fuzz target's decode → encode → decode check.
func encodeRequest(req *llm.Request) ([]byte, error) {
	body := map[string]any{"model": req.Model, "max_tokens": req.MaxTokens}
	msgs := make([]any, 0, len(req.Messages))
	for _, m := range req.Messages {
		msgs = append(msgs, map[string]any{"role": string(m.Role), "content": encodeParts(m.Parts)})
	}
	body["messages"] = msgs
	if len(req.System) > 0 {
		body["system"] = encodeParts(req.System)
	}
	if len(req.Tools) > 0 {
		tools := make([]any, 0, len(req.Tools))
		for _, t := range req.Tools {
			o := map[string]any{"name": t.Name, "input_schema": t.Parameters}
			if t.Description != "" {
				o["description"] = t.Description
			}
			if t.Strict {
				o["strict"] = true
			}
			withCache(o, t.CacheControl)
			tools = append(tools, o)
		}
		body["tools"] = tools
	}
	if req.ToolChoice.Mode != "" {
		tc := map[string]any{}
		switch req.ToolChoice.Mode {
		case llm.ToolChoiceRequired:
			tc["type"] = "any"
		case llm.ToolChoiceTool:
			tc["type"], tc["name"] = "tool", req.ToolChoice.Name
		default:
			tc["type"] = string(req.ToolChoice.Mode)
		}
		if req.ParallelToolCalls != nil {
			tc["disable_parallel_tool_use"] = !*req.ParallelToolCalls
		}
		body["tool_choice"] = tc
	}
	oc := map[string]any{}
	if rf := req.ResponseFormat; rf != nil {
		oc["format"] = map[string]any{"type": "json_schema", "schema": rf.Schema}
	}
	if r := req.Reasoning; r != nil {
		if r.Effort != "" {
			oc["effort"] = r.Effort
		}
		display := "omitted"
		if r.IncludeThoughts {
			display = "summarized"
		}
		switch {
		case !r.Enabled:
			body["thinking"] = map[string]any{"type": "disabled"}
		case r.BudgetTokens > 0:
			body["thinking"] = map[string]any{"type": "enabled", "budget_tokens": r.BudgetTokens, "display": display}
		default:
			body["thinking"] = map[string]any{"type": "adaptive", "display": display}
		}
	}
	if len(oc) > 0 {
		body["output_config"] = oc
	}
	if req.Temperature != nil {
		body["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		body["top_p"] = *req.TopP
	}
	if req.TopK != nil {
		body["top_k"] = *req.TopK
	}
	if req.Stop != nil {
		body["stop_sequences"] = req.Stop
	}
	if req.User != "" {
		body["metadata"] = map[string]any{"user_id": req.User}
	}
	if req.Stream {
		body["stream"] = true
	}
	withCache(body, req.CacheControl)
	return json.Marshal(body)
}

func withCache(o map[string]any, cc *llm.CacheControl) {
	if cc != nil {
		o["cache_control"] = map[string]any{"type": "ephemeral", "ttl": cc.TTL}
	}
}

func encodeParts(parts []llm.Part) []any {
	out := make([]any, 0, len(parts))
	for _, p := range parts {
		var o map[string]any
		switch p.Type {
		case llm.PartText:
			o = map[string]any{"type": "text", "text": p.Text}
		case llm.PartImage:
			if p.URL != "" {
				o = map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": p.URL}}
			} else {
				o = map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": p.MediaType, "data": base64.StdEncoding.EncodeToString(p.Data)}}
			}
		case llm.PartDocument:
			o = map[string]any{"type": "document", "source": map[string]any{"type": "base64", "media_type": p.MediaType, "data": base64.StdEncoding.EncodeToString(p.Data)}}
			if p.Title != "" {
				o["title"] = p.Title
			}
		case llm.PartToolCall:
			o = map[string]any{"type": "tool_use", "id": p.ToolCall.ID, "name": p.ToolCall.Name, "input": p.ToolCall.Arguments}
		case llm.PartToolResult:
			o = map[string]any{"type": "tool_result", "tool_use_id": p.ToolResult.CallID}
			if p.ToolResult.IsError {
				o["is_error"] = true
			}
			if len(p.ToolResult.Content) > 0 {
				o["content"] = encodeParts(p.ToolResult.Content)
			}
		case llm.PartReasoning:
			if p.Redacted {
				o = map[string]any{"type": "redacted_thinking", "data": p.Signature}
			} else {
				o = map[string]any{"type": "thinking", "thinking": p.Text, "signature": p.Signature}
			}
		}
		withCache(o, p.CacheControl)
		out = append(out, o)
	}
	return out
}

func TestEncodeRequest_roundTrip(t *testing.T) {
	for name, body := range requestCases(t) {
		t.Run(name, func(t *testing.T) { checkRoundTrip(t, body) })
	}
}

// checkRoundTrip decodes body and, when it is valid, checks that encoding
// and decoding again gives the same canonical request.
func checkRoundTrip(t *testing.T, body []byte) {
	t.Helper()
	req, err := decodeRequest(body, false)
	req2, err2 := decodeRequest(body, false)
	if (err == nil) != (err2 == nil) || !cmp.Equal(req, req2, cmpopts.EquateEmpty()) {
		t.Fatalf("decoding is not deterministic")
	}
	if err != nil {
		if e, ok := err.(*llm.Error); !ok || e.Kind != llm.KindInvalidRequest {
			t.Fatalf("decode error is not an invalid_request *llm.Error: %#v", err)
		}
		return
	}
	enc, err := encodeRequest(req)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	again, err := decodeRequest(enc, false)
	if err != nil {
		t.Fatalf("re-decode of %s: %v", enc, err)
	}
	// Turns says how the caller wrote the request; encoding merges them.
	if d := cmp.Diff(req, again, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(llm.Message{}, "Turns")); d != "" {
		t.Fatalf("decode → encode → decode differs (-first +second):\n%s\nencoded: %s", d, enc)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, body := range requestCases(f) {
		f.Add(body)
	}
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":""}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkRoundTrip(t, body)
	})
}
