// Package openai is the backend for the chat-completions protocol: OpenAI
// itself and every server that speaks it (OpenRouter, vLLM, llama.cpp,
// Ollama). It owns the protocol's wire types, the translation of a
// canonical request into them, and the reading of its replies, streams and
// errors back into canonical form (see Backend).
//
// openai imports upstream (the Backend contract and the error vocabulary),
// upstream/internal/protocol (the shared transport, stream reading and
// translation helpers) and llm; never another vendor's package.
package openai

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Backend serves canonical requests through any server that speaks
// chat-completions (docs/wire/chat-completions.md): OpenAI itself,
// OpenRouter, vLLM, llama.cpp, Ollama. It posts to
// {BaseURL}/chat/completions, and embeddings to {BaseURL}/embeddings
// (Embed, in embed.go; Hugging Face TEI serves that endpoint too).
//
// Translation notes (docs/translation.md):
//   - System parts become one system message, and system guidance inside
//     the conversation (llm.RoleSystem) a system message at its place;
//     tool results become tool
//     messages, followed by a user message with any images they held and
//     the rest of the user turn (#tool-calls-and-results, policy). A tool message has no error
//     flag, so a failed call's result (Anthropic is_error, a Gemini
//     {"error": …} response) opens with the line "[tool call failed]"
//     (policy).
//   - stop takes at most 4 sequences: the first 4 go upstream and, when
//     there were more, the gateway applies them all (protocol.Stopped).
//   - Reasoning parts are not sent: the protocol has no slot for them.
//     Cache breakpoints are stripped (#content-parts). top_k does not exist here.
//   - Streams always ask for usage (stream_options.include_usage), whatever
//     the caller asked: the usage-only chunk after the finish_reason chunk
//     is what the call is billed by, so the stream ends only at [DONE] or
//     EOF. An upstream that reports no usage at all gets an estimate (the
//     llm package's), never zero.
//   - Reasoning arrives as the non-standard reasoning_content (DeepSeek,
//     vLLM) or reasoning (OpenRouter, newer vLLM) delta.
//   - With HTTPOptions.PromptCacheKey, prompt_cache_key is derived per
//     account (see cacheKey); the caller's own is never sent as it is.
type Backend struct {
	h        protocol.Client
	url      string
	embedURL string // {BaseURL}/embeddings (see Embed)
	// cacheSecret keys the prompt_cache_key HMAC (see cacheKey).
	cacheSecret []byte
	// auth is the Authorization header's value, built once (nil: none).
	auth []string
	hdr  protocol.Headers // built once by New
}

var _ upstream.Backend = (*Backend)(nil)

// New returns a chat-completions backend.
func New(o upstream.HTTPOptions) *Backend {
	b := &Backend{h: protocol.NewClient(o, "https://api.openai.com/v1", openAIErrorHint)}
	b.url = b.h.Opts.BaseURL + "/chat/completions"
	b.embedURL = b.h.Opts.BaseURL + "/embeddings"
	sum := sha256.Sum256([]byte("svcgw prompt_cache_key\x00" + o.APIKey))
	b.cacheSecret = sum[:]
	if b.h.Opts.APIKey != "" {
		b.auth = []string{"Bearer " + b.h.Opts.APIKey}
	}
	b.hdr = b.h.Headers(b.baseHeader)
	return b
}

// cacheKey is the prompt_cache_key sent upstream (with PromptCacheKey):
// an HMAC of the call's account and the caller's own key, if any, so that
// calls of one account (and one caller key) share cache routing while no
// two accounts ever do, and neither the account nor the caller's key is
// sent as it is. The HMAC is keyed by a hash of the upstream's API key:
// stable across restarts (a new key would throw the cache affinity away)
// and unknown to callers; the vendor, which knows its own key, learns no
// more than which calls come from one account, which the shared prefixes
// tell it anyway.
func (b *Backend) cacheKey(req *llm.Request) string {
	if !b.h.Opts.PromptCacheKey {
		return ""
	}
	m := hmac.New(sha256.New, b.cacheSecret)
	m.Write([]byte(req.Account))
	m.Write([]byte{0})
	m.Write([]byte(req.CacheKey))
	return "svc_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:24])
}

