package gencontent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// DecodeRequest turns a generateContent or streamGenerateContent body into a
// canonical request. The model and the method come from the path (the
// route's {rest...} wildcard), not the body: the model is echoed back as
// modelVersion, and streamGenerateContent streams with usage.
func (Codec) DecodeRequest(r *http.Request, body []byte) (*llm.Request, error) {
	model, method, err := ParseModelMethod(r.PathValue("rest"))
	if err != nil {
		return nil, err
	}
	req, err := decodeRequest(body, "")
	if err != nil {
		return nil, err
	}
	req.Model = model
	if method == MethodStreamGenerate {
		req.Stream = true
		req.IncludeUsage = true
	}
	return req, nil
}

// decodeRequest decodes a GenerateContentRequest body. prefix is the path of
// the request inside the body ("generateContentRequest." for countTokens),
// for error messages.
func decodeRequest(body []byte, prefix string) (*llm.Request, error) {
	var w generateContentRequest
	if err := unmarshal(body, &w, prefix); err != nil {
		return nil, err
	}
	d := decoder{prefix: prefix}
	return d.request(&w)
}

// unmarshal decodes JSON (surface.Decode), turning failures into
// invalid_request errors worded as Google's are, naming the offending field
// as encoding/json does (without indexes) after prefix, the path of data in
// the body.
func unmarshal(data []byte, v any, prefix string) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return llm.InvalidParam(strings.TrimSuffix(prefix, "."), "Invalid JSON payload received: the body is empty; send a JSON GenerateContentRequest")
	}
	err := surface.Decode(data, v, surface.EncodingJSON)
	var de *surface.DecodeError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &de):
	case de.Syntax != nil:
		return llm.InvalidParam(strings.TrimSuffix(prefix, "."), "Invalid JSON payload received at byte %d: %s", de.Syntax.Offset, de.Syntax.Error())
	default:
		field := prefix + de.Field()
		if de.Field() == "" {
			field = strings.TrimSuffix(prefix, ".")
		}
		if field == "" {
			return llm.InvalidParam("", "Invalid JSON payload received: expected %s, got %s", de.Wanted(), article(de.Got))
		}
		return llm.InvalidParam(field, "Invalid value at '%s': expected %s, got %s", field, de.Wanted(), article(de.Got))
	}
	return llm.InvalidParam(strings.TrimSuffix(prefix, "."), "Invalid JSON payload received")
}

func article(kind string) string {
	switch kind {
	case "array", "object":
		return "an " + kind
	case "bool":
		return "a boolean"
	case "":
		return "another type"
	}
	return "a " + kind
}

// decoder converts a decoded wire request; prefix roots its error paths.
type decoder struct {
	prefix string
}

func (d decoder) at(format string, args ...any) string {
	return d.prefix + fmt.Sprintf(format, args...)
}

func (d decoder) request(w *generateContentRequest) (*llm.Request, error) {
	req := &llm.Request{}
	if w.CachedContent != "" {
		return nil, llm.InvalidParam(d.at("cachedContent"),
			"cachedContent (an explicit context cache) is not supported: send the content itself; repeated prefixes are cached automatically")
	}
	if w.SystemInstruction != nil {
		sys, err := d.system(w.SystemInstruction)
		if err != nil {
			return nil, err
		}
		req.System = sys
	}
	msgs, err := d.contents(w.Contents)
	if err != nil {
		return nil, err
	}
	req.Messages = msgs
	if err := d.tools(req, w.Tools); err != nil {
		return nil, err
	}
	if err := d.toolConfig(req, w.ToolConfig); err != nil {
		return nil, err
	}
	if err := d.generationConfig(req, w.GenerationConfig); err != nil {
		return nil, err
	}
	return req, nil
}

// system decodes systemInstruction: text parts only; its role is ignored
// (the SDKs send "user").
func (d decoder) system(c *content) ([]llm.Part, error) {
	var out []llm.Part
	for j, p := range c.Parts {
		path := d.at("systemInstruction.parts[%d]", j)
		k, err := kindOf(p, path)
		if err != nil {
			return nil, err
		}
		switch k {
		case kindNone:
		case kindText:
			out = append(out, llm.TextPart(p.Text))
		default:
			return nil, llm.InvalidParam(path, "%s: systemInstruction holds text parts only", path)
		}
	}
	return out, nil
}

