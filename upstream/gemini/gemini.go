// Package gemini is the backend for Google's generate-content protocol
// (the Gemini API). It owns the protocol's wire types, the translation of a
// canonical request into them, and the reading of its replies, streams and
// errors back into canonical form (see Backend).
//
// gemini imports upstream (the Backend contract and the error vocabulary),
// upstream/internal/protocol (the shared transport, stream reading and
// translation helpers) and llm; never another vendor's package.
package gemini

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Backend serves canonical requests over the generate-content protocol
// (docs/wire/generate-content.md). It posts to
// {BaseURL}/v1beta/models/{Model}:generateContent, or
// :streamGenerateContent?alt=sse; embeddings to :embedContent or
// :batchEmbedContents (Embed, in embed.go).
//
// Translation notes (docs/translation.md):
//   - Images and PDFs must be inline: a remote image URL is an
//     invalid_request error rather than a fetch (#content-parts).
//   - A functionResponse needs the function's name: the result's, else the
//     name of the call with the same id in the history (#tool-calls-and-results). Results are
//     the JSON object a tool returned, or wrapped as {"result": …}; a
//     failed call's result is {"error": …}, with a JSON object result
//     inside it. Results come first in their turn;
//     images they held follow as inline parts.
//   - Tools become functionDeclarations with parametersJsonSchema; strict
//     and cache breakpoints are dropped. tool_choice maps to
//     functionCallingConfig; a subset of allowed tools is
//     allowedFunctionNames when a call is required and filters the
//     declarations otherwise (#tool_choice).
//   - Thought signatures (#reasoning): a thought part's signature travels with its
//     reasoning part and a functionCall's with its ToolCall, and both go
//     back on the same parts. A signature on a text part closes the
//     thoughts before it (then goes back on the last thought part), or,
//     with no thoughts shown, travels as a reasoning part of its own and
//     goes back on that text. A model turn whose first function call has
//     no signature of ours (the call came from another backend) gets the
//     placeholder Google documents for foreign histories, which Gemini 3
//     otherwise rejects.
//   - stopSequences takes at most 5: the first 5 go upstream and, when
//     there were more, the gateway applies them all (protocol.Stopped).
//   - Reasoning: a budget or effort becomes thinkingConfig.thinkingBudget
//     (efforts as in protocol.EffortBudget), includeThoughts as asked; reasoning
//     switched off is thinkingBudget 0.
//   - Finish: STOP after a function call anywhere in the reply is
//     tool_calls (#finish-reasons); newer models send the call and the finishReason in
//     different chunks. A blocked prompt is content_filter.
//   - Usage: promptTokenCount includes cached tokens; thoughts are not in
//     candidatesTokenCount, and are added to the canonical output (#usage).
//     In a stream each chunk's usage is a snapshot: the last one wins.
type Backend struct {
	h              protocol.Client
	url, streamURL string
	hdr            protocol.Headers // built once by New
	// embedURL and batchEmbedURL are the model's :embedContent and
	// :batchEmbedContents, modelName its "models/{model}" (see Embed).
	embedURL, batchEmbedURL, modelName string
}

var _ upstream.Backend = (*Backend)(nil)

// New returns a generate-content backend.
func New(o upstream.HTTPOptions) *Backend {
	b := &Backend{h: protocol.NewClient(o, "https://generativelanguage.googleapis.com", geminiErrorHint)}
	model := strings.TrimPrefix(b.h.Opts.Model, "models/")
	base := b.h.Opts.BaseURL + "/v1beta/models/" + url.PathEscape(model)
	b.url, b.streamURL = base+":generateContent", base+":streamGenerateContent?alt=sse"
	b.embedURL, b.batchEmbedURL, b.modelName = base+":embedContent", base+":batchEmbedContents", "models/"+model
	b.hdr = b.h.Headers(b.baseHeader)
	return b
}

// Limits returns the backend model's limits.
func (b *Backend) Limits() upstream.Limits { return b.h.Opts.Limits }

// geminiSkipSignature is the thoughtSignature Google documents for function
// calls that did not come from Gemini (docs/translation.md#reasoning, unverified).
const geminiSkipSignature = "skip_thought_signature_validator"