// Limits returns the backend model's limits.
func (b *Backend) Limits() upstream.Limits { return b.h.Opts.Limits }

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
	// The scanner reads the usual reply (scanReply); anything else is
	// read by encoding/json's rules, run by the implementation of Go's
	// json/v2 proposal (docs/decoding.md): the same result at half the CPU
	// and a third of the allocations of encoding/json's own decoder
	// (bench/RESULTS.md, "The CPU of a non-streaming call").
	var r oaResponse // on the stack: the fallback decodes into its own
	var sc protocol.Scanner
	if !scanReply(&sc, raw, &r) {
		var d oaResponse
		if err := jsonv1.Unmarshal(raw, &d); err != nil {
			return nil, upstream.Malformed(err)
		}
		r = d
	}
	if r.Error != nil {
		return nil, r.Error.llmError(raw)
	}
	if len(r.Choices) == 0 {
		return nil, &llm.Error{Kind: llm.KindUpstream, Message: upstream.MsgNoReply, Err: errors.New("no choices")}
	}
	ch := r.Choices[0]
	out := &llm.Response{}
	if s := ch.Message.reasoning(); s != "" {
		out.Content = append(out.Content, llm.Part{Type: llm.PartReasoning, Text: s})
	}
	refusal := ch.Message.Refusal != nil && *ch.Message.Refusal != ""
	text := string(ch.Message.Content)
	if refusal {
		text += *ch.Message.Refusal
	}
	if text != "" {
		out.Content = append(out.Content, llm.TextPart(text))
	}
	for _, tc := range ch.Message.ToolCalls {
		out.Content = append(out.Content, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{
			ID: protocol.NewCallID(), Name: tc.Function.Name, Arguments: json.RawMessage(tc.arguments()),
		}})
	}
	out.FinishReason = openAIFinish(ch.FinishReason, len(ch.Message.ToolCalls) > 0, refusal)
	if r.Usage != nil {
		out.Usage = r.Usage.canonical()
	} else {
		n := 0
		for _, p := range out.Content {
			n += llm.PartTokens(p)
		}
		out.Usage = estimateUsage(req, n)
	}
	if stops := protocol.GatewayStops(openAIStops, req.Stop); len(stops) > 0 {
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
	// The stream keeps the prompt's estimate, not the request: the
	// conversation is let go while the reply streams.
	s, err := protocol.StartStream(c, resp.Body, &openAIStream{input: req.InputTokens()})
	return protocol.Stopped(s, err, openAIStops, req)
}

// baseHeader is the protocol's own part of a request's header (New
// builds the whole with Client.Headers).
func (b *Backend) baseHeader(stream bool) http.Header {
	h := make(http.Header, 4) // and Client.Headers' Content-Type and User-Agent
	if b.auth != nil {
		h["Authorization"] = b.auth
	}
	if stream {
		h["Accept"] = acceptSSE
	} else {
		h["Accept"] = acceptJSON
	}
	return h
}

var (
	acceptSSE  = []string{"text/event-stream"}
	acceptJSON = []string{"application/json"}
)

// Request wire types.

type oaRequest struct {
	Model               string             `json:"model"`
	Messages            []oaMessage        `json:"messages"`
	Tools               []oaTool           `json:"tools,omitempty"`
	ToolChoice          json.RawMessage    `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool              `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *oaResponseFormat  `json:"response_format,omitempty"`
	ReasoningEffort     string             `json:"reasoning_effort,omitempty"`
	MaxCompletionTokens int                `json:"max_completion_tokens,omitempty"`
	MaxTokens           int                `json:"max_tokens,omitempty"`
	Temperature         *float64           `json:"temperature,omitempty"`
	TopP                *float64           `json:"top_p,omitempty"`
	Stop                []string           `json:"stop,omitempty"`
	Seed                *int64             `json:"seed,omitempty"`
	PresencePenalty     *float64           `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty,omitempty"`
	LogitBias           map[string]float64 `json:"logit_bias,omitempty"`
	User                string             `json:"user,omitempty"`
	PromptCacheKey      string             `json:"prompt_cache_key,omitempty"`
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *oaStreamOptions   `json:"stream_options,omitempty"`
}

type oaStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaMessage struct {
	Role string `json:"role"`
	// Content is a string or a []oaPart (nil: none), encoded with the
	// request: encoded apart as a json.RawMessage, each message's text was
	// escaped, then scanned again by the encoder's compaction, then copied.
	Content    any          `json:"content,omitempty"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaPart struct {
	Type     string      `json:"type"`
	Text     string      `json:"text,omitempty"`
	ImageURL *oaImageURL `json:"image_url,omitempty"`
	File     *oaFile     `json:"file,omitempty"`
}

type oaImageURL struct {
	URL string `json:"url"`
}

type oaFile struct {
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data"`
}

type oaToolCall struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function oaFunctionCall `json:"function"`
}

type oaFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaTool struct {
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

type oaResponseFormat struct {
	Type       string        `json:"type"`
	JSONSchema *oaJSONSchema `json:"json_schema,omitempty"`
}

type oaJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict,omitempty"`
}

// body translates req into a chat-completions request body.
func (b *Backend) body(req *llm.Request, stream bool) ([]byte, error) {
	r := oaRequest{
		Model:            b.h.Opts.Model,
		Temperature:      req.Temperature,
		TopP:             req.TopP,
		Stop:             openAIStops(req.Stop),
		Seed:             req.Seed,
		PresencePenalty:  req.PresencePenalty,
		FrequencyPenalty: req.FrequencyPenalty,
		LogitBias:        req.LogitBias,
		User:             req.User,
		ReasoningEffort:  openAIEffort(req.Reasoning),
		PromptCacheKey:   b.cacheKey(req),
	}
	if n := b.h.MaxTokens(req, 0); n > 0 {
		if b.h.Opts.LegacyMaxTokens {
			r.MaxTokens = n
		} else {
			r.MaxCompletionTokens = n
		}
	}
	if stream {
		r.Stream = true
		r.StreamOptions = &oaStreamOptions{IncludeUsage: true} // always: trap 1
	}
	sys, err := protocol.SystemText(req)
	if err != nil {
		return nil, err
	}
	if len(sys) > 0 {
		r.Messages = append(r.Messages, oaMessage{Role: "system", Content: oaContent(textParts(sys))})
	}
	// System guidance inside the conversation is a system message at its
	// place, except between an assistant's tool calls and their tool
	// messages, which must follow the calls directly: there it waits
	// until they have.
	var held []oaMessage
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role == llm.RoleSystem {
			if text := textParts(m.Parts); len(text) > 0 {
				held = append(held, oaMessage{Role: "system", Content: oaContent(text)})
			}
		} else {
			msgs, err := openAIMessages(i, m)
			if err != nil {
				return nil, err
			}
			r.Messages = append(r.Messages, msgs...)
		}
		if n := len(r.Messages); n == 0 || len(r.Messages[n-1].ToolCalls) == 0 {
			r.Messages = append(r.Messages, held...)
			held = held[:0]
		}
	}
	r.Messages = append(r.Messages, held...)
	for _, t := range req.Tools {
		r.Tools = append(r.Tools, oaTool{Type: "function", Function: oaFunction{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict,
		}})
	}
	if len(r.Tools) > 0 {
		r.ToolChoice = openAIToolChoice(req.ToolChoice)
		// OpenAI rejects parallel_tool_calls without tools.
		r.ParallelToolCalls = req.ParallelToolCalls
	}
	if rf := req.ResponseFormat; rf != nil {
		if len(rf.Schema) == 0 {
			r.ResponseFormat = &oaResponseFormat{Type: "json_object"}
		} else {
			r.ResponseFormat = &oaResponseFormat{Type: "json_schema", JSONSchema: &oaJSONSchema{
				Name: schemaName(rf.Name), Schema: rf.Schema, Strict: rf.Strict,
			}}
		}
	}
	if out, ok := r.appendJSON(make([]byte, 0, r.requestSize())); ok {
		return out, nil
	}
	return protocol.EncodeJSON(r)
}