// contents decodes the conversation. Consecutive contents of one role merge
// into one message (the chat helpers of the SDKs record each streamed chunk
// as its own content), contents left without parts are dropped, and tool
// results are paired with the calls they answer.
func (d decoder) contents(cs []content) ([]llm.Message, error) {
	var msgs []llm.Message
	var turn *modelTurn // the model turn being built
	flush := func() {
		if turn == nil || len(turn.parts) == 0 {
			turn = nil
			return
		}
		parts := turn.result()
		if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleAssistant {
			msgs[n-1].Merge(parts...)
			msgs[n-1].Turns += turn.contents - 1
		} else {
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Parts: parts, Turns: turn.contents})
		}
		turn = nil
	}
	for i, c := range cs {
		switch c.Role {
		case "model":
			if turn == nil {
				turn = &modelTurn{}
			}
			turn.contents++
			if err := d.modelContent(turn, i, c.Parts); err != nil {
				return nil, err
			}
		case "", "user", "function": // "function": older material's tool-result turn
			parts, err := d.userContent(i, c.Parts)
			if err != nil {
				return nil, err
			}
			if len(parts) == 0 {
				continue
			}
			flush()
			if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleUser {
				msgs[n-1].Merge(parts...)
			} else {
				msgs = append(msgs, llm.Message{Role: llm.RoleUser, Parts: parts})
			}
		default:
			return nil, llm.InvalidParam(d.at("contents[%d].role", i),
				"contents[%d].role is %s: a content's role is user or model (system prompts go in systemInstruction)", i, quote(c.Role))
		}
	}
	flush()
	if len(msgs) == 0 {
		return nil, llm.InvalidParam(d.at("contents"), "contents is empty: send at least one content with a non-empty part")
	}
	pairToolResults(msgs)
	return msgs, nil
}

// partKind is the data field a part holds.
type partKind int

const (
	kindNone partKind = iota // no data (a bare signature, an empty text)
	kindText
	kindInline
	kindCall
	kindResponse
)

// kindOf finds the one data field of a part, refusing parts with several and
// the kinds that cannot be served (file references, server-side code
// execution).
func kindOf(p part, path string) (partKind, error) {
	var kinds []partKind
	if p.Text != "" {
		kinds = append(kinds, kindText)
	}
	if p.InlineData != nil {
		kinds = append(kinds, kindInline)
	}
	if p.FunctionCall != nil {
		kinds = append(kinds, kindCall)
	}
	if p.FunctionResponse != nil {
		kinds = append(kinds, kindResponse)
	}
	switch {
	case present(p.FileData):
		return 0, llm.InvalidParam(path+".fileData",
			"%s.fileData is not supported: file references (Files API, Cloud Storage, YouTube) do not carry over; send the bytes as inlineData", path)
	case present(p.ExecutableCode), present(p.CodeExecutionResult):
		return 0, llm.InvalidParam(path, "%s: executableCode and codeExecutionResult parts are not supported (there is no code execution tool)", path)
	case len(kinds) > 1:
		return 0, llm.InvalidParam(path, "%s holds more than one of text, inlineData, functionCall and functionResponse: send one per part", path)
	case len(kinds) == 0:
		return kindNone, nil
	}
	return kinds[0], nil
}

// userContent decodes the parts of a user turn: text, images, PDFs and
// function responses.
func (d decoder) userContent(i int, ps []part) ([]llm.Part, error) {
	var out []llm.Part
	for j, p := range ps {
		path := d.at("contents[%d].parts[%d]", i, j)
		k, err := kindOf(p, path)
		if err != nil {
			return nil, err
		}
		switch k {
		case kindNone:
			// An empty part: nothing to send. A thoughtSignature on a user
			// part means nothing either.
		case kindText:
			if p.Thought {
				return nil, llm.InvalidParam(path+".thought", "%s: thought parts belong in a model turn", path)
			}
			out = append(out, llm.TextPart(p.Text))
		case kindInline:
			mp, err := mediaPart(p.InlineData, path+".inlineData")
			if err != nil {
				return nil, err
			}
			out = append(out, mp)
		case kindCall:
			return nil, llm.InvalidParam(path+".functionCall", "%s: functionCall parts belong in a model turn", path)
		case kindResponse:
			tr, err := toolResult(p.FunctionResponse, path+".functionResponse")
			if err != nil {
				return nil, err
			}
			out = append(out, llm.Part{Type: llm.PartToolResult, ToolResult: tr})
		}
	}
	return out, nil
}

