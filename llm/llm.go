// Package llm holds svcgw's canonical model of an inference call: the request,
// the response, the stream events, usage, request types, effort and the error
// kinds every surface maps to its native envelope.
//
// Every wire format (chat-completions, Responses, messages, generate-content)
// decodes into these types and encodes from them; every upstream backend
// translates from them. llm imports nothing of svcgw's and nothing outside the
// standard library. There is no `any` here: wire unions stay in the packages that
// own the wire format.
package llm

import (
	"encoding/json"
	"time"
)

// Surface names the wire format a call came in on.
type Surface string

// The surfaces svcgw serves.
const (
	SurfaceChat       Surface = "chat"       // OpenAI chat-completions
	SurfaceResponses  Surface = "responses"  // OpenAI Responses API
	SurfaceMessages   Surface = "messages"   // Anthropic messages
	SurfaceGenContent Surface = "gencontent" // Gemini generate-content
)

// Role is the author of a message. The system prompt is not a message: it
// lives in Request.System.
type Role string

// The message roles. Tool results travel as PartToolResult parts inside a
// RoleUser message (the messages and generate-content convention); the
// chat-completions surface turns each `tool` message into such a part.
//
// RoleSystem is system guidance given inside the conversation (a messages
// caller's mid-conversation system message): text parts that apply from
// their position on, which a backend sends as a system message at that
// point where its protocol has one, else as marked guidance in the user
// turn around it.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
)

// PartType tells which fields of a Part are meaningful.
type PartType string

// The part types.
const (
	PartText       PartType = "text"        // Text
	PartImage      PartType = "image"       // MediaType + Data, or URL
	PartDocument   PartType = "document"    // a PDF: MediaType + Data; Title optional
	PartToolCall   PartType = "tool_call"   // ToolCall (assistant)
	PartToolResult PartType = "tool_result" // ToolResult (user)
	PartReasoning  PartType = "reasoning"   // Text and/or Signature (assistant)
)

// Part is one piece of message content.
type Part struct {
	Type PartType

	// Text is the text of a text or reasoning part.
	Text string

	// MediaType and Data carry inline binary content (images, PDFs): Data is
	// the raw bytes, already base64-decoded by the surface.
	MediaType string
	Data      []byte
	// URL is a remote image address (http, https); empty for inline data.
	URL string
	// Title names a document.
	Title string

	ToolCall   *ToolCall
	ToolResult *ToolResult

	// Signature is the opaque replay token of a reasoning part (a thinking
	// signature or thought signature), as the caller received it from us.
	Signature string
	// Redacted marks an opaque reasoning part whose Signature holds the data.
	Redacted bool

	// CacheControl marks a cache breakpoint after this part: everything up to
	// and including it is a cacheable prefix.
	CacheControl *CacheControl
}

// TextPart returns a text part.
func TextPart(s string) Part { return Part{Type: PartText, Text: s} }

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON object of arguments, as raw JSON text.
	Arguments json.RawMessage
	// Signature is an opaque replay token attached to the call (Gemini's
	// thoughtSignature), if any.
	Signature string
}

// ToolResult answers a ToolCall.
type ToolResult struct {
	CallID string
	// Name is the called tool's name when the wire format carries it
	// (generate-content requires it; the others recover it from the call).
	Name    string
	Content []Part // text, image and document parts
	IsError bool
}

// CacheControl is a prompt-cache breakpoint.
type CacheControl struct {
	// TTL is the cache lifetime the caller asked for: "5m" (default) or "1h".
	TTL string
}

// Message is one conversational turn.
type Message struct {
	Role  Role
	Parts []Part
	// Turns is how many of the caller's messages this one holds: surfaces
	// merge consecutive messages of one role (as the vendors do), and a
	// bound on parts per message is reported in the caller's terms. 0 and
	// 1 both mean one. It says how the request was written, not what it
	// says: encoding a request loses it, and dumps leave it out.
	Turns int `json:"-"`
}

// Merge appends parts, sent as another of the caller's messages, to m.
func (m *Message) Merge(parts ...Part) {
	m.Parts = append(m.Parts, parts...)
	m.Turns = max(m.Turns, 1) + 1
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object (raw JSON); nil
	// means "no parameters".
	Parameters json.RawMessage
	Strict     bool
	// CacheControl marks a cache breakpoint after this tool definition.
	CacheControl *CacheControl

	// Namespace and Freeform record how a Responses caller declared the
	// tool, so that the surface can give its calls back in that shape;
	// backends see an ordinary function and need not look at them.
	// Namespace is the group of a namespace tool, already part of Name
	// (Namespace + "__" + the tool's own name). Freeform marks a custom
	// tool, whose input is raw text: Parameters is then an object with
	// one string property, "input", which holds it.
	Namespace string
	Freeform  bool
}

