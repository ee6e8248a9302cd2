// Package anthropic is the backend for Anthropic's messages protocol. It
// owns the protocol's wire types, the translation of a canonical request
// into them, and the reading of its replies, streams and errors back into
// canonical form (see Backend).
//
// anthropic imports upstream (the Backend contract and the error
// vocabulary), upstream/internal/protocol (the shared transport, stream
// reading and translation helpers) and llm; never another vendor's package.
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Backend serves canonical requests over the messages protocol
// (docs/wire/messages.md). It posts to {BaseURL}/v1/messages.
//
// Translation notes (docs/translation.md):
//   - max_tokens is required: the caller's, else the model's
//     MaxCompletionTokens, else 4096; never above the model's limit.
//   - stop_sequences rejects empty and whitespace-only sequences (a "\n"
//     from a chat-completions caller): the others go upstream and, when
//     any was held back, the gateway applies them all (protocol.Stopped).
//   - Consecutive turns of one role are merged, and tool results come
//     first in their user turn (#roles-and-system-prompt, #tool-calls-and-results). Tool-call ids are reduced to
//     [A-Za-z0-9_-]. A history with tool calls but a request without tools
//     declares the called tools with an empty schema and tool_choice none,
//     since the API rejects tool_use blocks without tools.
//   - Tools get input_schema {"type":"object","properties":{}} when they
//     have no schema. A subset of allowed tools filters the tool list.
//   - Reasoning: a budget becomes thinking {type:"enabled", budget_tokens}
//     (kept below max_tokens; thinking stays off when that leaves less
//     than the API's 1024 minimum); an effort becomes thinking
//     {type:"adaptive"} plus output_config.effort. Both ask for
//     display:"summarized" (#reasoning). Thinking is left off when the caller
//     forces a tool (Anthropic allows only auto and none with thinking),
//     and when the history's last tool-calling turn has no thinking block
//     to replay (it would be rejected). With thinking on, temperature and
//     top_k are not sent and top_p only from 0.95 up.
//   - JSON output: a schema becomes output_config.format; JSON without a
//     schema (which the API cannot express) becomes an instruction
//     appended to the system prompt (#structured-output, policy).
//   - Cache breakpoints are sent on system blocks, tools and content
//     blocks with their ttl; only the last four are kept, the API's limit.
//   - Usage: input_tokens excludes cache reads and writes, which the
//     canonical InputTokens includes; the cache_creation split gives the
//     one-hour writes (#usage). In a stream, message_start carries the input
//     and cache counts and message_delta the cumulative ones: each field is
//     taken once, the latest report winning, never added up.
type Backend struct {
	h   protocol.Client
	url string
	hdr protocol.Headers // built once by New
}

var _ upstream.Backend = (*Backend)(nil)

// New returns a messages backend.
func New(o upstream.HTTPOptions) *Backend {
	b := &Backend{h: protocol.NewClient(o, "https://api.anthropic.com", anthropicErrorHint)}
	b.url = b.h.Opts.BaseURL + "/v1/messages"
	b.hdr = b.h.Headers(b.baseHeader)
	return b
}

// Limits returns the backend model's limits.
func (b *Backend) Limits() upstream.Limits { return b.h.Opts.Limits }

// Defaults of the messages protocol.
const (
	anthropicVersion      = "2023-06-01"
	anthropicMaxTokens    = 4096
	anthropicMinBudget    = 1024
	anthropicBreakpoints  = 4
	anthropicJSONNotice   = "Reply with one valid JSON object and nothing else: no prose before or after it, no code fences."
	anthropicEmptySchema  = `{"type":"object","properties":{}}`
	anthropicThinkingTopP = 0.95
)

