package messages

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// decodeRequest turns a messages request body into a canonical request.
// count is true for count_tokens, whose body has no max_tokens and whose
// stream flag means nothing. Unknown fields are ignored (the vendor answers
// 400 to them, but SDKs newer than this gateway send fields it does not know).
func decodeRequest(body []byte, count bool) (*llm.Request, error) {
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		if !json.Valid(body) {
			return nil, &llm.Error{Kind: llm.KindInvalidRequest, Message: "The request body is not valid JSON."}
		}
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Message: "The request body must be a JSON object."}
	}
	var top request
	if err := surface.Decode(body, &top, surface.Exact); err != nil {
		return nil, decodeError(err)
	}
	req := &llm.Request{}
	var err error
	if req.Model, err = reqString(top.Model, "model"); err != nil {
		return nil, err
	}
	if !count {
		if rawKind(top.MaxTokens) == 0 {
			return nil, missing("max_tokens")
		}
		if req.MaxTokens, err = decodeInt(top.MaxTokens, "max_tokens"); err != nil {
			return nil, err
		}
		if req.MaxTokens < 1 {
			return nil, llm.InvalidParam("max_tokens", "Input should be greater than or equal to 1")
		}
	}
	if top.Messages == nil {
		return nil, missing("messages")
	}
	var turns turnControls
	if req.Messages, err = decodeMessages(top.Messages, &turns); err != nil {
		return nil, err
	}
	if req.System, err = decodeSystem(top.System); err != nil {
		return nil, err
	}
	if top.Tools != nil {
		if req.Tools, err = decodeTools(top.Tools); err != nil {
			return nil, err
		}
	}
	if top.ToolChoice != nil {
		if err := decodeToolChoice(top.ToolChoice, req); err != nil {
			return nil, err
		}
	}
	if err := decodeOutput(&top, req); err != nil {
		return nil, err
	}
	if top.Thinking != nil {
		if err := decodeThinking(top.Thinking, req, count); err != nil {
			return nil, err
		}
	}
	turns.apply(req)
	if err := decodeSampling(&top, req); err != nil {
		return nil, err
	}
	if md := top.Metadata; md != nil {
		req.User = optString(md.UserID)
	}
	if rawKind(top.Stream) != 0 && !count {
		if req.Stream, err = decodeBool(top.Stream, "stream"); err != nil {
			return nil, err
		}
	}
	if req.CacheControl, err = decodeCacheControl(top.CacheControl, ""); err != nil {
		return nil, err
	}
	return req, nil
}

// decodeSampling checks temperature, top_p, top_k and stop_sequences
// against the vendor's ranges.
func decodeSampling(top *request, req *llm.Request) error {
	for _, f := range []struct {
		key string
		v   *float64
	}{{"temperature", top.Temperature}, {"top_p", top.TopP}} {
		if f.v != nil && (*f.v < 0 || *f.v > 1) {
			return llm.InvalidParam(f.key, "Input should be between 0 and 1")
		}
	}
	req.Temperature, req.TopP = top.Temperature, top.TopP
	if top.TopK != nil {
		k := int(*top.TopK)
		if k < 0 {
			return llm.InvalidParam("top_k", "Input should be greater than or equal to 0")
		}
		req.TopK = &k
	}
	for i, s := range top.StopSequences {
		if s == nil {
			return llm.InvalidParam(index("stop_sequences", i), "Input should be a string")
		}
		req.Stop = append(req.Stop, *s)
	}
	return nil
}

