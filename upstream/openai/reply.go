package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Reading chat-completions replies and streams: wire types, usage, finish
// reasons, errors and the stream decoder.

type oaResponse struct {
	Choices []oaChoice   `json:"choices"`
	Usage   *oaUsage     `json:"usage"`
	Error   *oaErrorBody `json:"error"`
}

type oaChoice struct {
	Message      oaRespMessage `json:"message"`
	FinishReason string        `json:"finish_reason"`
}

type oaRespMessage struct {
	Content          oaText           `json:"content"`
	ReasoningContent *string          `json:"reasoning_content"`
	Reasoning        *string          `json:"reasoning"`
	Refusal          *string          `json:"refusal"`
	ToolCalls        []oaRespToolCall `json:"tool_calls"`
}

// reasoning returns the non-standard reasoning text; servers that send
// both fields send the same text twice.
func (m *oaRespMessage) reasoning() string {
	if s := deref(m.ReasoningContent); s != "" {
		return s
	}
	return deref(m.Reasoning)
}

type oaRespToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name string `json:"name"`
		// Arguments is a JSON string; a few compatible servers send an
		// object.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type oaUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// canonical converts usage (docs/translation.md#usage): prompt_tokens already
// includes cached tokens and completion_tokens reasoning tokens, as in the
// canonical Usage.
func (u *oaUsage) canonical() llm.Usage {
	out := llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedInputTokens, out.CacheCreationTokens = d.CachedTokens, d.CacheWriteTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

// arguments returns the call's arguments JSON text.
func (f *oaRespToolCall) arguments() string {
	a := bytes.TrimSpace(f.Function.Arguments)
	if len(a) > 0 && a[0] == '"' {
		var s string
		if json.Unmarshal(a, &s) == nil {
			return s
		}
	}
	if len(a) == 0 || bytes.Equal(a, []byte("null")) {
		return ""
	}
	return string(llm.CompactJSON(a))
}

// oaText is a message's content: a string, null, or (on a few compatible
// servers) an array of parts whose text parts it joins.
type oaText string

func (t *oaText) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var sb strings.Builder
		for _, p := range parts {
			if p.Type == "" || p.Type == "text" {
				sb.WriteString(p.Text)
			}
		}
		*t = oaText(sb.String())
		return nil
	case bytes.Equal(b, []byte("null")):
		*t = ""
		return nil
	case len(b) >= 2 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0:
		// No escapes: the text is what is between the quotes (the decoder
		// has already checked the syntax).
		*t = oaText(b[1 : len(b)-1])
		return nil
	}
	var s string
	err := json.Unmarshal(b, &s)
	*t = oaText(s)
	return err
}

// oaErrorBody is the error object of an error reply or error frame.
type oaErrorBody struct {
	Type string          `json:"type"`
	Code json.RawMessage `json:"code"` // a string, or a number on some servers
}

// UnmarshalJSON also accepts the bare string some compatible servers send
// as their error.
func (e *oaErrorBody) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*e = oaErrorBody{}
		return nil
	}
	type plain oaErrorBody
	return json.Unmarshal(b, (*plain)(e))
}

// code returns the error code as text.
func (e *oaErrorBody) code() string {
	c := strings.Trim(string(e.Code), `"`)
	if c == "null" {
		return ""
	}
	return c
}

// llmError maps an error frame (or an error body sent with status 200).
func (e *oaErrorBody) llmError(raw []byte) *llm.Error {
	code, typ := e.code(), strings.ToLower(e.Type)
	status := http.StatusInternalServerError
	if n, err := strconv.Atoi(code); err == nil && n >= 400 && n <= 599 {
		status = n
	} else {
		k := typ + " " + strings.ToLower(code)
		switch {
		case strings.Contains(k, "insufficient_quota"), strings.Contains(k, "rate_limit"):
			status = http.StatusTooManyRequests
		case strings.Contains(k, "overloaded"), strings.Contains(k, "unavailable"):
			status = http.StatusServiceUnavailable
		case strings.Contains(k, "timeout"):
			status = http.StatusGatewayTimeout
		case strings.Contains(k, "invalid_request"):
			status = http.StatusBadRequest
		}
	}
	return upstream.ErrorFromStatus(status, nil, raw, openAIErrorHint(status, raw))
}