// Complete sends req upstream and returns the whole reply.
func (b *Backend) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	body, err := b.body(req, false)
	if err != nil {
		return nil, err
	}
	raw, err := b.h.PostRead(ctx, b.url, b.hdr.Call, body)
	if err != nil {
		return nil, err
	}
	var r anResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, upstream.Malformed(err)
	}
	if r.Type == "error" && r.Error != nil {
		return nil, r.Error.llmError(raw)
	}
	out := &llm.Response{}
	for _, bl := range r.Content {
		switch bl.Type {
		case "text":
			if bl.Text != "" {
				out.Content = append(out.Content, llm.TextPart(bl.Text))
			}
		case "thinking":
			out.Content = append(out.Content, llm.Part{Type: llm.PartReasoning, Text: bl.Thinking, Signature: protocol.TagSig(protocol.SigThinking, bl.Signature)})
		case "redacted_thinking":
			out.Content = append(out.Content, llm.Part{Type: llm.PartReasoning, Redacted: true, Signature: protocol.TagSig(protocol.SigRedacted, bl.Data)})
		case "tool_use":
			out.Content = append(out.Content, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{
				ID: protocol.NewCallID(), Name: bl.Name, Arguments: protocol.ArgsObject(bl.Input),
			}})
		}
	}
	out.FinishReason, out.StopSequence = anthropicFinish(r.StopReason, deref(r.StopSequence))
	out.Usage = r.Usage.canonical()
	if stops := protocol.GatewayStops(anthropicStops, req.Stop); len(stops) > 0 {
		protocol.CutAtStop(out, stops)
	}
	return out, nil
}

// Stream sends req upstream and returns its reply as events.
func (b *Backend) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	body, err := b.body(req, true)
	if err != nil {
		return nil, err
	}
	c, resp, err := b.h.Post(ctx, b.url, b.hdr.Stream, body)
	if err != nil {
		return nil, err
	}
	s, err := protocol.StartStream(c, resp.Body, &anthropicStream{blocks: make(map[int]*anBlockState)})
	return protocol.Stopped(s, err, anthropicStops, req)
}

// baseHeader is the protocol's own part of a request's header (New
// builds the whole with Client.Headers).
func (b *Backend) baseHeader(stream bool) http.Header {
	h := http.Header{}
	if b.h.Opts.APIKey != "" {
		h.Set("X-Api-Key", b.h.Opts.APIKey)
	}
	h.Set("Anthropic-Version", anthropicVersion)
	if stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	return h
}

// Request wire types.

type anRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        []anBlock       `json:"system,omitempty"`
	Messages      []anMessage     `json:"messages"`
	Tools         []anTool        `json:"tools,omitempty"`
	ToolChoice    *anToolChoice   `json:"tool_choice,omitempty"`
	Thinking      *anThinking     `json:"thinking,omitempty"`
	OutputConfig  *anOutputConfig `json:"output_config,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          *int            `json:"top_k,omitempty"`
	Metadata      *anMetadata     `json:"metadata,omitempty"`
	CacheControl  *anCacheControl `json:"cache_control,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
}

type anMessage struct {
	Role    string    `json:"role"`
	Content []anBlock `json:"content"`
}