// modelContent decodes the parts of a model turn into turn: thought parts,
// text, function calls and inline media, with the signatures of our
// envelopes put back where they came from (signature.go).
func (d decoder) modelContent(turn *modelTurn, i int, ps []part) error {
	for j, p := range ps {
		path := d.at("contents[%d].parts[%d]", i, j)
		k, err := kindOf(p, path)
		if err != nil {
			return err
		}
		env, _ := decodeSignature(p.ThoughtSignature)
		for _, b := range env.Blocks {
			turn.close(b)
		}
		switch k {
		case kindNone:
		case kindText:
			if !p.Thought {
				turn.add(llm.TextPart(p.Text))
				break
			}
			turn.thought(p.Text)
			if env.Own != nil {
				b := *env.Own
				b.Merge = true
				turn.close(b)
			}
		case kindInline:
			mp, err := mediaPart(p.InlineData, path+".inlineData")
			if err != nil {
				return err
			}
			turn.add(mp)
		case kindCall:
			tc, err := toolCall(p.FunctionCall, path+".functionCall")
			if err != nil {
				return err
			}
			tc.Signature = env.Call
			turn.add(llm.Part{Type: llm.PartToolCall, ToolCall: tc})
		case kindResponse:
			return llm.InvalidParam(path+".functionResponse", "%s: functionResponse parts belong in a user turn", path)
		}
		for _, b := range env.After {
			turn.close(b)
		}
	}
	return nil
}

// mediaPart decodes inline bytes: images and PDFs are portable to every
// backend; audio, video and other types are not.
func mediaPart(b *blob, path string) (llm.Part, error) {
	mt := strings.ToLower(strings.TrimSpace(b.MIMEType))
	if base, _, ok := strings.Cut(mt, ";"); ok {
		mt = strings.TrimSpace(base)
	}
	var typ llm.PartType
	switch {
	case strings.HasPrefix(mt, "image/"):
		typ = llm.PartImage
	case mt == "application/pdf":
		typ = llm.PartDocument
	case mt == "":
		return llm.Part{}, llm.InvalidParam(path+".mimeType", "%s.mimeType is required", path)
	default:
		return llm.Part{}, llm.InvalidParam(path+".mimeType",
			"%s.mimeType %s is not supported: send images (image/*) or PDF documents (application/pdf)", path, quote(b.MIMEType))
	}
	data, err := decodeBase64(b.Data)
	if err != nil {
		return llm.Part{}, llm.InvalidParam(path+".data", "%s.data is not valid standard base64", path)
	}
	if len(data) == 0 {
		return llm.Part{}, llm.InvalidParam(path+".data", "%s.data is empty", path)
	}
	return llm.Part{Type: typ, MediaType: mt, Data: data}, nil
}

// decodeBase64 accepts standard base64 with or without padding (and the line
// breaks of MIME-style encoders).
func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return base64.RawStdEncoding.DecodeString(s)
	}
	return b, nil
}

func toolCall(fc *functionCall, path string) (*llm.ToolCall, error) {
	if fc.Name == "" {
		return nil, llm.InvalidParam(path+".name", "%s.name is required", path)
	}
	args, err := objectJSON(fc.Args, path+".args")
	if err != nil {
		return nil, err
	}
	return &llm.ToolCall{ID: fc.ID, Name: fc.Name, Arguments: args}, nil
}