// openAIErrorHint reads an OpenAI error body's code.
func openAIErrorHint(_ int, body []byte) upstream.ErrorHint {
	var r struct {
		Error *oaErrorBody `json:"error"`
	}
	if json.Unmarshal(body, &r) != nil || r.Error == nil {
		return upstream.ErrorHint{}
	}
	switch r.Error.code() {
	case "insufficient_quota":
		return upstream.ErrorHint{Quota: true}
	case "invalid_api_key":
		return upstream.ErrorHint{Credentials: true}
	case "context_length_exceeded":
		return upstream.ErrorHint{ContextLength: true}
	}
	return upstream.ErrorHint{}
}

// openAIFinish maps finish_reason (docs/translation.md#finish-reasons). Servers that
// answer "stop" after tool calls get tool_calls.
func openAIFinish(reason string, calls, refusal bool) llm.FinishReason {
	switch reason {
	case "length":
		return llm.FinishLength
	case "content_filter":
		return llm.FinishContentFilter
	case "tool_calls", "function_call":
		return llm.FinishToolCalls
	}
	switch {
	case calls:
		return llm.FinishToolCalls
	case refusal:
		return llm.FinishContentFilter
	}
	return llm.FinishStop
}

// Streams.

type oaChunk struct {
	Choices []oaChunkChoice `json:"choices"`
	Usage   *oaUsage        `json:"usage"`
	Error   *oaErrorBody    `json:"error"`
}