// ToolChoiceMode says whether and which tool the model must call.
type ToolChoiceMode string

// The tool-choice modes.
const (
	ToolChoiceAuto     ToolChoiceMode = "auto"
	ToolChoiceNone     ToolChoiceMode = "none"
	ToolChoiceRequired ToolChoiceMode = "required" // some tool (Anthropic "any", Gemini ANY)
	ToolChoiceTool     ToolChoiceMode = "tool"     // the tool named in ToolChoice.Name
)

// ToolChoice constrains tool use. The zero value means "not specified".
type ToolChoice struct {
	Mode ToolChoiceMode
	Name string
	// Allowed restricts the callable tools to these names (Gemini
	// allowedFunctionNames, OpenAI allowed_tools); empty means all.
	Allowed []string
}

// ResponseFormat asks for JSON output.
type ResponseFormat struct {
	// Name is the schema's name (chat-completions requires one).
	Name string
	// Schema is the JSON Schema the reply must satisfy, as raw JSON; nil
	// means "any JSON object" (json_object mode).
	Schema json.RawMessage
	Strict bool
}

// Reasoning is what the caller asked of the model's thinking. A nil
// *Reasoning on a Request means the caller did not ask.
type Reasoning struct {
	// Effort is the caller's native effort string (low, medium, high, …),
	// empty when it asked by budget or flag only.
	Effort string
	// BudgetTokens is a thinking budget, 0 when none.
	BudgetTokens int
	// Enabled is false when the caller explicitly turned thinking off
	// (reasoning_effort "none", thinking disabled, thinkingBudget 0).
	Enabled bool
	// IncludeThoughts asks for the reasoning text in the reply.
	IncludeThoughts bool
}

// Request is a canonical inference call.
type Request struct {
	// Model is the caller's model id: intent only, echoed back unchanged.
	Model string

	System   []Part
	Messages []Message

	Tools             []Tool
	ToolChoice        ToolChoice
	ParallelToolCalls *bool

	ResponseFormat *ResponseFormat
	Reasoning      *Reasoning

	// MaxTokens caps the output; 0 means the backend's default.
	MaxTokens        int
	Temperature      *float64
	TopP             *float64
	TopK             *int
	Stop             []string
	N                int // candidates asked for; 0 or 1 means one
	Seed             *int64
	PresencePenalty  *float64
	FrequencyPenalty *float64
	LogitBias        map[string]float64
	Logprobs         bool
	TopLogprobs      *int
	User             string

	Stream bool
	// IncludeUsage asks for usage in the stream (chat-completions
	// stream_options.include_usage). Upstreams are always asked for usage.
	IncludeUsage bool
	// CacheControl is a request-level breakpoint (automatic prefix caching).
	CacheControl *CacheControl
	// CacheKey is the caller's own prompt-cache routing hint (OpenAI's
	// prompt_cache_key), if it sent one. Backends scope it to Account.
	CacheKey string `json:",omitempty"`

	// PromptTokens is svcgw's own count of the prompt (InputTokens), set
	// by the server once the call is decoded so that nothing counts it
	// twice; 0 means not counted yet. Upstream bounds the input usage a
	// backend reports by it. It is never sent upstream.
	PromptTokens int `json:"-"`

	// Account names, opaquely, the account the call is made for. The
	// server sets it (never a caller), and whatever a backend shares
	// between calls — a prompt cache, a cache key, cache affinity — is
	// scoped to it, so that no tenant's calls ever benefit from, or learn
	// about, another's. It is never sent upstream as it is.
	Account string `json:"-"`
}

// FinishReason is why generation stopped.
type FinishReason string

// The finish reasons. Each surface maps them to its own vocabulary.
const (
	FinishStop          FinishReason = "stop"           // natural end
	FinishStopSequence  FinishReason = "stop_sequence"  // a requested stop string matched
	FinishLength        FinishReason = "length"         // max tokens reached
	FinishToolCalls     FinishReason = "tool_calls"     // the model called tools
	FinishContentFilter FinishReason = "content_filter" // refused or filtered
)

