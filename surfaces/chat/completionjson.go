package chat

import (
	"strconv"

	"github.com/svcgw/svcgw/llm"
)

// AppendJSON writes the completion as encoding/json does (HTML escaping
// off), field by field: surface.WriteJSON uses it instead of reflection,
// which was most of the cost of writing a reply (bench/RESULTS.md, session
// 5). TestCompletionJSON and FuzzCompletionJSON check it against
// encoding/json.
func (c *completion) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = llm.AppendJSONString(dst, c.ID, false)
	dst = append(dst, `,"object":`...)
	dst = llm.AppendJSONString(dst, c.Object, false)
	dst = append(dst, `,"created":`...)
	dst = strconv.AppendInt(dst, c.Created, 10)
	dst = append(dst, `,"model":`...)
	dst = llm.AppendJSONString(dst, c.Model, false)
	dst = append(dst, `,"choices":`...)
	if c.Choices == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range c.Choices {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = c.Choices[i].appendJSON(dst)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"usage":`...)
	if c.Usage == nil {
		dst = append(dst, "null"...)
	} else {
		dst = c.Usage.appendJSON(dst)
	}
	return append(dst, '}')
}

func (ch *completionChoice) appendJSON(dst []byte) []byte {
	m := &ch.Message
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(ch.Index), 10)
	dst = append(dst, `,"message":{"role":`...)
	dst = llm.AppendJSONString(dst, m.Role, false)
	dst = append(dst, `,"content":`...)
	dst = appendOptString(dst, m.Content)
	dst = append(dst, `,"reasoning":`...)
	dst = appendOptString(dst, m.Reasoning)
	dst = append(dst, `,"refusal":`...)
	dst = appendOptString(dst, m.Refusal)
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = m.ToolCalls[i].appendJSON(dst)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"annotations":`...)
	if m.Annotations == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range m.Annotations {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, "{}"...)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"logprobs":`...)
	if ch.Logprobs == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, "{}"...)
	}
	dst = append(dst, `,"finish_reason":`...)
	dst = llm.AppendJSONString(dst, ch.FinishReason, false)
	return append(dst, '}')
}

// appendJSON writes a tool call, whose members but function are omitted
// when empty.
func (tc *toolCallJSON) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	if tc.Index != nil {
		dst = append(dst, `"index":`...)
		dst = strconv.AppendInt(dst, int64(*tc.Index), 10)
		dst = append(dst, ',')
	}
	if tc.ID != "" {
		dst = append(dst, `"id":`...)
		dst = llm.AppendJSONString(dst, tc.ID, false)
		dst = append(dst, ',')
	}
	if tc.Type != "" {
		dst = append(dst, `"type":`...)
		dst = llm.AppendJSONString(dst, tc.Type, false)
		dst = append(dst, ',')
	}
	dst = append(dst, `"function":{`...)
	f := &tc.Function
	if f.Name != "" {
		dst = append(dst, `"name":`...)
		dst = llm.AppendJSONString(dst, f.Name, false)
		if f.Arguments != nil {
			dst = append(dst, ',')
		}
	}
	if f.Arguments != nil {
		dst = append(dst, `"arguments":`...)
		dst = llm.AppendJSONString(dst, *f.Arguments, false)
	}
	return append(dst, "}}"...)
}

func (u *usageJSON) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.PromptTokens), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.CompletionTokens), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.TotalTokens), 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.PromptTokensDetails.CachedTokens), 10)
	dst = append(dst, `,"cache_write_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.PromptTokensDetails.CacheWriteTokens), 10)
	dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.CompletionTokensDetails.ReasoningTokens), 10)
	return append(dst, "}}"...)
}

// appendOptString writes a *string member's value: the string, or null.
func appendOptString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return llm.AppendJSONString(dst, *s, false)
}