// toolResult decodes a functionResponse. Its content is the JSON text of
// response, the object Gemini requires; a response whose only key is
// "error" is how Gemini callers report a failed call (docs/translation.md#tool-calls-and-results).
func toolResult(fr *functionResponse, path string) (*llm.ToolResult, error) {
	if fr.Name == "" {
		return nil, llm.InvalidParam(path+".name", "%s.name is required", path)
	}
	resp, err := objectJSON(fr.Response, path+".response")
	if err != nil {
		return nil, err
	}
	tr := &llm.ToolResult{CallID: fr.ID, Name: fr.Name, Content: []llm.Part{llm.TextPart(string(resp))}}
	if bytes.HasPrefix(resp, []byte(`{"error":`)) { // compacted: cheap to rule out
		var keys map[string]json.RawMessage
		tr.IsError = json.Unmarshal(resp, &keys) == nil && len(keys) == 1
	}
	for k, p := range fr.Parts {
		pp := fmt.Sprintf("%s.parts[%d]", path, k)
		switch {
		case present(p.FileData):
			return nil, llm.InvalidParam(pp+".fileData", "%s.fileData is not supported: send the bytes as inlineData", pp)
		case p.InlineData != nil:
			mp, err := mediaPart(p.InlineData, pp+".inlineData")
			if err != nil {
				return nil, err
			}
			tr.Content = append(tr.Content, mp)
		}
	}
	return tr, nil
}

// objectJSON returns raw compacted, requiring a JSON object; absent or null
// is the empty object.
func objectJSON(raw json.RawMessage, path string) (json.RawMessage, error) {
	if !present(raw) {
		return json.RawMessage("{}"), nil
	}
	if raw[0] != '{' {
		return nil, llm.InvalidParam(path, "%s must be a JSON object", path)
	}
	return llm.CompactJSON(raw), nil
}

// pairToolResults gives every tool call and tool result an id. Gemini's
// calls often have none, and the SDKs build function responses from a name
// alone, but other backends pair results with calls by id. A call without
// an id gets call_<message>_<n> (stable as the conversation grows, so
// prompt caches still match); a result without one answers the first
// unanswered call of the latest model turn with its name (in order, when
// the same function was called twice). A result that answers no call keeps
// an id of its own, and the backend judges the history.
func pairToolResults(msgs []llm.Message) {
	var open []*llm.ToolCall // unanswered calls of the latest model turn
	for mi := range msgs {
		m := &msgs[mi]
		n := 0
		if m.Role == llm.RoleAssistant {
			open = open[:0]
			for _, p := range m.Parts {
				if p.Type == llm.PartToolCall {
					if p.ToolCall.ID == "" {
						p.ToolCall.ID = fmt.Sprintf("call_%d_%d", mi, n)
					}
					open = append(open, p.ToolCall)
					n++
				}
			}
			continue
		}
		for _, p := range m.Parts {
			tr := p.ToolResult
			if p.Type != llm.PartToolResult {
				continue
			}
			i := slices.IndexFunc(open, func(tc *llm.ToolCall) bool {
				if tr.CallID != "" {
					return tc.ID == tr.CallID
				}
				return tc.Name == tr.Name
			})
			switch {
			case i >= 0:
				tr.CallID = open[i].ID
				open = slices.Delete(open, i, i+1)
			case tr.CallID == "":
				tr.CallID = fmt.Sprintf("call_%d_%d", mi, n) // answers nothing we know of
			}
			n++
		}
	}
}