// decodeMessages decodes the conversation. Consecutive turns of one role are
// merged, as the vendor's API does; an empty final assistant turn (an empty
// prefill) is dropped. System messages inside the conversation are decoded
// by decodeSystemTurn, which records their per-turn controls in turns.
func decodeMessages(arr []*inMessage, turns *turnControls) ([]llm.Message, error) {
	if len(arr) == 0 {
		return nil, llm.InvalidParam("messages", "List should have at least 1 item")
	}
	var msgs []llm.Message
	cleared := map[int]bool{} // system messages that end at the next user message
	for i, o := range arr {
		p := index("messages", i)
		if o == nil {
			return nil, llm.InvalidParam(p, "Input should be an object")
		}
		role, err := reqString(o.Role, join(p, "role"))
		if err != nil {
			return nil, err
		}
		if err := oneOf(role, join(p, "role"), "user", "assistant", "system"); err != nil {
			return nil, err
		}
		if role == "system" {
			parts, clear, err := decodeSystemTurn(o, p, turns)
			if err != nil {
				return nil, err
			}
			if len(parts) > 0 {
				cleared[len(msgs)] = clear
				msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Parts: parts})
			}
			continue
		}
		if !o.Content.sent {
			return nil, missing(join(p, "content"))
		}
		parts, err := decodeContent(o.Content, join(p, "content"), llm.Role(role))
		if err != nil {
			return nil, err
		}
		if len(parts) == 0 {
			if role == "assistant" && i == len(arr)-1 && i > 0 {
				continue
			}
			return nil, llm.InvalidParam(join(p, "content"), "all messages must have non-empty content except for the optional final assistant message")
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == llm.Role(role) {
			msgs[n-1].Merge(parts...)
			continue
		}
		msgs = append(msgs, llm.Message{Role: llm.Role(role), Parts: parts})
	}
	msgs = dropCleared(msgs, cleared)
	for _, m := range msgs {
		if m.Role != llm.RoleSystem {
			return msgs, nil
		}
	}
	return nil, llm.InvalidParam("messages", "messages must contain at least one user or assistant message")
}

// decodeContent decodes a message's content: a string or an array of blocks.
func decodeContent(c content, param string, role llm.Role) ([]llm.Part, error) {
	if c.text != nil {
		if *c.text == "" {
			return nil, nil
		}
		return []llm.Part{llm.TextPart(*c.text)}, nil
	}
	if c.other {
		return nil, llm.InvalidParam(param, "Input should be a string or an array of content blocks")
	}
	parts := make([]llm.Part, 0, len(c.blocks))
	for j, b := range c.blocks {
		part, err := decodeBlock(b, index(param, j), role)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	return parts, nil
}

// blockRoles says which role may send each block type; the vendor rejects
// tool_use and thinking from users and tool_result from the assistant.
var blockRoles = map[string]llm.Role{
	"tool_use":          llm.RoleAssistant,
	"thinking":          llm.RoleAssistant,
	"redacted_thinking": llm.RoleAssistant,
	"tool_result":       llm.RoleUser,
}

// blockType is a block's type; b nil is a null element of the array.
func blockType(b *inBlock, p string) (string, error) {
	if b == nil {
		return "", llm.InvalidParam(p, "Input should be an object")
	}
	return reqString(b.Type, join(p, "type"))
}

// decodeBlock decodes one content block of a message.
func decodeBlock(b *inBlock, p string, role llm.Role) (llm.Part, error) {
	typ, err := blockType(b, p)
	if err != nil {
		return llm.Part{}, err
	}
	if want, ok := blockRoles[typ]; ok && want != role {
		return llm.Part{}, llm.InvalidParam(join(p, "type"), "%s blocks are only allowed in %s messages", typ, want)
	}
	var part llm.Part
	switch typ {
	case "text":
		part, err = decodeText(b, p)
	case "image":
		part, err = decodeImage(b, p)
	case "document":
		part, err = decodeDocument(b, p)
	case "tool_use":
		part, err = decodeToolUse(b, p)
	case "tool_result":
		part, err = decodeToolResult(b, p)
	case "thinking":
		part = llm.Part{Type: llm.PartReasoning, Text: optString(b.Thinking), Signature: optString(b.Signature)}
	case "redacted_thinking":
		part = llm.Part{Type: llm.PartReasoning, Redacted: true}
		part.Signature, err = reqString(b.Data, join(p, "data"))
	default:
		return llm.Part{}, llm.InvalidParam(join(p, "type"), "unsupported content block type %q: this gateway accepts text, image, document, tool_use, tool_result, thinking and redacted_thinking", typ)
	}
	if err != nil {
		return llm.Part{}, err
	}
	if part.CacheControl, err = decodeCacheControl(b.CacheControl, p); err != nil {
		return llm.Part{}, err
	}
	return part, nil
}

func decodeText(b *inBlock, p string) (llm.Part, error) {
	switch {
	case b.Text == nil:
		return llm.Part{}, missing(join(p, "text"))
	case *b.Text == "":
		return llm.Part{}, llm.InvalidParam(join(p, "text"), "text content blocks must be non-empty")
	}
	return llm.TextPart(*b.Text), nil
}

// decodeImage accepts base64 and URL sources; file ids (the vendor's Files
// API) are not portable across backends.
func decodeImage(b *inBlock, p string) (llm.Part, error) {
	src, sp, typ, err := decodeSource(b, p)
	if err != nil {
		return llm.Part{}, err
	}
	switch typ {
	case "base64":
		mt, err := reqString(src.MediaType, join(sp, "media_type"))
		if err != nil {
			return llm.Part{}, err
		}
		if err := oneOf(mt, join(sp, "media_type"), "image/jpeg", "image/png", "image/gif", "image/webp"); err != nil {
			return llm.Part{}, err
		}
		data, err := decodeData(src, sp)
		if err != nil {
			return llm.Part{}, err
		}
		return llm.Part{Type: llm.PartImage, MediaType: mt, Data: data}, nil
	case "url":
		u, err := reqString(src.URL, join(sp, "url"))
		if err != nil {
			return llm.Part{}, err
		}
		if pu, perr := url.Parse(u); perr != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return llm.Part{}, llm.InvalidParam(join(sp, "url"), "image URLs must be absolute http or https URLs")
		}
		return llm.Part{Type: llm.PartImage, URL: u}, nil
	}
	return llm.Part{}, llm.InvalidParam(sp, "unsupported image source type %q: send a base64 or url source", typ)
}

