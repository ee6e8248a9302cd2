package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// ResponsesCodec is the Responses API endpoint, served statelessly: the
// caller replays the conversation in `input` on every call, and no response
// is stored (previous_response_id and conversation are refused). Items it
// replays by reference resolve: a whole reply's item ids carry their items,
// sealed by Sealer, and a stream's items are kept by the server and looked
// up by id (responses_seal.go). With no Sealer, ids are plain.
type ResponsesCodec struct {
	Sealer Sealer
}

// Surface names the wire format.
func (ResponsesCodec) Surface() llm.Surface { return llm.SurfaceResponses }

// Routes lists POST /v1/responses, its input-token count, and the lookup
// of a stored response, which is always a 404: svcgw serves the Responses
// API statelessly and keeps no response objects.
func (ResponsesCodec) Routes() []surface.Route {
	return []surface.Route{
		{Method: http.MethodPost, Path: "/v1/responses", Endpoint: surface.Generate},
		{Method: http.MethodPost, Path: "/v1/responses/input_tokens", Endpoint: surface.CountTokens},
		{Method: http.MethodGet, Path: "/v1/responses/{id}", Pick: notStored, Serves: "404: responses are not stored"},
	}
}

func notStored(*http.Request) (surface.Endpoint, error) {
	return 0, &llm.Error{Kind: llm.KindNotFound, Param: "response_id",
		Message: "responses are not stored: this gateway serves the Responses API statelessly (send store: false and replay the conversation)"}
}

// Fields names the bounded fields in the Responses API's words.
func (ResponsesCodec) Fields() surface.Fields {
	return surface.Fields{Messages: "input", System: "instructions", Tools: "tools",
		Schema: "text.format.schema", Turn: "input items"}
}

// NewID returns a gateway-issued response id, resp_<24 base62>.
func (ResponsesCodec) NewID() string { return llm.NewID("resp_", 24) }

// WriteError writes err in the OpenAI envelope.
func (ResponsesCodec) WriteError(w http.ResponseWriter, err error) { WriteError(w, err) }

