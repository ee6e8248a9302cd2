package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// chatRequest is a chat-completions request body. Unknown fields are
// ignored: SDKs add fields faster than gateways learn them.
type chatRequest struct {
	Model         *string       `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools             []chatTool      `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ResponseFormat    *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	N                   *int               `json:"n"`
	Stop                stopList           `json:"stop"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	Logprobs            bool               `json:"logprobs"`
	TopLogprobs         *int               `json:"top_logprobs"`
	Seed                *int64             `json:"seed"`
	User                string             `json:"user"`
	PromptCacheKey      string             `json:"prompt_cache_key"`
	ReasoningEffort     string             `json:"reasoning_effort"`
	// Reasoning is the OpenRouter-style reasoning object, which
	// supported_parameters advertises alongside reasoning_effort.
	Reasoning *struct {
		Effort    string `json:"effort"`
		MaxTokens int    `json:"max_tokens"`
		Enabled   *bool  `json:"enabled"`
		Exclude   bool   `json:"exclude"`
	} `json:"reasoning"`
	CacheControl *cacheControl `json:"cache_control"`
}

type chatMessage struct {
	Role       *string        `json:"role"`
	Content    content        `json:"content"`
	Name       string         `json:"name"`
	ToolCalls  []chatToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
	// CacheControl on a message marks its last part as a breakpoint.
	CacheControl *cacheControl `json:"cache_control"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      bool            `json:"strict"`
	} `json:"function"`
	CacheControl *cacheControl `json:"cache_control"`
}

// stopList is the `string | []string` union of stop.
type stopList []string

func (s *stopList) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case 'n':
		return dec.SkipValue()
	case '"':
		var one string
		if err := jsonv2.UnmarshalDecode(dec, &one); err != nil {
			return err
		}
		*s = stopList{one}
		return nil
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	var many []string
	if err := jsonv2.Unmarshal(v, &many); err != nil {
		return llm.InvalidParam("stop", "stop must be a string or an array of strings")
	}
	*s = many
	return nil
}

// DecodeRequest decodes a chat-completions request body.
func (Codec) DecodeRequest(_ *http.Request, body []byte) (*llm.Request, error) {
	return decodeChat(body)
}

func decodeChat(body []byte) (*llm.Request, error) {
	var cr chatRequest
	var sc llm.JSONScanner
	if !scanChat(&sc, body, &cr) { // the usual request, read by hand (scan.go)
		// The fallback decodes into a request of its own: decoding into cr
		// would move cr to the heap on every call (288 bytes).
		d := new(chatRequest)
		if err := surface.Decode(body, d, surface.EncodingJSON); err != nil {
			return nil, decodeError(err)
		}
		cr = *d
	}
	if cr.Model == nil || *cr.Model == "" {
		return nil, llm.InvalidParam("model", "model is required")
	}
	if len(cr.Messages) == 0 {
		return nil, llm.InvalidParam("messages", "messages must be a non-empty array")
	}
	req := &llm.Request{
		Model:             *cr.Model,
		ParallelToolCalls: cr.ParallelToolCalls,
		Temperature:       cr.Temperature,
		TopP:              cr.TopP,
		Stop:              cr.Stop,
		Seed:              cr.Seed,
		PresencePenalty:   cr.PresencePenalty,
		FrequencyPenalty:  cr.FrequencyPenalty,
		LogitBias:         cr.LogitBias,
		Logprobs:          cr.Logprobs,
		TopLogprobs:       cr.TopLogprobs,
		User:              cr.User,
		CacheKey:          cr.PromptCacheKey,
		Stream:            cr.Stream,
		CacheControl:      cr.CacheControl.canonical(),
	}
	if cr.StreamOptions != nil {
		if !cr.Stream {
			return nil, llm.InvalidParam("stream_options", "stream_options is only allowed when stream is true")
		}
		req.IncludeUsage = cr.StreamOptions.IncludeUsage
	}
	// max_completion_tokens wins over the deprecated max_tokens when both
	// are sent; the error names whichever field the value came from. Both
	// must be at least 1 when sent, as OpenAI's API requires (0 is not
	// "unset" there: it is a 400 integer_below_min_value); null is unset.
	maxField := ""
	switch {
	case cr.MaxCompletionTokens != nil:
		req.MaxTokens, maxField = *cr.MaxCompletionTokens, "max_completion_tokens"
	case cr.MaxTokens != nil:
		req.MaxTokens, maxField = *cr.MaxTokens, "max_tokens"
	}
	if maxField != "" && req.MaxTokens < 1 {
		return nil, llm.InvalidParam(maxField, "Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", maxField, req.MaxTokens)
	}
	if cr.N != nil {
		if *cr.N < 1 || *cr.N > 1 {
			return nil, llm.InvalidParam("n", "n must be 1: this gateway returns one choice per call")
		}
		req.N = *cr.N
	}
	if len(req.Stop) > 4 {
		return nil, llm.InvalidParam("stop", "stop takes at most 4 sequences")
	}
	if err := decodeMessages(cr.Messages, req); err != nil {
		return nil, err
	}
	for i, t := range cr.Tools {
		f := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, llm.InvalidParam(f+".type", "%s.type must be \"function\"", f)
		}
		if t.Function == nil || t.Function.Name == "" {
			return nil, llm.InvalidParam(f+".function.name", "%s.function.name is required", f)
		}
		if err := schemaObject(f+".function.parameters", t.Function.Parameters); err != nil {
			return nil, err
		}
		req.Tools = append(req.Tools, llm.Tool{
			Name:         t.Function.Name,
			Description:  t.Function.Description,
			Parameters:   nullToNil(t.Function.Parameters),
			Strict:       t.Function.Strict,
			CacheControl: t.CacheControl.canonical(),
		})
	}
	tc, err := decodeToolChoice(cr.ToolChoice, false)
	if err != nil {
		return nil, err
	}
	req.ToolChoice = tc
	if rf := cr.ResponseFormat; rf != nil {
		switch rf.Type {
		case "text", "":
		case "json_object":
			req.ResponseFormat = &llm.ResponseFormat{}
		case "json_schema":
			if rf.JSONSchema == nil {
				return nil, llm.InvalidParam("response_format.json_schema", "response_format.json_schema is required for type json_schema")
			}
			if err := schemaObject("response_format.json_schema.schema", rf.JSONSchema.Schema); err != nil {
				return nil, err
			}
			req.ResponseFormat = &llm.ResponseFormat{Name: rf.JSONSchema.Name, Schema: nullToNil(rf.JSONSchema.Schema), Strict: rf.JSONSchema.Strict}
		default:
			return nil, llm.InvalidParam("response_format.type", "response_format.type must be text, json_object or json_schema")
		}
	}
	req.Reasoning, err = decodeReasoning(cr.ReasoningEffort, cr.Reasoning)
	return req, err
}