// anBlock is a request content block of any type.
type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *anSource       `json:"source,omitempty"`
	Title     string          `json:"title,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []anBlock       `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// Thinking is always present on a thinking block, even when empty
	// (display "omitted" returns signature-only blocks).
	Thinking     *string         `json:"thinking,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	Data         string          `json:"data,omitempty"`
	CacheControl *anCacheControl `json:"cache_control,omitempty"`
}

type anSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type anTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	Strict       bool            `json:"strict,omitempty"`
	CacheControl *anCacheControl `json:"cache_control,omitempty"`
}

type anToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type anThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

type anOutputConfig struct {
	Effort string    `json:"effort,omitempty"`
	Format *anFormat `json:"format,omitempty"`
}

type anFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

type anMetadata struct {
	UserID string `json:"user_id"`
}

type anCacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

func anthropicCache(cc *llm.CacheControl) *anCacheControl {
	if cc == nil {
		return nil
	}
	out := &anCacheControl{Type: "ephemeral"}
	if cc.TTL == "5m" || cc.TTL == "1h" {
		out.TTL = cc.TTL
	}
	return out
}

// body translates req into a messages request body.
func (b *Backend) body(req *llm.Request, stream bool) ([]byte, error) {
	def := b.h.Opts.Limits.MaxCompletionTokens
	if def <= 0 {
		def = anthropicMaxTokens
	}
	r := anRequest{
		Model:         b.h.Opts.Model,
		MaxTokens:     b.h.MaxTokens(req, def),
		StopSequences: anthropicStops(req.Stop),
		Temperature:   req.Temperature,
		TopP:          req.TopP,
		TopK:          req.TopK,
		Stream:        stream,
		CacheControl:  anthropicCache(req.CacheControl),
	}
	if req.User != "" {
		r.Metadata = &anMetadata{UserID: req.User}
	}
	sys, err := protocol.SystemText(req)
	if err != nil {
		return nil, err
	}
	for _, p := range sys {
		if p.Text != "" {
			r.System = append(r.System, anBlock{Type: "text", Text: p.Text, CacheControl: anthropicCache(p.CacheControl)})
		}
	}
	if r.Messages, err = anthropicMessages(req); err != nil {
		return nil, err
	}
	if len(r.Messages) == 0 && len(r.System) > 0 {
		// Instructions alone (OpenAI takes a request of only a system or
		// developer message): the messages API needs a user turn, so the
		// instructions are it.
		r.Messages, r.System = []anMessage{{Role: "user", Content: r.System}}, nil
	}

	tools := protocol.AllowedTools(req)
	for _, t := range tools {
		schema := t.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(anthropicEmptySchema)
		}
		r.Tools = append(r.Tools, anTool{Name: t.Name, Description: t.Description, InputSchema: schema,
			Strict: t.Strict, CacheControl: anthropicCache(t.CacheControl)})
	}
	forced := false
	if len(r.Tools) > 0 {
		r.ToolChoice, forced = anthropicToolChoice(req)
	} else if names := calledTools(r.Messages); len(names) > 0 {
		for _, n := range names {
			r.Tools = append(r.Tools, anTool{Name: n, InputSchema: json.RawMessage(anthropicEmptySchema)})
		}
		r.ToolChoice = &anToolChoice{Type: "none"}
	}

	if rf := req.ResponseFormat; rf != nil {
		if len(rf.Schema) > 0 {
			r.OutputConfig = &anOutputConfig{Format: &anFormat{Type: "json_schema", Schema: rf.Schema}}
		} else {
			r.System = append(r.System, anBlock{Type: "text", Text: anthropicJSONNotice})
		}
	}

	if th, effort := anthropicThinking(req.Reasoning, r.MaxTokens, forced, r.Messages); th != nil {
		r.Thinking = th
		if effort != "" {
			if r.OutputConfig == nil {
				r.OutputConfig = &anOutputConfig{}
			}
			r.OutputConfig.Effort = effort
		}
		// Thinking is incompatible with temperature and top_k changes,
		// and allows top_p only from 0.95.
		r.Temperature, r.TopK = nil, nil
		if r.TopP != nil && *r.TopP < anthropicThinkingTopP {
			r.TopP = nil
		}
	}
	limitBreakpoints(&r)
	return protocol.EncodeJSON(r)
}

// anthropicMessages translates the turns: merged by role, tool results
// first in their user turn.
func anthropicMessages(req *llm.Request) ([]anMessage, error) {
	var out []anMessage
	for i, m := range req.Messages {
		param := "messages." + strconv.Itoa(i)
		role, parts := "user", m.Parts
		switch m.Role {
		case llm.RoleAssistant:
			role = "assistant"
		case llm.RoleSystem:
			parts = protocol.SystemGuidance(parts) // in the user turn (see protocol.SystemGuidance)
		}
		var blocks []anBlock
		for _, p := range parts {
			bl, ok, err := anthropicBlock(param, role, p)
			if err != nil {
				return nil, err
			}
			if ok {
				blocks = append(blocks, bl)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
		} else {
			out = append(out, anMessage{Role: role, Content: blocks})
		}
	}
	for i := range out {
		if out[i].Role == "user" {
			resultsFirst(out[i].Content)
		}
	}
	return out, nil
}

// resultsFirst moves tool_result blocks to the front, keeping the order
// within each kind: the API wants them to open the turn.
func resultsFirst(bs []anBlock) {
	var res, rest []anBlock
	for _, b := range bs {
		if b.Type == "tool_result" {
			res = append(res, b)
		} else {
			rest = append(rest, b)
		}
	}
	if len(res) == 0 || len(rest) == 0 {
		return
	}
	copy(bs, append(res, rest...))
}

// anthropicBlock translates one part; ok is false for parts not sent.
func anthropicBlock(param, role string, p llm.Part) (anBlock, bool, error) {
	cc := anthropicCache(p.CacheControl)
	switch p.Type {
	case llm.PartText:
		if p.Text == "" { // the API rejects empty text blocks
			return anBlock{}, false, nil
		}
		return anBlock{Type: "text", Text: p.Text, CacheControl: cc}, true, nil
	case llm.PartImage, llm.PartDocument:
		if role != "user" {
			return anBlock{}, false, llm.InvalidParam(param, "images and documents belong in user turns")
		}
		return anthropicMedia(p), true, nil
	case llm.PartReasoning:
		if role != "assistant" {
			return anBlock{}, false, nil
		}
		// Only our own signatures can be replayed (see protocol.SigThinking).
		if sig, ok := protocol.UntagSig(protocol.SigRedacted, p.Signature); ok {
			return anBlock{Type: "redacted_thinking", Data: sig}, true, nil
		}
		if sig, ok := protocol.UntagSig(protocol.SigThinking, p.Signature); ok {
			text := p.Text
			return anBlock{Type: "thinking", Thinking: &text, Signature: sig}, true, nil
		}
		return anBlock{}, false, nil
	case llm.PartToolCall:
		if p.ToolCall == nil || role != "assistant" {
			return anBlock{}, false, nil
		}
		tc := p.ToolCall
		return anBlock{Type: "tool_use", ID: anthropicID(tc.ID), Name: tc.Name, Input: protocol.ArgsObject(tc.Arguments), CacheControl: cc}, true, nil
	case llm.PartToolResult:
		if p.ToolResult == nil || role != "user" {
			return anBlock{}, false, nil
		}
		res := p.ToolResult
		bl := anBlock{Type: "tool_result", ToolUseID: anthropicID(res.CallID), IsError: res.IsError, CacheControl: cc}
		for _, c := range res.Content {
			switch c.Type {
			case llm.PartText:
				if c.Text != "" {
					bl.Content = append(bl.Content, anBlock{Type: "text", Text: c.Text})
				}
			case llm.PartImage, llm.PartDocument:
				bl.Content = append(bl.Content, anthropicMedia(c))
			}
		}
		return bl, true, nil
	}
	return anBlock{}, false, nil
}

// anthropicMedia translates an image (inline or by URL) or a PDF.
func anthropicMedia(p llm.Part) anBlock {
	src := &anSource{Type: "base64", MediaType: p.MediaType, Data: base64.StdEncoding.EncodeToString(p.Data)}
	if p.Type == llm.PartImage && p.URL != "" {
		src = &anSource{Type: "url", URL: p.URL}
	}
	bl := anBlock{Type: "image", Source: src, CacheControl: anthropicCache(p.CacheControl)}
	if p.Type == llm.PartDocument {
		bl.Type, bl.Title = "document", p.Title
	}
	return bl
}

// anthropicID reduces a tool-call id to the characters the API accepts.
func anthropicID(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// calledTools lists the tools the history calls, once each, in order.
func calledTools(msgs []anMessage) []string {
	var names []string
	seen := map[string]bool{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == "tool_use" && !seen[b.Name] {
				seen[b.Name] = true
				names = append(names, b.Name)
			}
		}
	}
	return names
}

// anthropicToolChoice translates tool_choice (docs/translation.md#tool_choice); forced
// reports a choice that requires a tool call.
func anthropicToolChoice(req *llm.Request) (tc *anToolChoice, forced bool) {
	switch req.ToolChoice.Mode {
	case llm.ToolChoiceAuto:
		tc = &anToolChoice{Type: "auto"}
	case llm.ToolChoiceNone:
		return &anToolChoice{Type: "none"}, false
	case llm.ToolChoiceRequired:
		tc, forced = &anToolChoice{Type: "any"}, true
	case llm.ToolChoiceTool:
		tc, forced = &anToolChoice{Type: "tool", Name: req.ToolChoice.Name}, true
	}
	if p := req.ParallelToolCalls; p != nil && !*p {
		if tc == nil {
			tc = &anToolChoice{Type: "auto"}
		}
		tc.DisableParallelToolUse = true
	}
	return tc, forced
}

// anthropicThinking returns the thinking configuration and the effort for
// output_config, or nil when thinking stays off (see Anthropic).
func anthropicThinking(r *llm.Reasoning, maxTokens int, forced bool, msgs []anMessage) (*anThinking, string) {
	if r == nil || !r.Enabled || forced || !replaysThinking(msgs) {
		return nil, ""
	}
	if r.BudgetTokens > 0 {
		budget := min(r.BudgetTokens, maxTokens-1)
		if budget < anthropicMinBudget {
			return nil, ""
		}
		return &anThinking{Type: "enabled", BudgetTokens: budget, Display: "summarized"}, ""
	}
	effort := protocol.EffortLevel(r.Effort)
	switch effort {
	case "minimal":
		effort = "low"
	case "none":
		effort = ""
	}
	return &anThinking{Type: "adaptive", Display: "summarized"}, effort
}

// replaysThinking reports whether the history can go to a thinking
// request: when it ends in tool results, the assistant turn that called
// the tools must start with its thinking block, which the API checks.
func replaysThinking(msgs []anMessage) bool {
	n := len(msgs)
	if n < 2 || msgs[n-1].Role != "user" || len(msgs[n-1].Content) == 0 || msgs[n-1].Content[0].Type != "tool_result" {
		return true
	}
	prev := msgs[n-2]
	if prev.Role != "assistant" || len(prev.Content) == 0 {
		return true
	}
	t := prev.Content[0].Type
	return t == "thinking" || t == "redacted_thinking"
}

// limitBreakpoints keeps the last four cache breakpoints, in prompt order
// (tools, system, messages, then the request's own).
func limitBreakpoints(r *anRequest) {
	var marks []**anCacheControl
	for i := range r.Tools {
		marks = append(marks, &r.Tools[i].CacheControl)
	}
	for i := range r.System {
		marks = append(marks, &r.System[i].CacheControl)
	}
	for i := range r.Messages {
		for j := range r.Messages[i].Content {
			marks = append(marks, &r.Messages[i].Content[j].CacheControl)
		}
	}
	marks = append(marks, &r.CacheControl)
	n := 0
	for i := len(marks) - 1; i >= 0; i-- {
		if *marks[i] == nil {
			continue
		}
		if n++; n > anthropicBreakpoints {
			*marks[i] = nil
		}
	}
}

// anthropicStops keeps the sequences that hold something other than white
// space: the API rejects the others.
func anthropicStops(stops []string) []string {
	for i, s := range stops {
		if strings.TrimSpace(s) == "" {
			out := append([]string(nil), stops[:i]...)
			for _, s := range stops[i+1:] {
				if strings.TrimSpace(s) != "" {
					out = append(out, s)
				}
			}
			return out
		}
	}
	return stops
}