// decodeDocument accepts only base64 PDFs (docs/wire/messages.md#requests: URL sources, file-id
// sources, text sources and other media types are a 400).
func decodeDocument(b *inBlock, p string) (llm.Part, error) {
	src, sp, typ, err := decodeSource(b, p)
	if err != nil {
		return llm.Part{}, err
	}
	if typ != "base64" {
		return llm.Part{}, llm.InvalidParam(sp, "unsupported document source type %q: only base64 PDF documents (media_type application/pdf) are supported", typ)
	}
	mt, err := reqString(src.MediaType, join(sp, "media_type"))
	if err != nil {
		return llm.Part{}, err
	}
	if mt != "application/pdf" {
		return llm.Part{}, llm.InvalidParam(join(sp, "media_type"), "unsupported document media type %q: only application/pdf is supported", mt)
	}
	data, err := decodeData(src, sp)
	if err != nil {
		return llm.Part{}, err
	}
	return llm.Part{Type: llm.PartDocument, MediaType: mt, Data: data, Title: optString(b.Title)}, nil
}

// decodeSource returns a block's source, its path and its type.
func decodeSource(b *inBlock, p string) (*source, string, string, error) {
	sp := join(p, "source")
	if b.Source == nil {
		return nil, sp, "", missing(sp)
	}
	typ, err := reqString(b.Source.Type, join(sp, "type"))
	return b.Source, sp, typ, err
}

// decodeData decodes a source's standard base64 data.
func decodeData(src *source, sp string) ([]byte, error) {
	s, err := reqString(src.Data, join(sp, "data"))
	if err != nil {
		return nil, err
	}
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, llm.InvalidParam(join(sp, "data"), "data is not valid base64")
	}
	return data, nil
}

func decodeToolUse(b *inBlock, p string) (llm.Part, error) {
	id, err := reqString(b.ID, join(p, "id"))
	if err != nil {
		return llm.Part{}, err
	}
	name, err := reqString(b.Name, join(p, "name"))
	if err != nil {
		return llm.Part{}, err
	}
	switch rawKind(b.Input) {
	case 0:
		return llm.Part{}, missing(join(p, "input"))
	case '{':
	default:
		return llm.Part{}, llm.InvalidParam(join(p, "input"), "Input should be an object")
	}
	return llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: name, Arguments: llm.CompactJSON(b.Input)}}, nil
}