// decodeMessages hoists system and developer messages into req.System, and
// turns runs of tool messages into one user message of tool results.
func decodeMessages(msgs []chatMessage, req *llm.Request) error {
	for i, m := range msgs {
		// Field paths for errors, built only for one.
		f := func() string { return elem("messages", i) }
		cf := func() string { return f() + ".content" }
		if m.Role == nil {
			return llm.InvalidParam(f()+".role", "%s.role is required", f())
		}
		switch role := *m.Role; role {
		case "system", "developer":
			parts, err := canonicalParts(cf, m.Content.parts, true)
			if err != nil {
				return err
			}
			markLast(parts, m.CacheControl)
			req.System = append(req.System, parts...)
		case "user":
			if !m.Content.set {
				return llm.InvalidParam(cf(), "%s is required for user messages", cf())
			}
			if len(m.Content.parts) == 0 {
				return llm.InvalidParam(cf(), "%s must not be empty", cf())
			}
			parts, err := canonicalParts(cf, m.Content.parts, false)
			if err != nil {
				return err
			}
			markLast(parts, m.CacheControl)
			appendMessage(req, llm.RoleUser, parts)
		case "assistant":
			parts, err := canonicalParts(cf, m.Content.parts, true)
			if err != nil {
				return err
			}
			// Clients replaying a tool-calling turn often send content ""
			// beside tool_calls: that is no content, and some backends
			// reject empty text blocks.
			if len(m.ToolCalls) > 0 {
				parts = slices.DeleteFunc(parts, func(p llm.Part) bool { return p.Type == llm.PartText && p.Text == "" && p.CacheControl == nil })
			}
			for j, tc := range m.ToolCalls {
				tf := func() string { return elem(f()+".tool_calls", j) }
				if tc.ID == "" || tc.Function.Name == "" {
					return llm.InvalidParam(tf(), "%s needs an id and a function.name", tf())
				}
				args, err := toolArguments(func() string { return tf() + ".function.arguments" }, tc.Function.Arguments)
				if err != nil {
					return err
				}
				parts = append(parts, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args}})
			}
			if len(parts) == 0 {
				return llm.InvalidParam(cf(), "%s: an assistant message needs content or tool_calls", f())
			}
			markLast(parts, m.CacheControl)
			appendMessage(req, llm.RoleAssistant, parts)
		case "tool", "function":
			if role == "tool" && m.ToolCallID == "" {
				return llm.InvalidParam(f()+".tool_call_id", "%s.tool_call_id is required for tool messages", f())
			}
			parts, err := canonicalParts(cf, m.Content.parts, true)
			if err != nil {
				return err
			}
			res := &llm.ToolResult{CallID: m.ToolCallID, Name: m.Name, Content: parts}
			if res.CallID == "" { // legacy function role: matched by name
				res.CallID = m.Name
			}
			p := llm.Part{Type: llm.PartToolResult, ToolResult: res, CacheControl: m.CacheControl.canonical()}
			appendMessage(req, llm.RoleUser, []llm.Part{p})
		case "":
			return llm.InvalidParam(f()+".role", "%s.role is required", f())
		default:
			return llm.InvalidParam(f()+".role", "%s.role %q is not one of system, developer, user, assistant, tool", f(), role)
		}
	}
	// Only system or developer messages is a request OpenAI takes (its
	// schema requires no user turn); the backends that need one get the
	// instructions as the user turn (docs/translation.md, "Roles and system prompt").
	return nil
}

