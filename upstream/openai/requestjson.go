package openai

import (
	"strconv"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Writing a request body without reflection.
//
// appendJSON writes an oaRequest byte for byte as protocol.EncodeJSON
// (encoding/json) does, field by field in the struct's order with its
// omitempty rules, for every request but those with tools, a tool choice,
// a response format or a logit bias (raw JSON, which encoding/json
// compacts, and a map, whose keys it sorts): those, and a number it
// refuses, are left to EncodeJSON. FuzzRequestJSON checks the two agree.

// appendJSON appends r's JSON to dst and reports whether it could; on
// false the caller encodes r with protocol.EncodeJSON.
func (r *oaRequest) appendJSON(dst []byte) ([]byte, bool) {
	if r.Tools != nil || r.ToolChoice != nil || r.ResponseFormat != nil || r.LogitBias != nil {
		return dst, false
	}
	dst = append(dst, `{"model":`...)
	dst = llm.AppendJSONString(dst, r.Model, false)
	dst = append(dst, `,"messages":`...)
	if r.Messages == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range r.Messages {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = r.Messages[i].appendJSON(dst); !ok {
				return dst, false
			}
		}
		dst = append(dst, ']')
	}
	if r.ParallelToolCalls != nil {
		dst = append(dst, `,"parallel_tool_calls":`...)
		dst = strconv.AppendBool(dst, *r.ParallelToolCalls)
	}
	if r.ReasoningEffort != "" {
		dst = append(dst, `,"reasoning_effort":`...)
		dst = llm.AppendJSONString(dst, r.ReasoningEffort, false)
	}
	if r.MaxCompletionTokens != 0 {
		dst = append(dst, `,"max_completion_tokens":`...)
		dst = strconv.AppendInt(dst, int64(r.MaxCompletionTokens), 10)
	}
	if r.MaxTokens != 0 {
		dst = append(dst, `,"max_tokens":`...)
		dst = strconv.AppendInt(dst, int64(r.MaxTokens), 10)
	}
	ok := true
	dst, ok = appendFloatField(dst, `,"temperature":`, r.Temperature, ok)
	dst, ok = appendFloatField(dst, `,"top_p":`, r.TopP, ok)
	if len(r.Stop) > 0 {
		dst = append(dst, `,"stop":[`...)
		for i, s := range r.Stop {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = llm.AppendJSONString(dst, s, false)
		}
		dst = append(dst, ']')
	}
	if r.Seed != nil {
		dst = append(dst, `,"seed":`...)
		dst = strconv.AppendInt(dst, *r.Seed, 10)
	}
	dst, ok = appendFloatField(dst, `,"presence_penalty":`, r.PresencePenalty, ok)
	dst, ok = appendFloatField(dst, `,"frequency_penalty":`, r.FrequencyPenalty, ok)
	if r.User != "" {
		dst = append(dst, `,"user":`...)
		dst = llm.AppendJSONString(dst, r.User, false)
	}
	if r.PromptCacheKey != "" {
		dst = append(dst, `,"prompt_cache_key":`...)
		dst = llm.AppendJSONString(dst, r.PromptCacheKey, false)
	}
	if r.Stream {
		dst = append(dst, `,"stream":true`...)
	}
	if r.StreamOptions != nil {
		dst = append(dst, `,"stream_options":{"include_usage":`...)
		dst = strconv.AppendBool(dst, r.StreamOptions.IncludeUsage)
		dst = append(dst, '}')
	}
	return append(dst, '}'), ok
}

// appendFloatField appends an optional number's member; ok turns false
// (and stays so) for a number encoding/json refuses.
func appendFloatField(dst []byte, member string, f *float64, ok bool) ([]byte, bool) {
	if f == nil {
		return dst, ok
	}
	dst = append(dst, member...)
	dst, fine := protocol.AppendJSONFloat(dst, *f)
	return dst, ok && fine
}

func (m *oaMessage) appendJSON(dst []byte) ([]byte, bool) {
	dst = append(dst, `{"role":`...)
	dst = llm.AppendJSONString(dst, m.Role, false)
	switch c := m.Content.(type) {
	case nil:
	case string:
		dst = append(dst, `,"content":`...)
		dst = llm.AppendJSONString(dst, c, false)
	case []oaPart:
		dst = append(dst, `,"content":`...)
		if c == nil {
			dst = append(dst, "null"...)
			break
		}
		dst = append(dst, '[')
		for i := range c {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = c[i].appendJSON(dst)
		}
		dst = append(dst, ']')
	default:
		return dst, false
	}
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i, tc := range m.ToolCalls {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = llm.AppendJSONString(dst, tc.ID, false)
			dst = append(dst, `,"type":`...)
			dst = llm.AppendJSONString(dst, tc.Type, false)
			dst = append(dst, `,"function":{"name":`...)
			dst = llm.AppendJSONString(dst, tc.Function.Name, false)
			dst = append(dst, `,"arguments":`...)
			dst = llm.AppendJSONString(dst, tc.Function.Arguments, false)
			dst = append(dst, "}}"...)
		}
		dst = append(dst, ']')
	}
	if m.ToolCallID != "" {
		dst = append(dst, `,"tool_call_id":`...)
		dst = llm.AppendJSONString(dst, m.ToolCallID, false)
	}
	return append(dst, '}'), true
}

func (p *oaPart) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"type":`...)
	dst = llm.AppendJSONString(dst, p.Type, false)
	if p.Text != "" {
		dst = append(dst, `,"text":`...)
		dst = llm.AppendJSONString(dst, p.Text, false)
	}
	if p.ImageURL != nil {
		dst = append(dst, `,"image_url":{"url":`...)
		dst = llm.AppendJSONString(dst, p.ImageURL.URL, false)
		dst = append(dst, '}')
	}
	if p.File != nil {
		dst = append(dst, `,"file":{`...)
		if p.File.Filename != "" {
			dst = append(dst, `"filename":`...)
			dst = llm.AppendJSONString(dst, p.File.Filename, false)
			dst = append(dst, ',')
		}
		dst = append(dst, `"file_data":`...)
		dst = llm.AppendJSONString(dst, p.File.FileData, false)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// requestSize is room for r's JSON: its texts, and some for the rest.
func (r *oaRequest) requestSize() int {
	n := 256 + len(r.Model) + len(r.User) + len(r.PromptCacheKey)
	for i := range r.Messages {
		m := &r.Messages[i]
		n += 32 + len(m.ToolCallID)
		switch c := m.Content.(type) {
		case string:
			n += len(c)
		case []oaPart:
			for j := range c {
				n += 48 + len(c[j].Text)
				if c[j].ImageURL != nil {
					n += len(c[j].ImageURL.URL)
				}
				if c[j].File != nil {
					n += len(c[j].File.Filename) + len(c[j].File.FileData)
				}
			}
		}
		for _, tc := range m.ToolCalls {
			n += 64 + len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	for _, s := range r.Stop {
		n += 4 + len(s)
	}
	return n + n/16 // escapes
}
