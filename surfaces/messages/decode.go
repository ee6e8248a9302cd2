package messages

import (
	"encoding/base64"
	"encoding/json"
	"net/url"

	"github.com/svcgw/svcgw/llm"
)

// decodeRequest turns a messages request body into a canonical request.
// count is true for count_tokens, whose body has no max_tokens and whose
// stream flag means nothing. Unknown fields are ignored (the vendor answers
// 400 to them, but SDKs newer than this gateway send fields it does not know).
func decodeRequest(body []byte, count bool) (*llm.Request, error) {
	if !json.Valid(body) {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Message: "The request body is not valid JSON."}
	}
	if jsonKind(body) != '{' {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Message: "The request body must be a JSON object."}
	}
	top, err := decodeObject(body, "")
	if err != nil {
		return nil, err
	}
	req := &llm.Request{}

	if req.Model, err = reqString(top, "model", ""); err != nil {
		return nil, err
	}
	if !count {
		raw := top.get("max_tokens")
		if raw == nil {
			return nil, missing("max_tokens")
		}
		if req.MaxTokens, err = decodeInt(raw, "max_tokens"); err != nil {
			return nil, err
		}
		if req.MaxTokens < 1 {
			return nil, llm.InvalidParam("max_tokens", "Input should be greater than or equal to 1")
		}
	}
	raw := top.get("messages")
	if raw == nil {
		return nil, missing("messages")
	}
	var turns turnControls
	if req.Messages, err = decodeMessages(raw, &turns); err != nil {
		return nil, err
	}
	if raw := top.get("system"); raw != nil {
		if req.System, err = decodeSystem(raw); err != nil {
			return nil, err
		}
	}
	if raw := top.get("tools"); raw != nil {
		if req.Tools, err = decodeTools(raw); err != nil {
			return nil, err
		}
	}
	if raw := top.get("tool_choice"); raw != nil {
		if err := decodeToolChoice(raw, req); err != nil {
			return nil, err
		}
	}
	if err := decodeOutput(top, req); err != nil {
		return nil, err
	}
	if raw := top.get("thinking"); raw != nil {
		if err := decodeThinking(raw, req, count); err != nil {
			return nil, err
		}
	}
	turns.apply(req)
	if err := decodeSampling(top, req); err != nil {
		return nil, err
	}
	if raw := top.get("metadata"); raw != nil {
		md, err := decodeObject(raw, "metadata")
		if err != nil {
			return nil, err
		}
		if req.User, err = optString(md, "user_id", "metadata"); err != nil {
			return nil, err
		}
	}
	if raw := top.get("stream"); raw != nil && !count {
		if req.Stream, err = decodeBool(raw, "stream"); err != nil {
			return nil, err
		}
	}
	if req.CacheControl, err = decodeCacheControl(top, ""); err != nil {
		return nil, err
	}
	return req, nil
}

// decodeSampling decodes temperature, top_p, top_k and stop_sequences, with
// the vendor's ranges.
func decodeSampling(top object, req *llm.Request) error {
	for _, f := range []struct {
		key string
		dst **float64
	}{{"temperature", &req.Temperature}, {"top_p", &req.TopP}} {
		raw := top.get(f.key)
		if raw == nil {
			continue
		}
		v, err := decodeFloat(raw, f.key)
		if err != nil {
			return err
		}
		if v < 0 || v > 1 {
			return llm.InvalidParam(f.key, "Input should be between 0 and 1")
		}
		*f.dst = &v
	}
	if raw := top.get("top_k"); raw != nil {
		k, err := decodeInt(raw, "top_k")
		if err != nil {
			return err
		}
		if k < 0 {
			return llm.InvalidParam("top_k", "Input should be greater than or equal to 0")
		}
		req.TopK = &k
	}
	if raw := top.get("stop_sequences"); raw != nil {
		arr, err := decodeArray(raw, "stop_sequences")
		if err != nil {
			return err
		}
		for i, r := range arr {
			s, err := decodeString(r, index("stop_sequences", i))
			if err != nil {
				return err
			}
			req.Stop = append(req.Stop, s)
		}
	}
	return nil
}