// Complete sends req upstream and returns the whole reply.
func (b *Backend) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	body, err := b.body(req)
	if err != nil {
		return nil, err
	}
	raw, err := b.h.PostRead(ctx, b.url, b.hdr.Call, body)
	if err != nil {
		return nil, err
	}
	var r gmResponse
	if err := decodeGeminiResponse(new(protocol.FrameDecoder), raw, &r); err != nil {
		return nil, err
	}
	out := &llm.Response{}
	reason, calls := "", false
	if len(r.Candidates) > 0 {
		cand := r.Candidates[0]
		if cand.Content != nil {
			out.Content = geminiParts(cand.Content.Parts)
		}
		reason = cand.FinishReason
	} else if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
		reason = geminiBlocked
	} else {
		return nil, &llm.Error{Kind: llm.KindUpstream, Message: upstream.MsgNoReply, Err: errors.New("no candidates")}
	}
	for _, p := range out.Content {
		calls = calls || p.Type == llm.PartToolCall
	}
	out.FinishReason = geminiFinish(reason, calls)
	if r.UsageMetadata != nil {
		out.Usage = r.UsageMetadata.canonical()
	}
	if stops := protocol.GatewayStops(geminiStops, req.Stop); len(stops) > 0 {
		protocol.CutAtStop(out, stops)
	}
	return out, nil
}

// Stream sends req upstream and returns its reply as events.
func (b *Backend) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	body, err := b.body(req)
	if err != nil {
		return nil, err
	}
	c, resp, err := b.h.Post(ctx, b.streamURL, b.hdr.Stream, body)
	if err != nil {
		return nil, err
	}
	s, err := protocol.StartStream(c, resp.Body, &geminiStream{})
	return protocol.Stopped(s, err, geminiStops, req)
}

// baseHeader is the protocol's own part of a request's header (New
// builds the whole with Client.Headers).
func (b *Backend) baseHeader(stream bool) http.Header {
	h := http.Header{}
	if b.h.Opts.APIKey != "" {
		h.Set("X-Goog-Api-Key", b.h.Opts.APIKey)
	}
	if stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	return h
}

// Request wire types.

type gmRequest struct {
	Contents          []gmContent         `json:"contents"`
	SystemInstruction *gmContent          `json:"systemInstruction,omitempty"`
	Tools             []gmTool            `json:"tools,omitempty"`
	ToolConfig        *gmToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *gmGenerationConfig `json:"generationConfig,omitempty"`
}

type gmContent struct {
	Role  string   `json:"role,omitempty"`
	Parts []gmPart `json:"parts"`
}

type gmPart struct {
	Text             string              `json:"text,omitempty"`
	Thought          bool                `json:"thought,omitempty"`
	ThoughtSignature string              `json:"thoughtSignature,omitempty"`
	InlineData       *gmBlob             `json:"inlineData,omitempty"`
	FunctionCall     *gmFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *gmFunctionResponse `json:"functionResponse,omitempty"`
}

type gmBlob struct {
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"`
}

type gmFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type gmFunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type gmTool struct {
	FunctionDeclarations []gmFunctionDeclaration `json:"functionDeclarations"`
}

type gmFunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type gmToolConfig struct {
	FunctionCallingConfig gmFunctionCallingConfig `json:"functionCallingConfig"`
}

type gmFunctionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type gmGenerationConfig struct {
	Temperature        *float64          `json:"temperature,omitempty"`
	TopP               *float64          `json:"topP,omitempty"`
	TopK               *int              `json:"topK,omitempty"`
	MaxOutputTokens    int               `json:"maxOutputTokens,omitempty"`
	StopSequences      []string          `json:"stopSequences,omitempty"`
	Seed               *int64            `json:"seed,omitempty"`
	PresencePenalty    *float64          `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64          `json:"frequencyPenalty,omitempty"`
	ResponseMIMEType   string            `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage   `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *gmThinkingConfig `json:"thinkingConfig,omitempty"`
}

type gmThinkingConfig struct {
	IncludeThoughts bool `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int `json:"thinkingBudget,omitempty"`
}