// Usage counts tokens. InputTokens includes the cached and cache-write
// tokens; OutputTokens includes ReasoningTokens (the OpenAI convention).
type Usage struct {
	InputTokens         int
	OutputTokens        int
	CachedInputTokens   int // read from cache
	CacheCreationTokens int // written to cache (all lifetimes)
	// CacheCreation1hTokens is the part of CacheCreationTokens written with a
	// one-hour lifetime, which is priced higher.
	CacheCreation1hTokens int
	ReasoningTokens       int
}

// TotalTokens is input plus output.
func (u Usage) TotalTokens() int { return u.InputTokens + u.OutputTokens }

// UncachedInputTokens is input that was neither read from nor written to the
// cache.
func (u Usage) UncachedInputTokens() int {
	n := u.InputTokens - u.CachedInputTokens - u.CacheCreationTokens
	if n < 0 {
		return 0
	}
	return n
}

// Response is a complete (non-streaming) reply.
type Response struct {
	// ID is the gateway-issued id of this call, already in the surface's
	// format; it is the id the generation and feedback endpoints accept.
	ID      string
	Model   string // the caller's model id, echoed
	Created time.Time
	// Content holds reasoning, text and tool-call parts in order.
	Content      []Part
	FinishReason FinishReason
	// StopSequence is the stop string that matched, when FinishReason is
	// FinishStopSequence.
	StopSequence string
	Usage        Usage
}

// Text concatenates the text parts of the response.
func (r *Response) Text() string {
	var s string
	for _, p := range r.Content {
		if p.Type == PartText {
			s += p.Text
		}
	}
	return s
}

// EventType tells which fields of an Event are meaningful.
type EventType int

// The stream event types, in the order a stream produces them: reasoning
// deltas come before text deltas; a tool call is a start followed by argument
// deltas; EventFinish is last and carries the finish reason and usage.
const (
	EventReasoningDelta EventType = iota + 1 // Text, and/or Signature at the end of a reasoning block
	EventTextDelta                           // Text
	EventToolCallStart                       // Index, ToolCall.ID, ToolCall.Name, ToolCall.Signature
	EventToolCallDelta                       // Index, Text (a fragment of the arguments JSON)
	EventFinish                              // FinishReason, StopSequence, Usage
)

// Event is one step of a streamed reply.
type Event struct {
	Type EventType
	Text string
	// Signature closes a reasoning block with its opaque replay token.
	Signature string
	// Index is the 0-based position of a tool call among this reply's calls.
	Index        int
	ToolCall     *ToolCall
	FinishReason FinishReason
	StopSequence string
	// Usage on EventFinish is the call's usage. On the first event of a
	// stream it may hold the input-side counts (InputTokens,
	// CachedInputTokens, CacheCreationTokens) when the backend reports
	// them before the reply, as a messages stream's message_start does;
	// nil when it does not. No other event carries it.
	Usage *Usage
}

// RequestType is the class a call is routed and priced by.
type RequestType string

// The request types of the contract (docs/request-types.md).
const (
	TypeVision   RequestType = "vision"
	TypeDocument RequestType = "document"
	TypeLong     RequestType = "long"
	TypeCode     RequestType = "code"
	TypeJSON     RequestType = "json"
	TypeReason   RequestType = "reason"
	TypeFlash    RequestType = "flash"
	TypePro      RequestType = "pro"
	// TypeEmbedding is every embeddings call: its endpoint, not its
	// content, decides it, so classification never gives it to a
	// generation.
	TypeEmbedding RequestType = "embedding"
)

// RequestTypes lists every request type: the generation types in
// classification priority order, then embedding.
var RequestTypes = []RequestType{TypeDocument, TypeVision, TypeCode, TypeJSON, TypeLong, TypeReason, TypeFlash, TypePro, TypeEmbedding}

// Valid reports whether t is one of the request types.
func (t RequestType) Valid() bool {
	for _, v := range RequestTypes {
		if v == t {
			return true
		}
	}
	return false
}

// Effort is the caller's cost-versus-quality bias (header X-SVC-Effort).
type Effort string

// The effort values. EffortAuto lets classification decide.
const (
	EffortAuto   Effort = "auto"
	EffortLow    Effort = "low"
	EffortMedium Effort = "medium"
	EffortHigh   Effort = "high"
)

// Tier is the effort tier a call is routed and priced in.
type Tier string

// The tiers.
const (
	TierLow    Tier = "low"
	TierMedium Tier = "medium"
	TierHigh   Tier = "high"
)

// Tiers lists every tier.
var Tiers = []Tier{TierLow, TierMedium, TierHigh}