// tools decodes tools[]. Only functionDeclarations are portable: any other
// key is a built-in tool (googleSearch, codeExecution, urlContext, …) that
// runs inside Google's service, and is refused rather than dropped.
func (d decoder) tools(req *llm.Request, tools []json.RawMessage) error {
	seen := map[string]bool{}
	for i, raw := range tools {
		path := d.at("tools[%d]", i)
		var fields map[string]json.RawMessage
		if err := unmarshal(raw, &fields, path); err != nil {
			return err
		}
		keys := make([]string, 0, len(fields))
		for k, v := range fields {
			if k != "functionDeclarations" && present(v) {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			slices.Sort(keys)
			return llm.InvalidParam(path+"."+keys[0],
				"%s.%s is not supported: only functionDeclarations tools are (built-in tools run inside Google's service)", path, keys[0])
		}
		if !present(fields["functionDeclarations"]) {
			continue
		}
		var decls []functionDeclaration
		if err := unmarshal(fields["functionDeclarations"], &decls, path+".functionDeclarations."); err != nil {
			return err
		}
		for j, fd := range decls {
			fp := fmt.Sprintf("%s.functionDeclarations[%d]", path, j)
			if fd.Name == "" {
				return llm.InvalidParam(fp+".name", "%s.name is required", fp)
			}
			if seen[fd.Name] {
				return llm.InvalidParam(fp+".name", "%s.name: the function %s is declared twice", fp, quote(fd.Name))
			}
			seen[fd.Name] = true
			t := llm.Tool{Name: fd.Name, Description: fd.Description}
			var err error
			switch {
			case present(fd.Parameters) && present(fd.ParametersJSONSchema):
				return llm.InvalidParam(fp, "%s: set parameters or parametersJsonSchema, not both", fp)
			case present(fd.ParametersJSONSchema):
				t.Parameters, err = objectJSON(fd.ParametersJSONSchema, fp+".parametersJsonSchema")
			case present(fd.Parameters):
				t.Parameters, err = openAPISchema(fd.Parameters, fp+".parameters")
			}
			if err != nil {
				return err
			}
			req.Tools = append(req.Tools, t)
		}
	}
	return nil
}

// toolConfig decodes toolConfig.functionCallingConfig (docs/translation.md#tool_choice).
func (d decoder) toolConfig(req *llm.Request, tc *toolConfig) error {
	if tc == nil || tc.FunctionCallingConfig == nil {
		return nil
	}
	fc := tc.FunctionCallingConfig
	path := d.at("toolConfig.functionCallingConfig")
	for k, name := range fc.AllowedFunctionNames {
		if !slices.ContainsFunc(req.Tools, func(t llm.Tool) bool { return t.Name == name }) {
			return llm.InvalidParam(fmt.Sprintf("%s.allowedFunctionNames[%d]", path, k),
				"%s.allowedFunctionNames[%d] names %s, which no functionDeclarations entry declares", path, k, quote(name))
		}
	}
	names := fc.AllowedFunctionNames
	switch strings.ToUpper(fc.Mode) {
	case "", "MODE_UNSPECIFIED", "AUTO", "VALIDATED":
		// VALIDATED lets the model answer in text or call a function (with
		// the call checked against its schema): auto, for every backend.
		if fc.Mode != "" || len(names) > 0 {
			req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceAuto, Allowed: names}
		}
	case "ANY":
		if len(names) == 1 {
			req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: names[0]}
		} else {
			req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceRequired, Allowed: names}
		}
	case "NONE":
		req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceNone}
	default:
		return llm.InvalidParam(path+".mode", "%s.mode %s is not one of AUTO, ANY, NONE, VALIDATED", path, quote(fc.Mode))
	}
	return nil
}

// generationConfig decodes the sampling, output-format and thinking knobs.
func (d decoder) generationConfig(req *llm.Request, g *generationConfig) error {
	if g == nil {
		return nil
	}
	path := d.at("generationConfig")
	if t := g.Temperature; t != nil && (*t < 0 || *t > 2) {
		return llm.InvalidParam(path+".temperature", "%s.temperature must be between 0 and 2", path)
	}
	if p := g.TopP; p != nil && (*p < 0 || *p > 1) {
		return llm.InvalidParam(path+".topP", "%s.topP must be between 0 and 1", path)
	}
	req.Temperature, req.TopP = g.Temperature, g.TopP
	if k := g.TopK; k != nil {
		if *k < 0 || *k != math.Trunc(*k) || *k > math.MaxInt32 {
			return llm.InvalidParam(path+".topK", "%s.topK must be a non-negative integer", path)
		}
		n := int(*k)
		req.TopK = &n
	}
	if c := g.CandidateCount; c != nil {
		switch {
		case *c < 0:
			return llm.InvalidParam(path+".candidateCount", "%s.candidateCount must not be negative", path)
		case *c > 1:
			return llm.InvalidParam(path+".candidateCount", "only 1 candidate is supported: set %s.candidateCount to 1 or leave it out", path)
		}
		req.N = *c
	}
	// maxOutputTokens 0 is the API's default, as the official SDKs send
	// it: genai's GenerationConfig.MaxOutputTokens is an int32 with
	// omitempty, so 0 and absent cannot be told apart. Negative is a 400.
	if m := g.MaxOutputTokens; m != nil {
		if *m < 0 {
			return llm.InvalidParam(path+".maxOutputTokens", "%s.maxOutputTokens must not be negative", path)
		}
		req.MaxTokens = *m
	}
	req.Stop = g.StopSequences
	req.Seed = g.Seed
	req.PresencePenalty, req.FrequencyPenalty = g.PresencePenalty, g.FrequencyPenalty
	req.Logprobs = g.ResponseLogprobs
	if g.Logprobs != nil {
		if *g.Logprobs < 0 {
			return llm.InvalidParam(path+".logprobs", "%s.logprobs must not be negative", path)
		}
		req.TopLogprobs = g.Logprobs
	}
	for k, m := range g.ResponseModalities {
		if u := strings.ToUpper(m); u != "TEXT" && u != "MODALITY_UNSPECIFIED" {
			return llm.InvalidParam(fmt.Sprintf("%s.responseModalities[%d]", path, k),
				"%s.responseModalities[%d] is %s: only TEXT output is supported", path, k, quote(m))
		}
	}
	if err := d.responseFormat(req, g, path); err != nil {
		return err
	}
	return thinking(req, g.ThinkingConfig, path+".thinkingConfig")
}