// textParts returns the texts of ps as chat-completions parts.
func textParts(ps []llm.Part) []oaPart {
	out := make([]oaPart, 0, len(ps))
	for _, p := range ps {
		if p.Text != "" {
			out = append(out, oaPart{Type: "text", Text: p.Text})
		}
	}
	return out
}

// oaContent is a message's content: a plain string when it is one text
// part (what every compatible server accepts), an array otherwise.
func oaContent(ps []oaPart) any {
	if len(ps) == 1 && ps[0].Type == "text" {
		return ps[0].Text
	}
	return ps
}

// openAIMessages translates one canonical message into chat-completions
// messages. An assistant's turn and the others are translated apart: the
// request is encoded on the stack of the call's handler goroutine, below
// the router, and one frame holding both translations' temporaries took
// that stack past what 8 KiB holds (see server.serveStream).
func openAIMessages(i int, m *llm.Message) ([]oaMessage, error) {
	if m.Role == llm.RoleAssistant {
		return openAIAssistant(i, m)
	}
	return openAIUser(i, m)
}

// messageParam names message i, for an error only.
func messageParam(i int) string { return "messages." + strconv.Itoa(i) }

// openAIAssistant translates an assistant's turn.
func openAIAssistant(i int, m *llm.Message) ([]oaMessage, error) {
	msg := oaMessage{Role: "assistant"}
	var text strings.Builder
	for _, p := range m.Parts {
		switch p.Type {
		case llm.PartText:
			text.WriteString(p.Text)
		case llm.PartToolCall:
			if p.ToolCall == nil {
				continue
			}
			args := string(bytes.TrimSpace(p.ToolCall.Arguments))
			if args == "" {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, oaToolCall{ID: p.ToolCall.ID, Type: "function",
				Function: oaFunctionCall{Name: p.ToolCall.Name, Arguments: args}})
		case llm.PartReasoning:
			// No slot for it in chat-completions.
		default:
			return nil, llm.InvalidParam(messageParam(i), "assistant turns may only hold text, reasoning and tool calls on this route")
		}
	}
	if text.Len() > 0 {
		msg.Content = text.String()
	}
	if msg.Content == nil && msg.ToolCalls == nil {
		return nil, nil
	}
	return []oaMessage{msg}, nil
}

// openAIUser translates a user's turn, with its tool results.
func openAIUser(i int, m *llm.Message) ([]oaMessage, error) {
	param := func() string { return messageParam(i) } // for an error only
	var out []oaMessage
	var parts, media []oaPart
	for k := range m.Parts {
		p := &m.Parts[k]
		switch p.Type {
		case llm.PartToolResult:
			if p.ToolResult == nil {
				continue
			}
			res := p.ToolResult
			out = append(out, oaMessage{Role: "tool", ToolCallID: res.CallID, Content: toolMessageText(res)})
			// A tool message holds text only: its images follow in a
			// user message (docs/translation.md#tool-calls-and-results, policy).
			for k := range res.Content {
				if c := &res.Content[k]; c.Type != llm.PartText {
					op, err := openAIPart(param, c)
					if err != nil {
						return nil, err
					}
					media = append(media, op)
				}
			}
		case llm.PartText:
			if p.Text != "" {
				parts = append(parts, oaPart{Type: "text", Text: p.Text})
			}
		default:
			op, err := openAIPart(param, p)
			if err != nil {
				return nil, err
			}
			parts = append(parts, op)
		}
	}
	if parts = append(media, parts...); len(parts) > 0 {
		out = append(out, oaMessage{Role: "user", Content: oaContent(parts)})
	}
	return out, nil
}

// toolErrorMarker opens the text of a failed tool call's result on this
// protocol, whose tool messages have no error flag: the model still learns
// that the call failed (Anthropic's is_error, a Gemini {"error": …}
// response).
const toolErrorMarker = "[tool call failed]"