type oaChunkChoice struct {
	Index        int     `json:"index"`
	Delta        oaDelta `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// oaDelta is a chunk's delta: the members of a reply's message, in part.
type oaDelta oaRespMessage

// openAIStream decodes chat-completions chunks.
type openAIStream struct {
	input  int    // the prompt's estimated tokens, for a reply without usage
	reason string // finish_reason
	usage  *oaUsage
	// calls are the tool calls so far, by position; up is the upstream
	// index and id the upstream id (to tell a new call reusing an index).
	calls   []oaCallState
	refusal bool
	// tokens estimates what was streamed, for the usage estimate.
	tokens int

	json  protocol.FrameDecoder
	scan  protocol.Scanner
	chunk oaChunk // the frame being decoded, reused
	span  textSpan
	tmpl  chunkTemplate
	// noTemplate turns the template off, for tests comparing with it.
	noTemplate bool
}

type oaCallState struct {
	up   int
	upID string
}

var doneData = []byte("[DONE]")

func (s *openAIStream) Decode(ev protocol.SSEEvent, out []llm.Event) ([]llm.Event, bool, error) {
	data := ev.Data
	if data == nil {
		data = ev.Bare // a JSON error body in place of a stream
	}
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, doneData) {
		return out, true, nil
	}
	if len(data) == 0 {
		return out, false, nil
	}
	// Most of a stream is text deltas that differ only in their text
	// (chunkTemplate).
	if t, ok := s.tmpl.match(&s.scan, data); ok && !s.noTemplate {
		if t != "" {
			typ := llm.EventTextDelta
			if s.tmpl.kind != textContent {
				typ = llm.EventReasoningDelta
			}
			out = s.emit(out, llm.Event{Type: typ, Text: t})
		}
		return out, false, nil
	}
	// The decoder fills reused slice elements without zeroing them first.
	choices := s.chunk.Choices[:cap(s.chunk.Choices)]
	clear(choices)
	s.chunk = oaChunk{Choices: choices[:0]}
	c := &s.chunk
	// The usual frames are read by the scanner (scan.go); any other, and
	// a malformed one, by encoding/json, whose verdict stands.
	s.span = textSpan{}
	if scanChunk(&s.scan, data, c, &s.span) {
		s.tmpl.set(data, c, &s.span)
	} else {
		s.tmpl.kind = textNone
		clear(choices)
		s.chunk = oaChunk{Choices: choices[:0]}
		if err := s.json.Decode(data, c); err != nil {
			return out, false, upstream.Malformed(err)
		}
	}
	if c.Error != nil {
		return out, false, c.Error.llmError(data)
	}
	if c.Usage != nil {
		s.usage = c.Usage // the last report wins
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // one choice is asked for
		}
		d := &ch.Delta
		if r := deref(d.ReasoningContent); r != "" {
			out = s.emit(out, llm.Event{Type: llm.EventReasoningDelta, Text: r})
		} else if r := deref(d.Reasoning); r != "" {
			out = s.emit(out, llm.Event{Type: llm.EventReasoningDelta, Text: r})
		}
		if t := string(d.Content); t != "" {
			out = s.emit(out, llm.Event{Type: llm.EventTextDelta, Text: t})
		}
		if t := deref(d.Refusal); t != "" {
			s.refusal = true
			out = s.emit(out, llm.Event{Type: llm.EventTextDelta, Text: t})
		}
		for j := range d.ToolCalls {
			out = s.toolCall(out, &d.ToolCalls[j])
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.reason = *ch.FinishReason
		}
	}
	return out, false, nil
}

// toolCall turns one tool-call delta into a start (for a new call) and an
// argument fragment.
func (s *openAIStream) toolCall(out []llm.Event, tc *oaRespToolCall) []llm.Event {
	up := 0
	if tc.Index != nil {
		up = *tc.Index
	}
	k := -1
	for i := len(s.calls) - 1; i >= 0; i-- {
		if s.calls[i].up == up {
			k = i
			break
		}
	}
	if k < 0 || (tc.ID != "" && s.calls[k].upID != "" && tc.ID != s.calls[k].upID) {
		k = len(s.calls)
		s.calls = append(s.calls, oaCallState{up: up, upID: tc.ID})
		out = s.emit(out, llm.Event{Type: llm.EventToolCallStart, Index: k,
			ToolCall: &llm.ToolCall{ID: protocol.NewCallID(), Name: tc.Function.Name}})
	}
	if a := tc.arguments(); a != "" {
		out = s.emit(out, llm.Event{Type: llm.EventToolCallDelta, Index: k, Text: a})
	}
	return out
}

// emit appends ev, counting its text for the usage estimate.
func (s *openAIStream) emit(out []llm.Event, ev llm.Event) []llm.Event {
	s.tokens += llm.TextTokens(ev.Text)
	if ev.ToolCall != nil {
		s.tokens += llm.TextTokens(ev.ToolCall.Name)
	}
	return append(out, ev)
}

func (s *openAIStream) Finish(out []llm.Event, _ bool) ([]llm.Event, error) {
	if s.reason == "" {
		return out, &llm.Error{Kind: llm.KindUpstream, Message: upstream.MsgCut, Err: errors.New("chat-completions stream ended without a finish_reason")}
	}
	var u llm.Usage
	if s.usage != nil {
		u = s.usage.canonical()
	} else {
		// Estimated, as estimateUsage does: llm.TextTokens' rule.
		u = llm.Usage{InputTokens: s.input, OutputTokens: s.tokens}
	}
	return append(out, llm.Event{
		Type:         llm.EventFinish,
		FinishReason: openAIFinish(s.reason, len(s.calls) > 0, s.refusal),
		Usage:        &u,
	}), nil
}

func (s *openAIStream) UsageSoFar() (llm.Usage, bool) {
	if s.usage == nil {
		return llm.Usage{}, false
	}
	return s.usage.canonical(), true
}

// estimateUsage is the usage of a reply whose upstream reported none
// (some compatible servers ignore include_usage): the llm package's
// estimates, so that the call is never billed as free.
func estimateUsage(req *llm.Request, outputTokens int) llm.Usage {
	return llm.Usage{InputTokens: req.InputTokens(), OutputTokens: outputTokens}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
