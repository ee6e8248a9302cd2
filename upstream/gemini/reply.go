package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Reading generate-content replies and streams: wire types, usage, finish
// reasons, errors and the stream decoder.

type gmResponse struct {
	Candidates     []gmCandidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *gmUsage     `json:"usageMetadata"`
	Error         *gmErrorBody `json:"error"`
}

type gmCandidate struct {
	Content      *gmContent `json:"content"`
	FinishReason string     `json:"finishReason"`
	Index        int        `json:"index"`
}

type gmUsage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
}

// canonical converts usage (docs/translation.md#usage).
func (u *gmUsage) canonical() llm.Usage {
	return llm.Usage{
		InputTokens:       protocol.AddTokens(u.PromptTokenCount, u.ToolUsePromptTokenCount),
		CachedInputTokens: u.CachedContentTokenCount,
		OutputTokens:      protocol.AddTokens(u.CandidatesTokenCount, u.ThoughtsTokenCount),
		ReasoningTokens:   u.ThoughtsTokenCount,
	}
}

// decodeGeminiResponse reads a reply or stream chunk into r, through d; an
// error object (bare, or wrapped in an array as some error replies are)
// becomes an *llm.Error.
func decodeGeminiResponse(d *protocol.FrameDecoder, raw []byte, r *gmResponse) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var rs []gmResponse
		if err := json.Unmarshal(raw, &rs); err != nil {
			return upstream.Malformed(err)
		}
		if len(rs) > 0 {
			*r = rs[0]
		}
	} else if err := d.Decode(raw, r); err != nil {
		return upstream.Malformed(err)
	}
	if r.Error != nil {
		return r.Error.llmError(raw)
	}
	return nil
}

// geminiParts converts a reply's parts: consecutive thoughts make one
// reasoning part, closed by a signature. A signature on a text part closes
// the thoughts before it, or becomes a reasoning part of its own before
// that text; either way it goes back upstream on a part of the same turn,
// as Gemini asks (it validates only function calls' signatures). Streams
// do the same (geminiStream.part).
func geminiParts(ps []gmPart) []llm.Part {
	var out []llm.Part
	for _, p := range ps {
		sig := protocol.TagSig(protocol.SigThought, p.ThoughtSignature)
		n := len(out)
		switch {
		case p.FunctionCall != nil:
			out = append(out, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{
				ID: protocol.NewCallID(), Name: p.FunctionCall.Name, Arguments: protocol.ArgsObject(p.FunctionCall.Args), Signature: sig,
			}})
		case p.Thought:
			if n > 0 && out[n-1].Type == llm.PartReasoning && out[n-1].Signature == "" {
				out[n-1].Text += p.Text
				out[n-1].Signature = sig
			} else if p.Text != "" || sig != "" {
				out = append(out, llm.Part{Type: llm.PartReasoning, Text: p.Text, Signature: sig})
			}
		default:
			switch {
			case sig == "":
			case n > 0 && out[n-1].Type == llm.PartReasoning && out[n-1].Signature == "":
				out[n-1].Signature = sig // closes the thoughts before, as in a stream
			default:
				out = append(out, llm.Part{Type: llm.PartReasoning, Signature: sig})
				n++
			}
			if p.Text == "" {
				continue
			}
			if n > 0 && out[n-1].Type == llm.PartText {
				out[n-1].Text += p.Text
			} else {
				out = append(out, llm.TextPart(p.Text))
			}
		}
	}
	return out
}

// geminiBlocked stands for a prompt blocked before any candidate.
const geminiBlocked = "PROMPT_BLOCKED"

// geminiFinish maps finishReason (docs/translation.md#finish-reasons).
func geminiFinish(reason string, calls bool) llm.FinishReason {
	switch reason {
	case "MAX_TOKENS":
		return llm.FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "IMAGE_OTHER", geminiBlocked:
		return llm.FinishContentFilter
	}
	if calls {
		return llm.FinishToolCalls
	}
	return llm.FinishStop
}

// gmErrorBody is a Google error object.
type gmErrorBody struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		Reason     string `json:"reason"`
		RetryDelay string `json:"retryDelay"`
	} `json:"details"`
}

// geminiStatus is the HTTP status of a google.rpc code name.
var geminiStatus = map[string]int{
	"INVALID_ARGUMENT":    http.StatusBadRequest,
	"FAILED_PRECONDITION": http.StatusBadRequest,
	"UNAUTHENTICATED":     http.StatusUnauthorized,
	"PERMISSION_DENIED":   http.StatusForbidden,
	"NOT_FOUND":           http.StatusNotFound,
	"RESOURCE_EXHAUSTED":  http.StatusTooManyRequests,
	"INTERNAL":            http.StatusInternalServerError,
	"UNAVAILABLE":         http.StatusServiceUnavailable,
	"DEADLINE_EXCEEDED":   http.StatusGatewayTimeout,
}

// llmError maps an in-stream error object.
func (e *gmErrorBody) llmError(raw []byte) *llm.Error {
	status := e.Code
	if status < 400 || status > 599 {
		status = geminiStatus[e.Status]
	}
	if status == 0 {
		status = http.StatusInternalServerError
	}
	return upstream.ErrorFromStatus(status, nil, raw, e.hint())
}