// responseFormat decodes JSON mode: responseMimeType application/json, with
// a schema in responseJsonSchema (JSON Schema) or responseSchema (Gemini's
// OpenAPI subset, translated), or none for any JSON. A schema without a MIME
// type is taken as JSON mode too.
func (d decoder) responseFormat(req *llm.Request, g *generationConfig, path string) error {
	hasSchema := present(g.ResponseSchema) || present(g.ResponseJSONSchema)
	if present(g.ResponseSchema) && present(g.ResponseJSONSchema) {
		return llm.InvalidParam(path+".responseSchema", "%s.responseSchema and %s.responseJsonSchema are both set: send one", path, path)
	}
	switch mt := strings.ToLower(strings.TrimSpace(g.ResponseMIMEType)); {
	case mt == "application/json":
	case mt == "" && hasSchema:
	case mt == "" || mt == "text/plain":
		if hasSchema {
			return llm.InvalidParam(path+".responseMimeType", "%s.responseMimeType must be application/json when a response schema is set", path)
		}
		return nil
	default:
		return llm.InvalidParam(path+".responseMimeType",
			"%s.responseMimeType %s is not supported: use text/plain or application/json", path, quote(g.ResponseMIMEType))
	}
	rf := &llm.ResponseFormat{}
	var err error
	switch {
	case present(g.ResponseJSONSchema):
		rf.Schema, err = objectJSON(g.ResponseJSONSchema, path+".responseJsonSchema")
	case present(g.ResponseSchema):
		rf.Schema, err = openAPISchema(g.ResponseSchema, path+".responseSchema")
	}
	if err != nil {
		return err
	}
	req.ResponseFormat = rf
	return nil
}

// thinking decodes thinkingConfig. A budget of 0 turns thinking off, -1
// leaves it to the model; thinkingLevel is the caller's effort. A config
// that asks nothing leaves Reasoning nil.
func thinking(req *llm.Request, tc *thinkingConfig, path string) error {
	if tc == nil {
		return nil
	}
	level := strings.ToLower(tc.ThinkingLevel)
	switch level {
	case "thinking_level_unspecified":
		level = ""
	case "", "minimal", "low", "medium", "high":
	default:
		return llm.InvalidParam(path+".thinkingLevel", "%s.thinkingLevel %s is not one of MINIMAL, LOW, MEDIUM, HIGH", path, quote(tc.ThinkingLevel))
	}
	if !tc.IncludeThoughts && tc.ThinkingBudget == nil && level == "" {
		return nil
	}
	r := &llm.Reasoning{Effort: level, Enabled: true, IncludeThoughts: tc.IncludeThoughts}
	if b := tc.ThinkingBudget; b != nil {
		switch {
		case *b == 0:
			r.Enabled = false
		case *b > 0:
			r.BudgetTokens = *b
		case *b < -1:
			return llm.InvalidParam(path+".thinkingBudget", "%s.thinkingBudget must be -1 (dynamic), 0 (off) or positive", path)
		}
	}
	req.Reasoning = r
	return nil
}
