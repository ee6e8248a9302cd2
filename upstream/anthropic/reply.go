package anthropic

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Reading messages replies and streams: wire types, usage, finish
// reasons, errors and the stream decoder.

type anResponse struct {
	Type         string        `json:"type"`
	Content      []anRespBlock `json:"content"`
	StopReason   string        `json:"stop_reason"`
	StopSequence *string       `json:"stop_sequence"`
	Usage        anUsage       `json:"usage"`
	Error        *anErrorBody  `json:"error"`
}

type anRespBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

// anUsage is a usage report; nil fields were not reported.
type anUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral5m *int `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h *int `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	OutputTokensDetails *struct {
		ThinkingTokens *int `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// merge takes the fields v reports, which replace ours: a stream's reports
// are cumulative.
func (u *anUsage) merge(v *anUsage) {
	if v == nil {
		return
	}
	set := func(dst **int, src *int) {
		if src != nil {
			*dst = src
		}
	}
	set(&u.InputTokens, v.InputTokens)
	set(&u.OutputTokens, v.OutputTokens)
	set(&u.CacheCreationInputTokens, v.CacheCreationInputTokens)
	set(&u.CacheReadInputTokens, v.CacheReadInputTokens)
	if v.CacheCreation != nil {
		u.CacheCreation = v.CacheCreation
	}
	if v.OutputTokensDetails != nil {
		u.OutputTokensDetails = v.OutputTokensDetails
	}
}

// canonical converts usage (docs/translation.md#usage).
func (u *anUsage) canonical() llm.Usage {
	n := func(p *int) int {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	read := n(u.CacheReadInputTokens)
	write := n(u.CacheCreationInputTokens)
	var w1h int
	if cc := u.CacheCreation; cc != nil {
		w1h = n(cc.Ephemeral1h)
		// The flat count and the split must agree; never drop a write.
		write = max(write, protocol.AddTokens(n(cc.Ephemeral5m), w1h))
	}
	out := llm.Usage{
		InputTokens:           protocol.AddTokens(protocol.AddTokens(n(u.InputTokens), read), write),
		CachedInputTokens:     read,
		CacheCreationTokens:   write,
		CacheCreation1hTokens: min(w1h, write),
		OutputTokens:          n(u.OutputTokens),
	}
	if d := u.OutputTokensDetails; d != nil {
		out.ReasoningTokens = min(n(d.ThinkingTokens), out.OutputTokens)
	}
	return out
}

// anErrorBody is the error object of an error reply or error event.
type anErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// anthropicErrorStatus is the HTTP status of an error type (docs/wire/messages.md#errors).
var anthropicErrorStatus = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"billing_error":         http.StatusPaymentRequired,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"timeout_error":         http.StatusGatewayTimeout,
	"overloaded_error":      529,
}

// llmError maps an error event.
func (e *anErrorBody) llmError(raw []byte) *llm.Error {
	status, ok := anthropicErrorStatus[e.Type]
	if !ok {
		status = http.StatusInternalServerError
	}
	return upstream.ErrorFromStatus(status, nil, raw, anthropicErrorHint(status, raw))
}

// anthropicErrorHint reads an error body: a prompt over the context window
// is a 400 like any other, told apart only by its message.
func anthropicErrorHint(status int, body []byte) upstream.ErrorHint {
	var r struct {
		Error *anErrorBody `json:"error"`
	}
	if json.Unmarshal(body, &r) != nil || r.Error == nil {
		return upstream.ErrorHint{}
	}
	switch {
	case r.Error.Type == "billing_error":
		return upstream.ErrorHint{Quota: true}
	case status == http.StatusBadRequest && strings.Contains(strings.ToLower(r.Error.Message), "prompt is too long"):
		return upstream.ErrorHint{ContextLength: true}
	}
	return upstream.ErrorHint{}
}

// anthropicFinish maps stop_reason (docs/translation.md#finish-reasons).
func anthropicFinish(reason, seq string) (llm.FinishReason, string) {
	switch reason {
	case "stop_sequence":
		return llm.FinishStopSequence, seq
	case "max_tokens", "model_context_window_exceeded":
		return llm.FinishLength, ""
	case "tool_use":
		return llm.FinishToolCalls, ""
	case "refusal":
		return llm.FinishContentFilter, ""
	}
	return llm.FinishStop, "" // end_turn, pause_turn
}

// Streams.

type anEvent struct {
	Type         string       `json:"type"`
	Message      *anResponse  `json:"message"`
	Index        int          `json:"index"`
	ContentBlock *anRespBlock `json:"content_block"`
	Delta        *anDelta     `json:"delta"`
	Usage        *anUsage     `json:"usage"`
	Error        *anErrorBody `json:"error"`
}

type anDelta struct {
	Type         string  `json:"type"`
	Text         string  `json:"text"`
	Thinking     string  `json:"thinking"`
	Signature    string  `json:"signature"`
	PartialJSON  string  `json:"partial_json"`
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// anthropicStream decodes messages stream events.
type anthropicStream struct {
	usage anUsage
	// started is set by message_start, whose input counts go on the
	// first event after it (llm.Event.Usage); sent once they have.
	started, sent bool
	blocks        map[int]*anBlockState // open blocks by upstream index
	calls         int
	reason        string
	stopSeq       string
	json          protocol.FrameDecoder
	scan          protocol.Scanner
	event         anEvent // the frame being decoded, reused
	delta         anDelta // what the scanner points event.Delta at
}

type anBlockState struct {
	kind string
	call int  // the canonical index of a tool_use block
	args bool // a tool_use block got argument text
}

func (s *anthropicStream) Decode(ev protocol.SSEEvent, out []llm.Event) ([]llm.Event, bool, error) {
	n := len(out)
	out, done, err := s.decodeFrame(ev, out)
	if s.started && !s.sent && len(out) > n {
		s.sent = true
		if out[n].Usage == nil {
			out[n].Usage = protocol.InputUsage(s.usage.canonical())
		}
	}
	return out, done, err
}

func (s *anthropicStream) decodeFrame(ev protocol.SSEEvent, out []llm.Event) ([]llm.Event, bool, error) {
	data := ev.Data
	if data == nil {
		data = ev.Bare
	}
	if len(data) == 0 {
		return out, false, nil
	}
	s.event = anEvent{}
	e := &s.event
	// The usual frames are read by the scanner (scan.go); any other, and
	// a malformed one, by encoding/json, whose verdict stands.
	if !scanEvent(&s.scan, data, e, &s.delta) {
		s.event = anEvent{}
		if err := s.json.Decode(data, e); err != nil {
			return out, false, upstream.Malformed(err)
		}
	}
	typ := e.Type
	if typ == "" {
		typ = ev.Type
	}
	switch typ {
	case "message_start":
		if e.Message != nil {
			s.usage.merge(&e.Message.Usage)
			s.started = true
		}
	case "content_block_start":
		cb := e.ContentBlock
		if cb == nil {
			return out, false, upstream.Malformed(errors.New("content_block_start without a block"))
		}
		st := &anBlockState{kind: cb.Type}
		s.blocks[e.Index] = st
		switch cb.Type {
		case "text":
			if cb.Text != "" {
				out = append(out, llm.Event{Type: llm.EventTextDelta, Text: cb.Text})
			}
		case "thinking":
			if cb.Thinking != "" || cb.Signature != "" {
				out = append(out, llm.Event{Type: llm.EventReasoningDelta, Text: cb.Thinking, Signature: protocol.TagSig(protocol.SigThinking, cb.Signature)})
			}
		case "redacted_thinking":
			out = append(out, llm.Event{Type: llm.EventReasoningDelta, Signature: protocol.TagSig(protocol.SigRedacted, cb.Data)})
		case "tool_use":
			st.call = s.calls
			s.calls++
			out = append(out, llm.Event{Type: llm.EventToolCallStart, Index: st.call, ToolCall: &llm.ToolCall{ID: protocol.NewCallID(), Name: cb.Name}})
			if in := protocol.ArgsObject(cb.Input); string(in) != "{}" {
				st.args = true
				out = append(out, llm.Event{Type: llm.EventToolCallDelta, Index: st.call, Text: string(in)})
			}
		}
	case "content_block_delta":
		st, d := s.blocks[e.Index], e.Delta
		if st == nil || d == nil {
			return out, false, nil // a delta for no open block: nothing to attach it to
		}
		switch d.Type {
		case "text_delta":
			if d.Text != "" {
				out = append(out, llm.Event{Type: llm.EventTextDelta, Text: d.Text})
			}
		case "thinking_delta":
			if d.Thinking != "" {
				out = append(out, llm.Event{Type: llm.EventReasoningDelta, Text: d.Thinking})
			}
		case "signature_delta":
			if d.Signature != "" {
				out = append(out, llm.Event{Type: llm.EventReasoningDelta, Signature: protocol.TagSig(protocol.SigThinking, d.Signature)})
			}
		case "input_json_delta":
			if st.kind == "tool_use" && d.PartialJSON != "" {
				st.args = true
				out = append(out, llm.Event{Type: llm.EventToolCallDelta, Index: st.call, Text: d.PartialJSON})
			}
		}
	case "content_block_stop":
		if st := s.blocks[e.Index]; st != nil {
			if st.kind == "tool_use" && !st.args {
				out = append(out, llm.Event{Type: llm.EventToolCallDelta, Index: st.call, Text: "{}"})
			}
			delete(s.blocks, e.Index)
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			s.reason, s.stopSeq = e.Delta.StopReason, deref(e.Delta.StopSequence)
		}
		s.usage.merge(e.Usage)
	case "message_stop":
		return out, true, nil
	case "error":
		body := e.Error
		if body == nil {
			body = &anErrorBody{}
		}
		return out, false, body.llmError(data)
	}
	return out, false, nil
}

func (s *anthropicStream) Finish(out []llm.Event, _ bool) ([]llm.Event, error) {
	if s.reason == "" {
		return out, &llm.Error{Kind: llm.KindUpstream, Message: upstream.MsgCut, Err: errors.New("messages stream ended without a stop_reason")}
	}
	reason, seq := anthropicFinish(s.reason, s.stopSeq)
	u := s.usage.canonical()
	return append(out, llm.Event{Type: llm.EventFinish, FinishReason: reason, StopSequence: seq, Usage: &u}), nil
}

// UsageSoFar is known from message_start on: the input and cache counts,
// and the output so far.
func (s *anthropicStream) UsageSoFar() (llm.Usage, bool) {
	if s.usage.InputTokens == nil {
		return llm.Usage{}, false
	}
	return s.usage.canonical(), true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
