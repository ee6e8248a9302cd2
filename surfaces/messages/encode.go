package messages

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// message is a complete reply (docs/wire/messages.md#responses), also the message
// of the stream's message_start. Every member the SDKs' types declare always
// present is sent, as the API sends it: container, stop_details and
// diagnostics are null (svcgw runs no containers, answers no refusal
// details and runs no cache diagnostics).
type message struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"` // "message"
	Role         string    `json:"role"` // "assistant"
	Model        string    `json:"model"`
	Content      []block   `json:"content"`
	StopReason   *string   `json:"stop_reason"`
	StopSequence *string   `json:"stop_sequence"`
	StopDetails  *struct{} `json:"stop_details"` // null
	Container    *struct{} `json:"container"`    // null
	Diagnostics  *struct{} `json:"diagnostics"`  // null
	Usage        msgUsage  `json:"usage"`
}

// block is a response content block. Pointer fields are emitted only for the
// block types that carry them; the stream's content_block_start needs empty
// accumulators ("text":"", "input":{}), which omitempty would drop. A text
// block's citations are empty (svcgw cites nothing): [] rather than null,
// which the types allow too, because the AI SDK's Anthropic provider (3.x)
// validates citations as an array when present and failed the whole reply
// on null; a tool_use block's caller is the model itself ({"type":"direct"}).
type block struct {
	Type      string          `json:"type"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"` // redacted_thinking
	Text      *string         `json:"text,omitempty"`
	Citations json.RawMessage `json:"citations,omitempty"` // text: []
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Caller    *caller         `json:"caller,omitempty"` // tool_use
}

// caller is who called a tool: always the model (the API's other callers
// are its own server tools).
type caller struct {
	Type string `json:"type"` // "direct"
}

var (
	noCitations  = json.RawMessage("[]")
	directCaller = &caller{Type: "direct"}
)

// textBlock is a text block of text.
func textBlock(text string) block {
	return block{Type: "text", Text: ptr(text), Citations: noCitations}
}

// toolUseBlock is a tool_use block.
func toolUseBlock(id, name string, input json.RawMessage) block {
	return block{Type: "tool_use", ID: toolID(id), Name: name, Input: input, Caller: directCaller}
}

// msgUsage is the usage object. input_tokens excludes cache reads and
// writes: the prompt total is the sum of the three input counts.
// inference_geo and server_tool_use are null (svcgw does not say where a
// backend ran, and offers no server tools); output_tokens_details counts
// the thinking tokens when the backend reported any, null otherwise.
type msgUsage struct {
	InputTokens              int                  `json:"input_tokens"`
	CacheCreationInputTokens int                  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int                  `json:"cache_read_input_tokens"`
	CacheCreation            *cacheCreation       `json:"cache_creation"`
	OutputTokens             int                  `json:"output_tokens"`
	OutputTokensDetails      *outputTokensDetails `json:"output_tokens_details"`
	ServerToolUse            *struct{}            `json:"server_tool_use"` // null
	InferenceGeo             *string              `json:"inference_geo"`   // null
	ServiceTier              string               `json:"service_tier"`
	Speed                    string               `json:"speed"`
}

// deltaUsage is message_delta's usage: the counts, without the reply's
// cache breakdown, tier, speed and geography.
type deltaUsage struct {
	InputTokens              int                  `json:"input_tokens"`
	CacheCreationInputTokens int                  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int                  `json:"cache_read_input_tokens"`
	OutputTokens             int                  `json:"output_tokens"`
	OutputTokensDetails      *outputTokensDetails `json:"output_tokens_details"`
	ServerToolUse            *struct{}            `json:"server_tool_use"` // null
}

type cacheCreation struct {
	Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
}

type outputTokensDetails struct {
	ThinkingTokens int `json:"thinking_tokens"`
}