// toolMessageText is a tool message's text: the result's text, after the
// error marker line when the call failed.
func toolMessageText(res *llm.ToolResult) string {
	text := protocol.TextOf(res.Content)
	if !res.IsError {
		return text
	}
	if text == "" {
		return toolErrorMarker
	}
	return toolErrorMarker + "\n" + text
}

// openAIPart translates an image or a PDF.
func openAIPart(param func() string, p *llm.Part) (oaPart, error) {
	switch p.Type {
	case llm.PartText:
		return oaPart{Type: "text", Text: p.Text}, nil
	case llm.PartImage:
		u := p.URL
		if u == "" {
			u = protocol.DataURL(p.MediaType, p.Data)
		}
		return oaPart{Type: "image_url", ImageURL: &oaImageURL{URL: u}}, nil
	case llm.PartDocument:
		name := p.Title
		if name == "" {
			name = "document.pdf"
		}
		return oaPart{Type: "file", File: &oaFile{Filename: name, FileData: protocol.DataURL(p.MediaType, p.Data)}}, nil
	}
	return oaPart{}, llm.InvalidParam(param(), "user turns may only hold text, images, documents and tool results")
}

// openAIToolChoice translates tool_choice (docs/translation.md#tool_choice).
func openAIToolChoice(tc llm.ToolChoice) json.RawMessage {
	allowed := func(mode string) json.RawMessage {
		type fn struct {
			Name string `json:"name"`
		}
		type tool struct {
			Type     string `json:"type"`
			Function fn     `json:"function"`
		}
		v := struct {
			Type         string `json:"type"`
			AllowedTools struct {
				Mode  string `json:"mode"`
				Tools []tool `json:"tools"`
			} `json:"allowed_tools"`
		}{Type: "allowed_tools"}
		v.AllowedTools.Mode = mode
		for _, n := range tc.Allowed {
			v.AllowedTools.Tools = append(v.AllowedTools.Tools, tool{Type: "function", Function: fn{Name: n}})
		}
		b, _ := protocol.EncodeJSON(v)
		return b
	}
	switch tc.Mode {
	case llm.ToolChoiceNone:
		return json.RawMessage(`"none"`)
	case llm.ToolChoiceRequired:
		if len(tc.Allowed) > 0 {
			return allowed("required")
		}
		return json.RawMessage(`"required"`)
	case llm.ToolChoiceTool:
		b, _ := protocol.EncodeJSON(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
		return b
	case llm.ToolChoiceAuto:
		if len(tc.Allowed) > 0 {
			return allowed("auto")
		}
		return json.RawMessage(`"auto"`)
	}
	if len(tc.Allowed) > 0 {
		return allowed("auto")
	}
	return nil
}

// openAIEffort maps the caller's reasoning request to reasoning_effort.
// A caller that switched reasoning off by name (none, minimal) gets that
// name; one that did so otherwise (a zero budget, thinking disabled) gets
// the model's default, since not every model accepts "none".
func openAIEffort(r *llm.Reasoning) string {
	if r == nil {
		return ""
	}
	lvl := protocol.EffortLevel(r.Effort)
	if !r.Enabled {
		if lvl == "none" || lvl == "minimal" {
			return lvl
		}
		return ""
	}
	switch lvl {
	case "max":
		return "xhigh"
	case "", "none":
		if r.BudgetTokens > 0 {
			return protocol.BudgetEffort(r.BudgetTokens)
		}
		return ""
	}
	return lvl
}

// maxStop is the protocol's cap on the number of stop sequences (OpenAI's
// StopConfiguration maxItems).
const maxStop = 4

// openAIStops keeps the first four sequences.
func openAIStops(stops []string) []string { return stops[:min(len(stops), maxStop)] }

// schemaName returns a name matching [a-zA-Z0-9_-]{1,64}, as
// chat-completions requires of a JSON schema: the caller's with other
// characters replaced, or "response" when it gave none.
func schemaName(name string) string {
	if name == "" {
		return "response"
	}
	b := []byte(name)
	if len(b) > 64 {
		b = b[:64]
	}
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}