// body translates req into a generate-content request body.
func (b *Backend) body(req *llm.Request) ([]byte, error) {
	var r gmRequest
	sys, err := protocol.SystemText(req)
	if err != nil {
		return nil, err
	}
	if len(sys) > 0 {
		si := &gmContent{}
		for _, p := range sys {
			if p.Text != "" {
				si.Parts = append(si.Parts, gmPart{Text: p.Text})
			}
		}
		if len(si.Parts) > 0 {
			r.SystemInstruction = si
		}
	}
	for i, m := range req.Messages {
		param := "messages." + strconv.Itoa(i)
		var c gmContent
		if m.Role == llm.RoleAssistant {
			c = gmContent{Role: "model", Parts: geminiModelParts(m.Parts)}
		} else {
			ps := m.Parts
			if m.Role == llm.RoleSystem {
				ps = protocol.SystemGuidance(ps) // in the user turn (see protocol.SystemGuidance)
			}
			parts, err := geminiUserParts(req, param, ps)
			if err != nil {
				return nil, err
			}
			c = gmContent{Role: "user", Parts: parts}
		}
		if len(c.Parts) == 0 {
			continue
		}
		if n := len(r.Contents); n > 0 && r.Contents[n-1].Role == c.Role {
			r.Contents[n-1].Parts = append(r.Contents[n-1].Parts, c.Parts...)
			if c.Role == "user" {
				responsesFirst(r.Contents[n-1].Parts)
			}
		} else {
			r.Contents = append(r.Contents, c)
		}
	}
	if len(r.Contents) == 0 && r.SystemInstruction != nil {
		// Instructions alone (OpenAI takes a request of only a system or
		// developer message): generate-content needs contents, so the
		// instructions are the user turn.
		r.Contents = []gmContent{{Role: "user", Parts: r.SystemInstruction.Parts}}
		r.SystemInstruction = nil
	}

	tools := req.Tools
	tc := req.ToolChoice
	if tc.Mode != llm.ToolChoiceRequired && tc.Mode != llm.ToolChoiceTool {
		tools = protocol.AllowedTools(req)
	}
	if len(tools) > 0 {
		var decls []gmFunctionDeclaration
		for _, t := range tools {
			schema := t.Parameters
			if string(schema) == "null" {
				schema = nil
			}
			decls = append(decls, gmFunctionDeclaration{Name: t.Name, Description: t.Description, ParametersJSONSchema: schema})
		}
		r.Tools = []gmTool{{FunctionDeclarations: decls}}
		switch tc.Mode {
		case llm.ToolChoiceAuto:
			r.ToolConfig = &gmToolConfig{FunctionCallingConfig: gmFunctionCallingConfig{Mode: "AUTO"}}
		case llm.ToolChoiceNone:
			r.ToolConfig = &gmToolConfig{FunctionCallingConfig: gmFunctionCallingConfig{Mode: "NONE"}}
		case llm.ToolChoiceRequired:
			r.ToolConfig = &gmToolConfig{FunctionCallingConfig: gmFunctionCallingConfig{Mode: "ANY", AllowedFunctionNames: tc.Allowed}}
		case llm.ToolChoiceTool:
			r.ToolConfig = &gmToolConfig{FunctionCallingConfig: gmFunctionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{tc.Name}}}
		}
	}

	g := gmGenerationConfig{
		Temperature:      req.Temperature,
		TopP:             req.TopP,
		TopK:             req.TopK,
		MaxOutputTokens:  b.h.MaxTokens(req, 0),
		StopSequences:    geminiStops(req.Stop),
		Seed:             req.Seed,
		PresencePenalty:  req.PresencePenalty,
		FrequencyPenalty: req.FrequencyPenalty,
	}
	if rf := req.ResponseFormat; rf != nil {
		g.ResponseMIMEType, g.ResponseJSONSchema = "application/json", rf.Schema
	}
	if rs := req.Reasoning; rs != nil {
		if !rs.Enabled {
			zero := 0
			g.ThinkingConfig = &gmThinkingConfig{ThinkingBudget: &zero}
		} else {
			g.ThinkingConfig = &gmThinkingConfig{IncludeThoughts: rs.IncludeThoughts}
			budget := rs.BudgetTokens
			if budget <= 0 {
				budget = protocol.EffortBudget(protocol.EffortLevel(rs.Effort))
			}
			if budget > 0 {
				g.ThinkingConfig.ThinkingBudget = &budget
			}
		}
	}
	if !g.empty() {
		r.GenerationConfig = &g
	}
	return protocol.EncodeJSON(r)
}

func (g *gmGenerationConfig) empty() bool {
	return g.Temperature == nil && g.TopP == nil && g.TopK == nil && g.MaxOutputTokens == 0 &&
		len(g.StopSequences) == 0 && g.Seed == nil && g.PresencePenalty == nil && g.FrequencyPenalty == nil &&
		g.ResponseMIMEType == "" && g.ThinkingConfig == nil
}

// geminiModelParts translates a model turn, putting each signature back on
// the part it came with.
func geminiModelParts(ps []llm.Part) []gmPart {
	var out []gmPart
	pending := "" // a signature that rides on the next data part
	firstCall := true
	for _, p := range ps {
		switch p.Type {
		case llm.PartReasoning:
			sig, ok := protocol.UntagSig(protocol.SigThought, p.Signature)
			if !ok {
				continue // unsigned, or another backend's: not replayable
			}
			if p.Text != "" {
				out = append(out, gmPart{Text: p.Text, Thought: true, ThoughtSignature: sig})
			} else {
				pending = sig
			}
		case llm.PartText:
			if p.Text == "" {
				continue
			}
			out = append(out, gmPart{Text: p.Text, ThoughtSignature: pending})
			pending = ""
		case llm.PartToolCall:
			if p.ToolCall == nil {
				continue
			}
			tc := p.ToolCall
			sig, ok := protocol.UntagSig(protocol.SigThought, tc.Signature)
			if !ok {
				sig, pending = pending, ""
			}
			if sig == "" && firstCall {
				sig = geminiSkipSignature
			}
			firstCall = false
			out = append(out, gmPart{FunctionCall: &gmFunctionCall{ID: tc.ID, Name: tc.Name, Args: protocol.ArgsObject(tc.Arguments)}, ThoughtSignature: sig})
		}
	}
	if n := len(out); pending != "" && n > 0 && out[n-1].ThoughtSignature == "" {
		out[n-1].ThoughtSignature = pending
	}
	return out
}