// decodeToolResult decodes a tool_result block; its content is a string or
// an array of text, image and document blocks.
func decodeToolResult(b *inBlock, p string) (llm.Part, error) {
	id, err := reqString(b.ToolUseID, join(p, "tool_use_id"))
	if err != nil {
		return llm.Part{}, err
	}
	res := &llm.ToolResult{CallID: id}
	if b.IsError != nil {
		res.IsError = *b.IsError
	}
	cp := join(p, "content")
	switch c := b.Content; {
	case c.text != nil:
		if *c.text != "" {
			res.Content = []llm.Part{llm.TextPart(*c.text)}
		}
	case c.other:
		return llm.Part{}, llm.InvalidParam(cp, "Input should be a string or an array of content blocks")
	default:
		for k, cb := range c.blocks {
			bp := index(cp, k)
			typ, err := blockType(cb, bp)
			if err != nil {
				return llm.Part{}, err
			}
			if err := oneOf(typ, join(bp, "type"), "text", "image", "document"); err != nil {
				return llm.Part{}, err
			}
			part, err := decodeBlock(cb, bp, llm.RoleUser)
			if err != nil {
				return llm.Part{}, err
			}
			res.Content = append(res.Content, part)
		}
	}
	return llm.Part{Type: llm.PartToolResult, ToolResult: res}, nil
}