// appendMessage adds parts as a turn of role, merging into the previous turn
// when it has the same role (consecutive tool results become one turn).
func appendMessage(req *llm.Request, role llm.Role, parts []llm.Part) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == role && isToolResults(parts) && isToolResults(req.Messages[n-1].Parts) {
		req.Messages[n-1].Merge(parts...)
		return
	}
	req.Messages = append(req.Messages, llm.Message{Role: role, Parts: parts})
}

func isToolResults(parts []llm.Part) bool {
	for _, p := range parts {
		if p.Type != llm.PartToolResult {
			return false
		}
	}
	return len(parts) > 0
}

// markLast puts a message-level cache breakpoint on its last part.
func markLast(parts []llm.Part, cc *cacheControl) {
	if cc != nil && len(parts) > 0 {
		parts[len(parts)-1].CacheControl = cc.canonical()
	}
}

// decodeToolChoice decodes "none" | "auto" | "required" | {type:function,
// function:{name}} (chat) or {type:function, name} (Responses) |
// {type:allowed_tools, …}.
func decodeToolChoice(raw json.RawMessage, flat bool) (llm.ToolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return llm.ToolChoice{}, nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "none":
			return llm.ToolChoice{Mode: llm.ToolChoiceNone}, nil
		case "auto":
			return llm.ToolChoice{Mode: llm.ToolChoiceAuto}, nil
		case "required":
			return llm.ToolChoice{Mode: llm.ToolChoiceRequired}, nil
		}
		return llm.ToolChoice{}, llm.InvalidParam("tool_choice", "tool_choice must be none, auto, required or an object naming a function")
	}
	var obj struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
		Mode         string `json:"mode"`
		AllowedTools *struct {
			Mode  string `json:"mode"`
			Tools []struct {
				Name     string `json:"name"`
				Function *struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		} `json:"allowed_tools"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return llm.ToolChoice{}, llm.InvalidParam("tool_choice", "tool_choice must be a string or an object")
	}
	switch obj.Type {
	case "function":
		name := obj.Name
		if !flat && obj.Function != nil {
			name = obj.Function.Name
		}
		if name == "" {
			return llm.ToolChoice{}, llm.InvalidParam("tool_choice", "tool_choice names no function")
		}
		return llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: name}, nil
	case "allowed_tools":
		tc := llm.ToolChoice{Mode: llm.ToolChoiceAuto}
		mode := obj.Mode
		if obj.AllowedTools != nil {
			mode = obj.AllowedTools.Mode
			for _, t := range obj.AllowedTools.Tools {
				if t.Function != nil {
					tc.Allowed = append(tc.Allowed, t.Function.Name)
				} else {
					tc.Allowed = append(tc.Allowed, t.Name)
				}
			}
		}
		for _, t := range obj.Tools {
			tc.Allowed = append(tc.Allowed, t.Name)
		}
		if mode == "required" {
			tc.Mode = llm.ToolChoiceRequired
		}
		return tc, nil
	}
	return llm.ToolChoice{}, llm.InvalidParam("tool_choice.type", "tool_choice.type must be function or allowed_tools")
}

// reasoningObject is the OpenRouter-style reasoning request object.
type reasoningObject = struct {
	Effort    string `json:"effort"`
	MaxTokens int    `json:"max_tokens"`
	Enabled   *bool  `json:"enabled"`
	Exclude   bool   `json:"exclude"`
}

var efforts = map[string]bool{"none": true, "minimal": true, "low": true, "medium": true, "high": true, "xhigh": true, "max": true}

// decodeReasoning merges reasoning_effort and the reasoning object.
// "none" turns reasoning off explicitly.
func decodeReasoning(effort string, obj *reasoningObject) (*llm.Reasoning, error) {
	if effort == "" && obj == nil {
		return nil, nil
	}
	r := &llm.Reasoning{Enabled: true, IncludeThoughts: true, Effort: effort}
	if obj != nil {
		if obj.Effort != "" {
			r.Effort = obj.Effort
		}
		r.BudgetTokens = obj.MaxTokens
		if obj.Enabled != nil {
			r.Enabled = *obj.Enabled
		}
		r.IncludeThoughts = !obj.Exclude
	}
	if r.Effort != "" && !efforts[r.Effort] {
		param := "reasoning_effort"
		if obj != nil && obj.Effort != "" {
			param = "reasoning.effort"
		}
		return nil, llm.InvalidParam(param, "%s must be one of none, minimal, low, medium, high, xhigh", param)
	}
	if r.Effort == "none" {
		r.Enabled = false
	}
	return r, nil
}

// schemaObject checks that a JSON Schema, when present, is an object.
func schemaObject(field string, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || raw[0] == '{' {
		return nil
	}
	return llm.InvalidParam(field, "%s must be a JSON Schema object", field)
}

func nullToNil(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	return raw
}