// geminiUserParts translates a user turn: function responses first, then
// text and inline media.
func geminiUserParts(req *llm.Request, param string, ps []llm.Part) ([]gmPart, error) {
	var results, rest []gmPart
	for _, p := range ps {
		switch p.Type {
		case llm.PartText:
			if p.Text != "" {
				rest = append(rest, gmPart{Text: p.Text})
			}
		case llm.PartImage, llm.PartDocument:
			part, err := geminiMedia(param, p)
			if err != nil {
				return nil, err
			}
			rest = append(rest, part)
		case llm.PartToolResult:
			if p.ToolResult == nil {
				continue
			}
			res := p.ToolResult
			name := res.Name
			if name == "" {
				name = toolName(req, res.CallID)
			}
			if name == "" {
				return nil, llm.InvalidParam(param, "the tool result %q answers no tool call in the conversation", res.CallID)
			}
			results = append(results, gmPart{FunctionResponse: &gmFunctionResponse{ID: res.CallID, Name: name, Response: geminiResult(res)}})
			for _, c := range res.Content {
				if c.Type == llm.PartImage || c.Type == llm.PartDocument {
					part, err := geminiMedia(param, c)
					if err != nil {
						return nil, err
					}
					rest = append(rest, part)
				}
			}
		}
	}
	return append(results, rest...), nil
}

// responsesFirst moves functionResponse parts to the front, keeping the
// order within each kind.
func responsesFirst(ps []gmPart) {
	var res, rest []gmPart
	for _, p := range ps {
		if p.FunctionResponse != nil {
			res = append(res, p)
		} else {
			rest = append(rest, p)
		}
	}
	if len(res) > 0 && len(rest) > 0 {
		copy(ps, append(res, rest...))
	}
}

// geminiResult is a functionResponse's response object: the result's text
// when it is a JSON object, wrapped as {"result": …} otherwise (docs/translation.md#tool-calls-and-results,
// policy). A failed call's result is {"error": …}, the key Google
// documents for error details, whatever its text: an object that is not
// already such an error goes inside it.
func geminiResult(res *llm.ToolResult) json.RawMessage {
	text := protocol.TextOf(res.Content)
	if protocol.IsJSONObject(text) {
		obj := llm.CompactJSON([]byte(text))
		if !res.IsError || onlyKey(obj, "error") {
			return obj
		}
		b, _ := protocol.EncodeJSON(map[string]json.RawMessage{"error": obj})
		return b
	}
	key := "result"
	if res.IsError {
		key = "error"
	}
	b, _ := protocol.EncodeJSON(map[string]string{key: text})
	return b
}

// onlyKey reports whether the JSON object obj has key and no other.
func onlyKey(obj json.RawMessage, key string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil || len(m) != 1 {
		return false
	}
	_, ok := m[key]
	return ok
}

// geminiMedia translates an inline image or PDF; remote URLs cannot go.
func geminiMedia(param string, p llm.Part) (gmPart, error) {
	if p.URL != "" && len(p.Data) == 0 {
		return gmPart{}, llm.InvalidParam(param, msgRemoteImages)
	}
	return gmPart{InlineData: &gmBlob{MIMEType: p.MediaType, Data: base64.StdEncoding.EncodeToString(p.Data)}}, nil
}

// msgRemoteImages refuses an image by URL, which the protocol cannot take.
const msgRemoteImages = "remote image URLs are not supported by this route"

// maxStop is the protocol's cap on the number of stop sequences (Gemini's
// GenerationConfig.stopSequences).
const maxStop = 5

// geminiStops keeps the first five sequences.
func geminiStops(stops []string) []string { return stops[:min(len(stops), maxStop)] }

// toolName returns the name of the tool a call with id invoked, from the
// calls in the request's history; "" when there is none.
func toolName(req *llm.Request, id string) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		for _, p := range req.Messages[i].Parts {
			if p.Type == llm.PartToolCall && p.ToolCall != nil && p.ToolCall.ID == id {
				return p.ToolCall.Name
			}
		}
	}
	return ""
}