// decodeMessages decodes the conversation. Consecutive turns of one role are
// merged, as the vendor's API does; an empty final assistant turn (an empty
// prefill) is dropped. System messages inside the conversation are decoded
// by decodeSystemTurn, which records their per-turn controls in turns.
func decodeMessages(raw json.RawMessage, turns *turnControls) ([]llm.Message, error) {
	arr, err := decodeArray(raw, "messages")
	if err != nil {
		return nil, err
	}
	if len(arr) == 0 {
		return nil, llm.InvalidParam("messages", "List should have at least 1 item")
	}
	var msgs []llm.Message
	cleared := map[int]bool{} // system messages that end at the next user message
	for i, r := range arr {
		p := index("messages", i)
		o, err := decodeObject(r, p)
		if err != nil {
			return nil, err
		}
		role, err := reqString(o, "role", p)
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
		craw := o.get("content")
		if craw == nil {
			return nil, missing(join(p, "content"))
		}
		parts, err := decodeContent(craw, join(p, "content"), llm.Role(role))
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
func decodeContent(raw json.RawMessage, param string, role llm.Role) ([]llm.Part, error) {
	if jsonKind(raw) == '"' {
		s, err := decodeString(raw, param)
		if err != nil || s == "" {
			return nil, err
		}
		return []llm.Part{llm.TextPart(s)}, nil
	}
	if jsonKind(raw) != '[' {
		return nil, llm.InvalidParam(param, "Input should be a string or an array of content blocks")
	}
	arr, err := decodeArray(raw, param)
	if err != nil {
		return nil, err
	}
	parts := make([]llm.Part, 0, len(arr))
	for j, b := range arr {
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

// decodeBlock decodes one content block of a message.
func decodeBlock(raw json.RawMessage, p string, role llm.Role) (llm.Part, error) {
	o, err := decodeObject(raw, p)
	if err != nil {
		return llm.Part{}, err
	}
	typ, err := reqString(o, "type", p)
	if err != nil {
		return llm.Part{}, err
	}
	if want, ok := blockRoles[typ]; ok && want != role {
		return llm.Part{}, llm.InvalidParam(join(p, "type"), "%s blocks are only allowed in %s messages", typ, want)
	}
	var part llm.Part
	switch typ {
	case "text":
		part, err = decodeText(o, p)
	case "image":
		part, err = decodeImage(o, p)
	case "document":
		part, err = decodeDocument(o, p)
	case "tool_use":
		part, err = decodeToolUse(o, p)
	case "tool_result":
		part, err = decodeToolResult(o, p)
	case "thinking":
		part.Type = llm.PartReasoning
		if part.Text, err = optString(o, "thinking", p); err == nil {
			part.Signature, err = optString(o, "signature", p)
		}
	case "redacted_thinking":
		part = llm.Part{Type: llm.PartReasoning, Redacted: true}
		part.Signature, err = reqString(o, "data", p)
	default:
		return llm.Part{}, llm.InvalidParam(join(p, "type"), "unsupported content block type %q: this gateway accepts text, image, document, tool_use, tool_result, thinking and redacted_thinking", typ)
	}
	if err != nil {
		return llm.Part{}, err
	}
	if part.CacheControl, err = decodeCacheControl(o, p); err != nil {
		return llm.Part{}, err
	}
	return part, nil
}

func decodeText(o object, p string) (llm.Part, error) {
	raw := o.get("text")
	if raw == nil {
		return llm.Part{}, missing(join(p, "text"))
	}
	s, err := decodeString(raw, join(p, "text"))
	if err != nil {
		return llm.Part{}, err
	}
	if s == "" {
		return llm.Part{}, llm.InvalidParam(join(p, "text"), "text content blocks must be non-empty")
	}
	return llm.TextPart(s), nil
}

// decodeImage accepts base64 and URL sources; file ids (the vendor's Files
// API) are not portable across backends.
func decodeImage(o object, p string) (llm.Part, error) {
	src, sp, typ, err := decodeSource(o, p)
	if err != nil {
		return llm.Part{}, err
	}
	switch typ {
	case "base64":
		mt, err := reqString(src, "media_type", sp)
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
		u, err := reqString(src, "url", sp)
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

// decodeDocument accepts only base64 PDFs (SPEC.md: URL sources, file-id
// sources, text sources and other media types are a 400).
func decodeDocument(o object, p string) (llm.Part, error) {
	src, sp, typ, err := decodeSource(o, p)
	if err != nil {
		return llm.Part{}, err
	}
	if typ != "base64" {
		return llm.Part{}, llm.InvalidParam(sp, "unsupported document source type %q: only base64 PDF documents (media_type application/pdf) are supported", typ)
	}
	mt, err := reqString(src, "media_type", sp)
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
	title, err := optString(o, "title", p)
	if err != nil {
		return llm.Part{}, err
	}
	if _, err := optString(o, "context", p); err != nil {
		return llm.Part{}, err
	}
	return llm.Part{Type: llm.PartDocument, MediaType: mt, Data: data, Title: title}, nil
}

// decodeSource returns a block's source object, its path and its type.
func decodeSource(o object, p string) (object, string, string, error) {
	sp := join(p, "source")
	raw := o.get("source")
	if raw == nil {
		return nil, sp, "", missing(sp)
	}
	src, err := decodeObject(raw, sp)
	if err != nil {
		return nil, sp, "", err
	}
	typ, err := reqString(src, "type", sp)
	return src, sp, typ, err
}

// decodeData decodes a source's standard base64 data.
func decodeData(src object, sp string) ([]byte, error) {
	s, err := reqString(src, "data", sp)
	if err != nil {
		return nil, err
	}
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, llm.InvalidParam(join(sp, "data"), "data is not valid base64")
	}
	return data, nil
}

func decodeToolUse(o object, p string) (llm.Part, error) {
	id, err := reqString(o, "id", p)
	if err != nil {
		return llm.Part{}, err
	}
	name, err := reqString(o, "name", p)
	if err != nil {
		return llm.Part{}, err
	}
	raw := o.get("input")
	if raw == nil {
		return llm.Part{}, missing(join(p, "input"))
	}
	if jsonKind(raw) != '{' {
		return llm.Part{}, llm.InvalidParam(join(p, "input"), "Input should be an object")
	}
	return llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: name, Arguments: compact(raw)}}, nil
}

// decodeToolResult decodes a tool_result block; its content is a string or
// an array of text, image and document blocks.
func decodeToolResult(o object, p string) (llm.Part, error) {
	id, err := reqString(o, "tool_use_id", p)
	if err != nil {
		return llm.Part{}, err
	}
	res := &llm.ToolResult{CallID: id}
	if raw := o.get("is_error"); raw != nil {
		if res.IsError, err = decodeBool(raw, join(p, "is_error")); err != nil {
			return llm.Part{}, err
		}
	}
	cp := join(p, "content")
	switch raw := o.get("content"); jsonKind(raw) {
	case 0:
	case '"':
		s, err := decodeString(raw, cp)
		if err != nil {
			return llm.Part{}, err
		}
		if s != "" {
			res.Content = []llm.Part{llm.TextPart(s)}
		}
	case '[':
		arr, err := decodeArray(raw, cp)
		if err != nil {
			return llm.Part{}, err
		}
		for k, b := range arr {
			bp := index(cp, k)
			bo, err := decodeObject(b, bp)
			if err != nil {
				return llm.Part{}, err
			}
			typ, err := reqString(bo, "type", bp)
			if err != nil {
				return llm.Part{}, err
			}
			if err := oneOf(typ, join(bp, "type"), "text", "image", "document"); err != nil {
				return llm.Part{}, err
			}
			part, err := decodeBlock(b, bp, llm.RoleUser)
			if err != nil {
				return llm.Part{}, err
			}
			res.Content = append(res.Content, part)
		}
	default:
		return llm.Part{}, llm.InvalidParam(cp, "Input should be a string or an array of content blocks")
	}
	return llm.Part{Type: llm.PartToolResult, ToolResult: res}, nil
}

// decodeSystem decodes the system prompt: a string or text blocks.
func decodeSystem(raw json.RawMessage) ([]llm.Part, error) {
	switch jsonKind(raw) {
	case '"':
		s, err := decodeString(raw, "system")
		if err != nil || s == "" {
			return nil, err
		}
		return []llm.Part{llm.TextPart(s)}, nil
	case '[':
	default:
		return nil, llm.InvalidParam("system", "Input should be a string or an array of text blocks")
	}
	arr, err := decodeArray(raw, "system")
	if err != nil {
		return nil, err
	}
	var parts []llm.Part
	for i, b := range arr {
		p := index("system", i)
		o, err := decodeObject(b, p)
		if err != nil {
			return nil, err
		}
		typ, err := reqString(o, "type", p)
		if err != nil {
			return nil, err
		}
		if err := oneOf(typ, join(p, "type"), "text"); err != nil {
			return nil, err
		}
		part, err := decodeText(o, p)
		if err != nil {
			return nil, err
		}
		if part.CacheControl, err = decodeCacheControl(o, p); err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	return parts, nil
}

// decodeTools decodes custom tools. Server tools (a type such as
// web_search_20250305) run inside the vendor's API and have no portable
// equivalent, so they are a 400 rather than silently dropped.
func decodeTools(raw json.RawMessage) ([]llm.Tool, error) {
	arr, err := decodeArray(raw, "tools")
	if err != nil {
		return nil, err
	}
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
func decodeTool(raw json.RawMessage, p string) (llm.Tool, error) {
	o, err := decodeObject(raw, p)
	if err != nil {
		return llm.Tool{}, err
	}
	typ, err := optString(o, "type", p)
	if err != nil {
		return llm.Tool{}, err
	}
	if typ != "" && typ != "custom" {
		return llm.Tool{}, llm.InvalidParam(join(p, "type"), "unsupported tool type %q: only custom tools ({name, description, input_schema}) are supported", typ)
	}
	var t llm.Tool
	if t.Name, err = reqString(o, "name", p); err != nil {
		return llm.Tool{}, err
	}
	if t.Description, err = optString(o, "description", p); err != nil {
		return llm.Tool{}, err
	}
	schema := o.get("input_schema")
	if schema == nil {
		return llm.Tool{}, missing(join(p, "input_schema"))
	}
	if jsonKind(schema) != '{' {
		return llm.Tool{}, llm.InvalidParam(join(p, "input_schema"), "Input should be an object")
	}
	t.Parameters = compact(schema)
	if raw := o.get("strict"); raw != nil {
		if t.Strict, err = decodeBool(raw, join(p, "strict")); err != nil {
			return llm.Tool{}, err
		}
	}
	if t.CacheControl, err = decodeCacheControl(o, p); err != nil {
		return llm.Tool{}, err
	}
	return t, nil
}

func decodeToolChoice(raw json.RawMessage, req *llm.Request) error {
	o, err := decodeObject(raw, "tool_choice")
	if err != nil {
		return err
	}
	typ, err := reqString(o, "type", "tool_choice")
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
		if req.ToolChoice.Name, err = reqString(o, "name", "tool_choice"); err != nil {
			return err
		}
	}
	if raw := o.get("disable_parallel_tool_use"); raw != nil {
		off, err := decodeBool(raw, "tool_choice.disable_parallel_tool_use")
		if err != nil {
			return err
		}
		parallel := !off
		req.ParallelToolCalls = &parallel
	}
	return nil
}

// decodeOutput decodes output_config (effort and format) and the legacy beta
// output_format, which output_config.format supersedes.
func decodeOutput(top object, req *llm.Request) error {
	var format json.RawMessage
	param := "output_format"
	if raw := top.get("output_format"); raw != nil {
		format = raw
	}
	if raw := top.get("output_config"); raw != nil {
		oc, err := decodeObject(raw, "output_config")
		if err != nil {
			return err
		}
		effort, err := optString(oc, "effort", "output_config")
		if err != nil {
			return err
		}
		if effort != "" {
			if err := oneOf(effort, "output_config.effort", "low", "medium", "high", "xhigh", "max"); err != nil {
				return err
			}
			if req.Reasoning == nil {
				req.Reasoning = &llm.Reasoning{}
			}
			req.Reasoning.Effort = effort
		}
		if raw := oc.get("format"); raw != nil {
			format, param = raw, "output_config.format"
		}
	}
	if format == nil {
		return nil
	}
	o, err := decodeObject(format, param)
	if err != nil {
		return err
	}
	typ, err := reqString(o, "type", param)
	if err != nil {
		return err
	}
	if err := oneOf(typ, join(param, "type"), "json_schema"); err != nil {
		return err
	}
	schema := o.get("schema")
	if schema == nil {
		return missing(join(param, "schema"))
	}
	if jsonKind(schema) != '{' {
		return llm.InvalidParam(join(param, "schema"), "Input should be an object")
	}
	// Structured outputs are constrained decoding: the reply always matches
	// the schema, which is what Strict means for the other formats.
	req.ResponseFormat = &llm.ResponseFormat{Schema: compact(schema), Strict: true}
	return nil
}

// decodeThinking decodes thinking; output_config.effort (decoded before it)
// may already have created req.Reasoning.
func decodeThinking(raw json.RawMessage, req *llm.Request, count bool) error {
	o, err := decodeObject(raw, "thinking")
	if err != nil {
		return err
	}
	typ, err := reqString(o, "type", "thinking")
	if err != nil {
		return err
	}
	if err := oneOf(typ, "thinking.type", "enabled", "adaptive", "disabled"); err != nil {
		return err
	}
	display, err := optString(o, "display", "thinking")
	if err != nil {
		return err
	}
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
		braw := o.get("budget_tokens")
		if braw == nil {
			return missing("thinking.budget_tokens")
		}
		if r.BudgetTokens, err = decodeInt(braw, "thinking.budget_tokens"); err != nil {
			return err
		}
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

// decodeCacheControl decodes the cache_control member of o, if any.
func decodeCacheControl(o object, p string) (*llm.CacheControl, error) {
	raw := o.get("cache_control")
	if raw == nil {
		return nil, nil
	}
	cp := join(p, "cache_control")
	cc, err := decodeObject(raw, cp)
	if err != nil {
		return nil, err
	}
	typ, err := reqString(cc, "type", cp)
	if err != nil {
		return nil, err
	}
	if err := oneOf(typ, join(cp, "type"), "ephemeral"); err != nil {
		return nil, err
	}
	ttl, err := optString(cc, "ttl", cp)
	if err != nil {
		return nil, err
	}
	if ttl == "" {
		ttl = "5m"
	}
	if err := oneOf(ttl, join(cp, "ttl"), "5m", "1h"); err != nil {
		return nil, err
	}
	return &llm.CacheControl{TTL: ttl}, nil
}