// toUsage maps canonical usage. The 1h share of cache writes is the
// backend's, bounded by the writes; the rest are 5m.
func toUsage(u llm.Usage) msgUsage {
	h := min(max(u.CacheCreation1hTokens, 0), u.CacheCreationTokens)
	return msgUsage{
		InputTokens:              u.UncachedInputTokens(),
		CacheCreationInputTokens: u.CacheCreationTokens,
		CacheReadInputTokens:     u.CachedInputTokens,
		CacheCreation:            &cacheCreation{Ephemeral5m: u.CacheCreationTokens - h, Ephemeral1h: h},
		OutputTokens:             u.OutputTokens,
		OutputTokensDetails:      thinkingTokens(u),
		ServiceTier:              "standard",
		Speed:                    "standard",
	}
}

// toDeltaUsage is message_delta's usage of u.
func toDeltaUsage(u llm.Usage) deltaUsage {
	return deltaUsage{
		InputTokens:              u.UncachedInputTokens(),
		CacheCreationInputTokens: u.CacheCreationTokens,
		CacheReadInputTokens:     u.CachedInputTokens,
		OutputTokens:             u.OutputTokens,
		OutputTokensDetails:      thinkingTokens(u),
	}
}

func thinkingTokens(u llm.Usage) *outputTokensDetails {
	if u.ReasoningTokens <= 0 {
		return nil
	}
	return &outputTokensDetails{ThinkingTokens: u.ReasoningTokens}
}

// stopReason maps a finish reason to stop_reason and stop_sequence; the
// latter is null unless a stop sequence matched (docs/wire/messages.md#responses).
func stopReason(f llm.FinishReason, seq string) (*string, *string) {
	r := "end_turn"
	switch f {
	case llm.FinishStopSequence:
		r = "stop_sequence"
		if seq != "" {
			return &r, &seq
		}
	case llm.FinishLength:
		r = "max_tokens"
	case llm.FinishToolCalls:
		r = "tool_use"
	case llm.FinishContentFilter:
		r = "refusal"
	}
	return &r, nil
}

// toolInput renders a call's arguments as the JSON object input must be.
// Empty arguments are {}; anything that is not a JSON object (a backend's
// malformed call) is kept as text under "_raw" rather than lost
// (docs/translation.md#tool-calls-and-results).
func toolInput(args json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return json.RawMessage(`{}`)
	}
	if args := bytes.TrimSpace(args); args[0] == '{' && json.Valid(args) {
		return llm.CompactJSON(args)
	}
	raw, _ := json.Marshal(map[string]string{"_raw": string(args)})
	return raw
}

func ptr(s string) *string { return &s }

// toBlocks renders the reply's parts in order. Tool calls without an id (some
// backends omit them) get a fresh toolu_ id, which the caller echoes in its
// tool_result.
func toBlocks(parts []llm.Part) []block {
	blocks := make([]block, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case llm.PartReasoning:
			if p.Redacted {
				blocks = append(blocks, block{Type: "redacted_thinking", Data: p.Signature})
				continue
			}
			blocks = append(blocks, block{Type: "thinking", Thinking: ptr(p.Text), Signature: ptr(p.Signature)})
		case llm.PartText:
			if p.Text == "" {
				continue // the vendor never returns empty text blocks, and rejects them on replay
			}
			blocks = append(blocks, textBlock(p.Text))
		case llm.PartToolCall:
			if p.ToolCall == nil {
				continue
			}
			blocks = append(blocks, toolUseBlock(p.ToolCall.ID, p.ToolCall.Name, toolInput(p.ToolCall.Arguments)))
		}
	}
	return blocks
}

func toolID(id string) string {
	if id == "" {
		return llm.NewID("toolu_", 24)
	}
	return id
}

// WriteResponse writes a complete reply with status 200. resp.ID and
// resp.Model (the caller's model id) are set by the server.
func (Codec) WriteResponse(w http.ResponseWriter, _ *llm.Request, resp *llm.Response) error {
	reason, seq := stopReason(resp.FinishReason, resp.StopSequence)
	return surface.WriteJSON(w, http.StatusOK, message{
		ID:           resp.ID,
		Type:         "message",
		Role:         "assistant",
		Model:        resp.Model,
		Content:      toBlocks(resp.Content),
		StopReason:   reason,
		StopSequence: seq,
		Usage:        toUsage(resp.Usage),
	})
}