// decodeSystem decodes the system prompt: a string or text blocks.
func decodeSystem(c content) ([]llm.Part, error) {
	switch {
	case c.text != nil:
		if *c.text == "" {
			return nil, nil
		}
		return []llm.Part{llm.TextPart(*c.text)}, nil
	case c.other:
		return nil, llm.InvalidParam("system", "Input should be a string or an array of text blocks")
	}
	var parts []llm.Part
	for i, b := range c.blocks {
		p := index("system", i)
		typ, err := blockType(b, p)
		if err != nil {
			return nil, err
		}
		if err := oneOf(typ, join(p, "type"), "text"); err != nil {
			return nil, err
		}
		part, err := decodeText(b, p)
		if err != nil {
			return nil, err
		}
		if part.CacheControl, err = decodeCacheControl(b.CacheControl, p); err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	return parts, nil
}

// decodeTools decodes custom tools. Server tools (a type such as
// web_search_20250305) run inside the vendor's API and have no portable
// equivalent, so they are a 400 rather than silently dropped.
func decodeTools(arr []*tool) ([]llm.Tool, error) {
	seen := make(map[string]bool, len(arr))
	tools := make([]llm.Tool, 0, len(arr))
	for i, r := range arr {
		p := index("tools", i)
		t, err := decodeTool(r, p)
		if err != nil {
			return nil, err
		}
		if seen[t.Name] {
			return nil, llm.InvalidParam(join(p, "name"), "Tool names must be unique.")
		}
		seen[t.Name] = true
		tools = append(tools, t)
	}
	return tools, nil
}

// decodeTool decodes one custom tool definition. Its defer_loading flag
// (tool search) is ignored: every tool is loaded from the start.
func decodeTool(o *tool, p string) (llm.Tool, error) {
	if o == nil {
		return llm.Tool{}, llm.InvalidParam(p, "Input should be an object")
	}
	if typ := optString(o.Type); typ != "" && typ != "custom" {
		return llm.Tool{}, llm.InvalidParam(join(p, "type"), "unsupported tool type %q: only custom tools ({name, description, input_schema}) are supported", typ)
	}
	var t llm.Tool
	var err error
	if t.Name, err = reqString(o.Name, join(p, "name")); err != nil {
		return llm.Tool{}, err
	}
	t.Description = optString(o.Description)
	switch rawKind(o.InputSchema) {
	case 0:
		return llm.Tool{}, missing(join(p, "input_schema"))
	case '{':
	default:
		return llm.Tool{}, llm.InvalidParam(join(p, "input_schema"), "Input should be an object")
	}
	t.Parameters = llm.CompactJSON(o.InputSchema)
	if o.Strict != nil {
		t.Strict = *o.Strict
	}
	if t.CacheControl, err = decodeCacheControl(o.CacheControl, p); err != nil {
		return llm.Tool{}, err
	}
	return t, nil
}

func decodeToolChoice(o *toolChoice, req *llm.Request) error {
	typ, err := reqString(o.Type, "tool_choice.type")
	if err != nil {
		return err
	}
	if err := oneOf(typ, "tool_choice.type", "auto", "any", "tool", "none"); err != nil {
		return err
	}
	switch typ {
	case "auto":
		req.ToolChoice.Mode = llm.ToolChoiceAuto
	case "any":
		req.ToolChoice.Mode = llm.ToolChoiceRequired
	case "none":
		req.ToolChoice.Mode = llm.ToolChoiceNone
	case "tool":
		req.ToolChoice.Mode = llm.ToolChoiceTool
		if req.ToolChoice.Name, err = reqString(o.Name, "tool_choice.name"); err != nil {
			return err
		}
	}
	if o.DisableParallelToolUse != nil {
		parallel := !*o.DisableParallelToolUse
		req.ParallelToolCalls = &parallel
	}
	return nil
}

// decodeOutput decodes output_config (effort and format) and the legacy beta
// output_format, which output_config.format supersedes.
func decodeOutput(top *request, req *llm.Request) error {
	format, param := top.OutputFormat, "output_format"
	if oc := top.OutputConfig; oc != nil {
		if effort := optString(oc.Effort); effort != "" {
			if err := oneOf(effort, "output_config.effort", "low", "medium", "high", "xhigh", "max"); err != nil {
				return err
			}
			if req.Reasoning == nil {
				req.Reasoning = &llm.Reasoning{}
			}
			req.Reasoning.Effort = effort
		}
		if oc.Format != nil {
			format, param = oc.Format, "output_config.format"
		}
	}
	if format == nil {
		return nil
	}
	typ, err := reqString(format.Type, join(param, "type"))
	if err != nil {
		return err
	}
	if err := oneOf(typ, join(param, "type"), "json_schema"); err != nil {
		return err
	}
	switch rawKind(format.Schema) {
	case 0:
		return missing(join(param, "schema"))
	case '{':
	default:
		return llm.InvalidParam(join(param, "schema"), "Input should be an object")
	}
	// Structured outputs are constrained decoding: the reply always matches
	// the schema, which is what Strict means for the other formats.
	req.ResponseFormat = &llm.ResponseFormat{Schema: llm.CompactJSON(format.Schema), Strict: true}
	return nil
}

// decodeThinking decodes thinking; output_config.effort (decoded before it)
// may already have created req.Reasoning.
func decodeThinking(o *thinking, req *llm.Request, count bool) error {
	typ, err := reqString(o.Type, "thinking.type")
	if err != nil {
		return err
	}
	if err := oneOf(typ, "thinking.type", "enabled", "adaptive", "disabled"); err != nil {
		return err
	}
	display := optString(o.Display)
	if display != "" {
		// "updates" (beta thinking-display-updates-2026-08-18, Claude Code's
		// default) streams the thinking as progress updates; a backend
		// gives either its summarized thinking or none, so it is shown as
		// summarized is.
		if err := oneOf(display, "thinking.display", "summarized", "omitted", "updates"); err != nil {
			return err
		}
	}
	r := req.Reasoning
	if r == nil {
		r = &llm.Reasoning{}
	}
	switch typ {
	case "enabled":
		if o.BudgetTokens == nil {
			return missing("thinking.budget_tokens")
		}
		r.BudgetTokens = int(*o.BudgetTokens)
		if r.BudgetTokens < 1024 {
			return llm.InvalidParam("thinking.budget_tokens", "Input should be greater than or equal to 1024")
		}
		if !count && r.BudgetTokens >= req.MaxTokens {
			return llm.InvalidParam("thinking.budget_tokens", "`max_tokens` must be greater than `thinking.budget_tokens`")
		}
		fallthrough
	case "adaptive":
		r.Enabled = true
		r.IncludeThoughts = display != "omitted"
	case "disabled":
		r.Enabled = false
	}
	req.Reasoning = r
	return nil
}

// decodeCacheControl decodes a cache_control member, if any.
func decodeCacheControl(cc *cacheControl, p string) (*llm.CacheControl, error) {
	if cc == nil {
		return nil, nil
	}
	cp := join(p, "cache_control")
	typ, err := reqString(cc.Type, join(cp, "type"))
	if err != nil {
		return nil, err
	}
	if err := oneOf(typ, join(cp, "type"), "ephemeral"); err != nil {
		return nil, err
	}
	ttl := optString(cc.TTL)
	if ttl == "" {
		ttl = "5m"
	}
	if err := oneOf(ttl, join(cp, "ttl"), "5m", "1h"); err != nil {
		return nil, err
	}
	return &llm.CacheControl{TTL: ttl}, nil
}