func (e *gmErrorBody) hint() upstream.ErrorHint {
	var h upstream.ErrorHint
	for _, d := range e.Details {
		switch {
		case d.Reason == "API_KEY_INVALID":
			h.Credentials = true
		case d.RetryDelay != "":
			if dur, err := time.ParseDuration(d.RetryDelay); err == nil && dur > 0 {
				h.RetryAfter = dur
			}
		}
	}
	if e.Status == "FAILED_PRECONDITION" { // billing or region: the operator's to fix
		h.Quota = true
	}
	return h
}

// geminiErrorHint reads a Google error body: a bad key is a 400 with
// reason API_KEY_INVALID, and RetryInfo says when to retry.
func geminiErrorHint(_ int, body []byte) upstream.ErrorHint {
	body = bytes.TrimSpace(body)
	var r gmResponse
	if len(body) > 0 && body[0] == '[' {
		var rs []gmResponse
		if json.Unmarshal(body, &rs) != nil || len(rs) == 0 {
			return upstream.ErrorHint{}
		}
		r = rs[0]
	} else if json.Unmarshal(body, &r) != nil {
		return upstream.ErrorHint{}
	}
	if r.Error == nil {
		return upstream.ErrorHint{}
	}
	return r.Error.hint()
}

// Streams.

// geminiStream decodes streamGenerateContent chunks.
type geminiStream struct {
	usage *gmUsage // the last chunk's, in last
	last  gmUsage
	// sent is set once the prompt counts (usageMetadata, on every chunk)
	// have gone out on the stream's first event (llm.Event.Usage).
	sent   bool
	reason string
	calls  int
	json   protocol.FrameDecoder
	scan   scanBufs
	chunk  gmResponse // the frame being decoded, reused
}

func (s *geminiStream) Decode(ev protocol.SSEEvent, out []llm.Event) ([]llm.Event, bool, error) {
	data := ev.Data
	if data == nil {
		data = ev.Bare
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return out, false, nil
	}
	s.chunk = gmResponse{}
	r := &s.chunk
	// The usual chunks are read by the scanner (scan.go); any other, and
	// a malformed one, by encoding/json, whose verdict stands.
	if !s.scan.chunk(data, r) {
		s.chunk = gmResponse{}
		if err := decodeGeminiResponse(&s.json, data, r); err != nil {
			return out, false, err
		}
	}
	if r.UsageMetadata != nil {
		s.last = *r.UsageMetadata
		s.usage = &s.last
	}
	if len(r.Candidates) == 0 {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			s.reason = geminiBlocked
		}
		return out, false, nil
	}
	cand := &r.Candidates[0]
	if cand.Content != nil {
		n := len(out)
		for i := range cand.Content.Parts {
			out = s.part(out, &cand.Content.Parts[i])
		}
		if !s.sent && len(out) > n {
			s.sent = true
			if s.usage != nil {
				out[n].Usage = protocol.InputUsage(s.usage.canonical())
			}
		}
	}
	if cand.FinishReason != "" {
		s.reason = cand.FinishReason
	}
	return out, false, nil
}

// part turns one part into events; a function call is whole, so it is a
// start and one argument fragment.
func (s *geminiStream) part(out []llm.Event, p *gmPart) []llm.Event {
	sig := protocol.TagSig(protocol.SigThought, p.ThoughtSignature)
	switch {
	case p.FunctionCall != nil:
		k := s.calls
		s.calls++
		out = append(out,
			llm.Event{Type: llm.EventToolCallStart, Index: k, ToolCall: &llm.ToolCall{ID: protocol.NewCallID(), Name: p.FunctionCall.Name, Signature: sig}},
			llm.Event{Type: llm.EventToolCallDelta, Index: k, Text: string(protocol.ArgsObject(p.FunctionCall.Args))})
	case p.Thought:
		if p.Text != "" || sig != "" {
			out = append(out, llm.Event{Type: llm.EventReasoningDelta, Text: p.Text, Signature: sig})
		}
	default:
		if sig != "" {
			out = append(out, llm.Event{Type: llm.EventReasoningDelta, Signature: sig})
		}
		if p.Text != "" {
			out = append(out, llm.Event{Type: llm.EventTextDelta, Text: p.Text})
		}
	}
	return out
}

func (s *geminiStream) Finish(out []llm.Event, _ bool) ([]llm.Event, error) {
	if s.reason == "" {
		return out, &llm.Error{Kind: llm.KindUpstream, Message: upstream.MsgCut, Err: errors.New("generate-content stream ended without a finishReason")}
	}
	var u llm.Usage
	if s.usage != nil {
		u = s.usage.canonical()
	}
	return append(out, llm.Event{Type: llm.EventFinish, FinishReason: geminiFinish(s.reason, s.calls > 0), Usage: &u}), nil
}

// UsageSoFar is the last chunk's usage snapshot.
func (s *geminiStream) UsageSoFar() (llm.Usage, bool) {
	if s.usage == nil {
		return llm.Usage{}, false
	}
	return s.usage.canonical(), true
}