type responsesRequest struct {
	Model              *string         `json:"model"`
	Input              input           `json:"input"`
	Instructions       string          `json:"instructions"`
	Tools              []responsesTool `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	TopLogprobs        *int            `json:"top_logprobs"`
	User               string          `json:"user"`
	PromptCacheKey     string          `json:"prompt_cache_key"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Text               *struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"format"`
	} `json:"text"`
	Reasoning *struct {
		Effort  string `json:"effort"`
		Summary string `json:"summary"`
	} `json:"reasoning"`
}

// inputItem is one element of `input`; which fields matter depends on Type
// (a message when Type is empty or "message").
type inputItem struct {
	Type             string      `json:"type"`
	ID               string      `json:"id"`
	Role             string      `json:"role"`
	Content          itemContent `json:"content"`
	CallID           string      `json:"call_id"`
	Name             string      `json:"name"`
	Arguments        string      `json:"arguments"`
	Namespace        string      `json:"namespace"`
	Input            string      `json:"input"`
	Output           itemOutput  `json:"output"`
	EncryptedContent string      `json:"encrypted_content"`
	Summary          []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// input is the `string | []item` union of input. Like the item unions
// below, it keeps a value of another kind for decodeInput to refuse, after
// the checks that come first.
type input struct {
	text  *string
	items []inputItem
	other bool // a value of another kind
}

func (in *input) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*in = input{} // a repeated member's last value wins
	switch dec.PeekKind() {
	case 'n':
		return dec.SkipValue()
	case '"':
		return jsonv2.UnmarshalDecode(dec, &in.text)
	case '[':
		in.items = []inputItem{}
		return jsonv2.UnmarshalDecode(dec, &in.items)
	}
	in.other = true
	return dec.SkipValue()
}

// itemContent is the `string | []part` union of a message item's content.
// Null is no parts; absent is an error (see contentParts).
type itemContent struct {
	sent  bool // the member was there, null included
	other bool // a value of another kind
	text  *string
	parts []inputPart
}

func (c *itemContent) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*c = itemContent{sent: true} // a repeated member's last value wins
	switch dec.PeekKind() {
	case 'n':
		return dec.SkipValue()
	case '"':
		return jsonv2.UnmarshalDecode(dec, &c.text)
	case '[':
		return jsonv2.UnmarshalDecode(dec, &c.parts)
	}
	c.other = true
	return dec.SkipValue()
}

// itemOutput is the `string | []part` union of a tool call's output. Null
// is empty output; absent is an error (see outputText).
type itemOutput struct {
	sent  bool
	other bool
	text  string
	parts []inputPart
}

func (o *itemOutput) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*o = itemOutput{sent: true} // a repeated member's last value wins
	switch dec.PeekKind() {
	case 'n':
		return dec.SkipValue()
	case '"':
		return jsonv2.UnmarshalDecode(dec, &o.text)
	case '[':
		return jsonv2.UnmarshalDecode(dec, &o.parts)
	}
	o.other = true
	return dec.SkipValue()
}

// inputPart is one content part of a message item.
type inputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
	FileData string `json:"file_data"`
	FileID   string `json:"file_id"`
	FileURL  string `json:"file_url"`
	Filename string `json:"filename"`
}

// DecodeRequest decodes a Responses API request body; references to
// streamed items do not resolve without the kept items (see
// DecodeRequestItems).
func (c ResponsesCodec) DecodeRequest(r *http.Request, body []byte) (*llm.Request, error) {
	return c.DecodeRequestItems(r, body, nil)
}

// DecodeRequestItems decodes a Responses API request body whose
// item_reference items may name the calling account's kept items.
func (c ResponsesCodec) DecodeRequestItems(r *http.Request, body []byte, items surface.ItemSource) (*llm.Request, error) {
	ctx := context.Background()
	if r != nil {
		ctx = r.Context()
	}
	return decodeResponses(ctx, c.Sealer, items, body)
}

// minOutputTokens is the smallest max_output_tokens the Responses API
// takes.
const minOutputTokens = 16

// decodeResponses decodes a request body, looking up in items the kept
// items its references name.
func decodeResponses(ctx context.Context, sealer Sealer, items surface.ItemSource, body []byte) (*llm.Request, error) {
	var rr responsesRequest
	if err := surface.Decode(body, &rr, surface.EncodingJSON); err != nil {
		return nil, inputError(err)
	}
	if rr.Model == nil || *rr.Model == "" {
		return nil, llm.InvalidParam("model", "model is required")
	}
	if rr.PreviousResponseID != nil && *rr.PreviousResponseID != "" {
		return nil, llm.InvalidParam("previous_response_id", "previous_response_id is not supported: responses are not stored; replay the conversation in input")
	}
	if c := bytes.TrimSpace(rr.Conversation); len(c) > 0 && !bytes.Equal(c, []byte("null")) {
		return nil, llm.InvalidParam("conversation", "conversation is not supported: responses are not stored; replay the conversation in input")
	}
	req := &llm.Request{
		Model:             *rr.Model,
		ParallelToolCalls: rr.ParallelToolCalls,
		Temperature:       rr.Temperature,
		TopP:              rr.TopP,
		TopLogprobs:       rr.TopLogprobs,
		User:              rr.User,
		CacheKey:          rr.PromptCacheKey,
		Stream:            rr.Stream,
		IncludeUsage:      true,
	}
	if rr.MaxOutputTokens != nil {
		// OpenAI's Responses API takes at least 16 (a 400
		// integer_below_min_value below); null is unset.
		if n := *rr.MaxOutputTokens; n < minOutputTokens {
			return nil, llm.InvalidParam("max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= %d, but got %d instead.", minOutputTokens, n)
		}
		req.MaxTokens = *rr.MaxOutputTokens
	}
	if rr.Instructions != "" {
		req.System = append(req.System, llm.TextPart(rr.Instructions))
	}
	refs, err := lookUpReferences(ctx, sealer, items, rr.Input)
	if err != nil {
		return nil, err
	}
	if err := decodeInput(refs, rr.Input, req); err != nil {
		return nil, err
	}
	tools, err := decodeTools(rr.Tools)
	if err != nil {
		return nil, err
	}
	req.Tools = tools
	tc, err := decodeResponsesToolChoice(rr.ToolChoice)
	if err != nil {
		return nil, err
	}
	req.ToolChoice = tc
	if rr.Text != nil && rr.Text.Format != nil {
		switch f := rr.Text.Format; f.Type {
		case "text", "":
		case "json_object":
			req.ResponseFormat = &llm.ResponseFormat{}
		case "json_schema":
			if err := schemaObject("text.format.schema", f.Schema); err != nil {
				return nil, err
			}
			req.ResponseFormat = &llm.ResponseFormat{Name: f.Name, Schema: nullToNil(f.Schema), Strict: f.Strict}
		default:
			return nil, llm.InvalidParam("text.format.type", "text.format.type must be text, json_object or json_schema")
		}
	}
	if rr.Reasoning != nil && (rr.Reasoning.Effort != "" || rr.Reasoning.Summary != "") {
		if e := rr.Reasoning.Effort; e != "" && !efforts[e] {
			return nil, llm.InvalidParam("reasoning.effort", "reasoning.effort must be one of none, minimal, low, medium, high, xhigh")
		}
		req.Reasoning, err = decodeReasoning(rr.Reasoning.Effort, nil)
		if err != nil {
			return nil, err
		}
		if req.Reasoning == nil {
			req.Reasoning = &llm.Reasoning{Enabled: true}
		}
		req.Reasoning.IncludeThoughts = rr.Reasoning.Summary != ""
	}
	return req, nil
}

// inputError words a decoding failure: a value in input that does not fit
// is worded by what holds it (the item's content or output, else input
// itself), the others as decodeError words them.
func inputError(err error) *llm.Error {
	var de *surface.DecodeError
	var le *llm.Error
	if errors.As(err, &le) || !errors.As(err, &de) || len(de.Path) == 0 || !strings.EqualFold(de.Path[0], "input") {
		return decodeError(err)
	}
	if len(de.Path) >= 3 {
		f := "input[" + de.Path[1] + "]." + strings.ToLower(de.Path[2])
		switch {
		case strings.EqualFold(de.Path[2], "content"):
			return withCause(llm.InvalidParam(f, "%s must be a string or an array of content parts", f), err)
		case strings.EqualFold(de.Path[2], "output"):
			return withCause(llm.InvalidParam(f, "%s must be a string or an array of text parts", f), err)
		}
	}
	return withCause(llm.InvalidParam("input", "input must be a string or an array of input items"), err)
}

func withCause(e *llm.Error, cause error) *llm.Error {
	e.Err = cause
	return e
}

// decodeInput turns `input` (a string or an array of items) into messages.
func decodeInput(refs references, in input, req *llm.Request) error {
	if in.text != nil {
		req.Messages = []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(*in.text)}}}
		return nil
	}
	items := in.items
	switch {
	case in.other:
		return llm.InvalidParam("input", "input must be a string or an array of input items")
	case items == nil:
		return llm.InvalidParam("input", "input is required")
	}
	for i, it := range items {
		f := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			if err := decodeMessageItem(f, it, req); err != nil {
				return err
			}
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return llm.InvalidParam(f, "%s: a function_call item needs call_id and name", f)
			}
			args, err := toolArguments(func() string { return f + ".arguments" }, it.Arguments)
			if err != nil {
				return err
			}
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + namespaceSep + name
			}
			addTurn(req, llm.RoleAssistant, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: it.CallID, Name: name, Arguments: args}})
		case "custom_tool_call":
			if it.CallID == "" || it.Name == "" {
				return llm.InvalidParam(f, "%s: a custom_tool_call item needs call_id and name", f)
			}
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + namespaceSep + name
			}
			addTurn(req, llm.RoleAssistant, llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: it.CallID, Name: name, Arguments: freeformArguments(it.Input)}})
		case "function_call_output", "custom_tool_call_output":
			if it.CallID == "" {
				return llm.InvalidParam(f+".call_id", "%s.call_id is required", f)
			}
			out, err := outputText(f+".output", it.Output)
			if err != nil {
				return err
			}
			addTurn(req, llm.RoleUser, llm.Part{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: it.CallID, Content: []llm.Part{llm.TextPart(out)}}})
		case "reasoning":
			var text []string
			for _, s := range it.Summary {
				text = append(text, s.Text)
			}
			p := llm.Part{Type: llm.PartReasoning, Text: strings.Join(text, "\n"), Signature: it.EncryptedContent}
			if p.Signature == "" {
				// Replayed without encrypted_content (a client that
				// did not ask for it): its id carries the signature,
				// or names the kept item that does.
				if typ, kept, ok := refs.open(it.ID); ok && typ == "reasoning" {
					p.Signature, p.Redacted = kept.Signature, kept.Redacted
				}
			}
			addTurn(req, llm.RoleAssistant, p)
		case "item_reference":
			if it.ID == "" {
				return llm.InvalidParam(f+".id", "%s.id is required", f)
			}
			if err := resolveReference(refs, f, it.ID, req); err != nil {
				return err
			}
		default:
			if hostedItems[it.Type] {
				continue // a hosted tool's call or output: dropped with the tool
			}
			return llm.InvalidParam(f+".type", "%s.type %q is not supported", f, it.Type)
		}
	}
	// Only system or developer messages is a request OpenAI takes; the
	// backends that need a user turn get the instructions as that turn.
	if len(req.Messages) == 0 && len(req.System) == 0 {
		return llm.InvalidParam("input", "input must contain at least one message")
	}
	return nil
}

func decodeMessageItem(f string, it inputItem, req *llm.Request) error {
	parts, err := contentParts(f+".content", it.Content)
	if err != nil {
		return err
	}
	switch it.Role {
	case "system", "developer":
		for _, p := range parts {
			if p.Type != llm.PartText {
				return llm.InvalidParam(f+".content", "%s: only text content is allowed in %s messages", f, it.Role)
			}
		}
		req.System = append(req.System, parts...)
	case "user":
		if len(parts) == 0 {
			return llm.InvalidParam(f+".content", "%s.content must not be empty", f)
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: parts})
	case "assistant":
		if len(parts) == 0 {
			return llm.InvalidParam(f+".content", "%s.content must not be empty", f)
		}
		addTurn(req, llm.RoleAssistant, parts...)
	case "":
		return llm.InvalidParam(f+".role", "%s.role is required", f)
	default:
		return llm.InvalidParam(f+".role", "%s.role %q is not one of user, assistant, system, developer", f, it.Role)
	}
	return nil
}

// addTurn appends parts to the last turn when it has the same role (a
// function_call after assistant text is one turn), else starts a new turn.
func addTurn(req *llm.Request, role llm.Role, parts ...llm.Part) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == role && (role == llm.RoleAssistant || isToolResults(parts) && isToolResults(req.Messages[n-1].Parts)) {
		req.Messages[n-1].Merge(parts...)
		return
	}
	req.Messages = append(req.Messages, llm.Message{Role: role, Parts: parts})
}

// contentParts converts a message item's content: a string or input parts.
func contentParts(f string, c itemContent) ([]llm.Part, error) {
	if c.text != nil {
		return []llm.Part{llm.TextPart(*c.text)}, nil
	}
	if !c.sent || c.other {
		return nil, llm.InvalidParam(f, "%s must be a string or an array of content parts", f)
	}
	parts := c.parts
	out := make([]llm.Part, 0, len(parts))
	for i, p := range parts {
		pf := fmt.Sprintf("%s[%d]", f, i)
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, llm.TextPart(p.Text))
		case "refusal":
			// An earlier refusal replayed: keep it as assistant text.
			out = append(out, llm.TextPart(p.Text))
		case "input_image":
			if p.FileID != "" {
				return nil, llm.InvalidParam(pf+".file_id", "%s.file_id: uploaded file ids are not supported; send image_url", pf)
			}
			img, err := imagePart(pf+".image_url", p.ImageURL)
			if err != nil {
				return nil, err
			}
			out = append(out, img)
		case "input_file":
			if p.FileURL != "" {
				return nil, llm.InvalidParam(pf+".file_url", "%s.file_url: remote files are not supported; send file_data", pf)
			}
			doc, err := filePart(pf, p.Filename, p.FileData, p.FileID)
			if err != nil {
				return nil, err
			}
			out = append(out, doc)
		default:
			return nil, llm.InvalidParam(pf+".type", "%s.type %q is not supported", pf, p.Type)
		}
	}
	return out, nil
}

// outputText reads a function_call_output's output: a string, or an array
// of text parts.
func outputText(f string, o itemOutput) (string, error) {
	if !o.sent || o.other {
		return "", llm.InvalidParam(f, "%s must be a string or an array of text parts", f)
	}
	if o.parts == nil {
		return o.text, nil
	}
	var sb strings.Builder
	for _, p := range o.parts {
		sb.WriteString(p.Text)
	}
	return sb.String(), nil
}

// CountTokens serves POST /v1/responses/input_tokens: an estimate
// that never reaches a backend.
func (c ResponsesCodec) CountTokens(w http.ResponseWriter, r *http.Request, body []byte) {
	req, err := decodeResponses(r.Context(), c.Sealer, nil, body)
	if err != nil {
		WriteError(w, err)
		return
	}
	_ = surface.WriteJSON(w, http.StatusOK, struct {
		Object      string `json:"object"`
		InputTokens int    `json:"input_tokens"`
	}{"response.input_tokens", req.InputTokens()})
}
