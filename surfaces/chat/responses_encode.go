package chat

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// responseObject is the Responses API's Response. Fields the SDKs declare as
// required are always present.
type responseObject struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	CompletedAt        *int64          `json:"completed_at"`
	Model              string          `json:"model"`
	Error              *responseError  `json:"error"`
	IncompleteDetails  *incomplete     `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Reasoning          reasoningConfig `json:"reasoning"`
	Store              bool            `json:"store"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Text               textConfig      `json:"text"`
	ToolChoice         string          `json:"tool_choice"`
	Tools              []toolOut       `json:"tools"`
	Truncation         string          `json:"truncation"`
	Metadata           struct{}        `json:"metadata"`
	Output             []outputItem    `json:"output"`
	// Usage is left out until it is known: the schema makes it optional,
	// but not nullable.
	Usage *responseUsage `json:"usage,omitempty"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

type reasoningConfig struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type textConfig struct {
	Format struct {
		Type   string          `json:"type"`
		Name   string          `json:"name,omitempty"`
		Schema json.RawMessage `json:"schema,omitempty"`
		Strict *bool           `json:"strict,omitempty"`
	} `json:"format"`
}

type toolOut struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// outputItem is a message, function_call or reasoning output item. Which
// fields it has depends on Type; MarshalJSON writes exactly those, with the
// arrays the SDKs index into (message content, reasoning summary) always
// present, even empty: the Node and Python stream helpers append to them.
type outputItem struct {
	Type   string
	ID     string
	Status string
	// message
	Role    string
	Content []outputPart
	// function_call and custom_tool_call
	CallID    string
	Name      string
	Namespace string
	Arguments string
	Input     string // custom_tool_call
	// reasoning
	Summary          []summaryPart
	EncryptedContent string

	// What the item's sealed id carries beyond its wire fields.
	redacted    bool   // a redacted reasoning block
	backendName string // a call's tool name as the backend knows it
}

// MarshalJSON writes the item in the shape of its type.
func (it outputItem) MarshalJSON() ([]byte, error) {
	switch it.Type {
	case "function_call":
		return json.Marshal(struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Namespace string `json:"namespace,omitempty"`
			Arguments string `json:"arguments"`
			Status    string `json:"status"`
		}{it.Type, it.ID, it.CallID, it.Name, it.Namespace, it.Arguments, it.Status})
	case "custom_tool_call":
		return json.Marshal(struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Namespace string `json:"namespace,omitempty"`
			Input     string `json:"input"`
			Status    string `json:"status"`
		}{it.Type, it.ID, it.CallID, it.Name, it.Namespace, it.Input, it.Status})
	case "reasoning":
		summary := it.Summary
		if summary == nil {
			summary = []summaryPart{}
		}
		return json.Marshal(struct {
			Type             string        `json:"type"`
			ID               string        `json:"id"`
			Summary          []summaryPart `json:"summary"`
			EncryptedContent string        `json:"encrypted_content,omitempty"`
			Status           string        `json:"status,omitempty"`
		}{it.Type, it.ID, summary, it.EncryptedContent, it.Status})
	default: // message
		content := it.Content
		if content == nil {
			content = []outputPart{}
		}
		return json.Marshal(struct {
			Type    string       `json:"type"`
			ID      string       `json:"id"`
			Status  string       `json:"status"`
			Role    string       `json:"role"`
			Content []outputPart `json:"content"`
		}{it.Type, it.ID, it.Status, it.Role, content})
	}
}

type outputPart struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
}

type summaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func responseUsageOf(u llm.Usage) *responseUsage {
	out := &responseUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens()}
	out.InputTokensDetails.CachedTokens = u.CachedInputTokens
	out.InputTokensDetails.CacheWriteTokens = u.CacheCreationTokens
	out.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	return out
}

// newResponseObject fills the parts of a Response that come from the request.
func newResponseObject(req *llm.Request, id string, created time.Time) *responseObject {
	ro := &responseObject{
		ID: id, Object: "response", CreatedAt: created.Unix(), Status: "in_progress", Model: req.Model,
		ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		Temperature:       req.Temperature, TopP: req.TopP, Truncation: "disabled",
		ToolChoice: "auto", Tools: []toolOut{}, Output: []outputItem{},
	}
	if req.MaxTokens > 0 {
		mt := req.MaxTokens
		ro.MaxOutputTokens = &mt
	}
	if len(req.System) > 0 && req.System[0].Type == llm.PartText {
		s := req.System[0].Text
		ro.Instructions = &s
	}
	switch req.ToolChoice.Mode {
	case llm.ToolChoiceNone:
		ro.ToolChoice = "none"
	case llm.ToolChoiceRequired:
		ro.ToolChoice = "required"
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if params == nil {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		ro.Tools = append(ro.Tools, toolOut{Type: "function", Name: t.Name, Description: t.Description, Parameters: params, Strict: t.Strict})
	}
	ro.Text.Format.Type = "text"
	if rf := req.ResponseFormat; rf != nil {
		if rf.Schema == nil {
			ro.Text.Format.Type = "json_object"
		} else {
			strict := rf.Strict
			ro.Text.Format.Type, ro.Text.Format.Name, ro.Text.Format.Schema, ro.Text.Format.Strict = "json_schema", rf.Name, rf.Schema, &strict
		}
	}
	if r := req.Reasoning; r != nil && r.Effort != "" {
		e := r.Effort
		ro.Reasoning.Effort = &e
	}
	return ro
}

// finish sets the terminal status from the finish reason and usage.
func (ro *responseObject) finish(f llm.FinishReason, u llm.Usage, at time.Time) {
	ro.Usage = responseUsageOf(u)
	switch f {
	case llm.FinishLength:
		ro.Status, ro.IncompleteDetails = "incomplete", &incomplete{Reason: "max_output_tokens"}
	case llm.FinishContentFilter:
		ro.Status, ro.IncompleteDetails = "incomplete", &incomplete{Reason: "content_filter"}
	default:
		ro.Status = "completed"
		t := at.Unix()
		ro.CompletedAt = &t
	}
}

// itemStatus is the status of finished items under a response status.
func itemStatus(responseStatus string) string {
	if responseStatus == "incomplete" {
		return "incomplete"
	}
	return "completed"
}

// outputItems converts reply content into output items. Reasoning
// signatures travel in encrypted_content, the slot clients replay with
// store:false.
func outputItems(id string, content []llm.Part, status string, shapes toolShapes) []outputItem {
	var items []outputItem
	var msg *outputItem
	for i, p := range content {
		switch p.Type {
		case llm.PartReasoning:
			msg = nil
			it := outputItem{Type: "reasoning", ID: fmt.Sprintf("rs_%s_%d", id, i), Status: status, Summary: []summaryPart{}, EncryptedContent: p.Signature, redacted: p.Redacted}
			if p.Text != "" {
				it.Summary = append(it.Summary, summaryPart{Type: "summary_text", Text: p.Text})
			}
			items = append(items, it)
		case llm.PartText:
			if msg == nil {
				items = append(items, outputItem{Type: "message", ID: fmt.Sprintf("msg_%s_%d", id, i), Status: status, Role: "assistant"})
				msg = &items[len(items)-1]
			}
			msg.Content = append(msg.Content, outputPart{Type: "output_text", Text: p.Text, Annotations: []struct{}{}, Logprobs: []struct{}{}})
		case llm.PartToolCall:
			msg = nil
			typ, name, ns := shapes.call(p.ToolCall.Name)
			it := outputItem{Type: typ, ID: fmt.Sprintf("fc_%s_%d", id, i), Status: status,
				CallID: p.ToolCall.ID, Name: name, Namespace: ns, backendName: p.ToolCall.Name}
			if typ == "custom_tool_call" {
				it.Input = freeformInput(p.ToolCall.Arguments)
			} else {
				it.Arguments = string(p.ToolCall.Arguments)
			}
			items = append(items, it)
		}
	}
	if items == nil {
		items = []outputItem{}
	}
	return items
}

// itemSuffix shortens a response id for the ids of its items.
func itemSuffix(id string) string {
	if len(id) > 5 && id[:5] == "resp_" {
		return id[5:]
	}
	return id
}

// WriteResponse encodes a complete Response, each item's id carrying the
// item (responses_seal.go).
func (c ResponsesCodec) WriteResponse(w http.ResponseWriter, req *llm.Request, resp *llm.Response) error {
	ro := newResponseObject(req, resp.ID, resp.Created)
	ro.finish(resp.FinishReason, resp.Usage, resp.Created)
	ro.Output = outputItems(itemSuffix(resp.ID), resp.Content, itemStatus(ro.Status), shapesOf(req))
	if c.Sealer != nil {
		for i := range ro.Output {
			ro.Output[i].ID = sealID(c.Sealer, ro.Output[i].Type, sealedOf(ro.Output[i]))
		}
	}
	return surface.WriteJSON(w, http.StatusOK, ro)
}

// ResponsesStream encodes one streamed Response: lifecycle events, items
// opened and closed strictly in order, one sequence_number counter, and
// exactly one terminal event.
type ResponsesStream struct {
	ro     *responseObject
	suffix string
	shapes toolShapes
	// deferred is set while the open item's events wait for its close.
	deferred bool
	seq      int
	// content accumulates the reply for the terminal event's output.
	content []llm.Part
	// open is the kind of the item being streamed ("" when none); item is
	// its output_index.
	open string
	item int
	// text is the open item's text (or arguments) so far. Its part in
	// content gets it when the items are next built (items), not with
	// each delta: copying the whole text so far into a string at every
	// delta made a reply of n deltas cost n² bytes (1.65 GB for 10,000).
	text []byte
	// itemID is the open item's id, which its deltas carry; out is a
	// delta's frame (deltaFrame).
	itemID string
	out    []byte
	// now stamps completed_at; tests replace it.
	now func() time.Time
}

// NewStream returns the encoder of one streamed Response.
func (c ResponsesCodec) NewStream(req *llm.Request, id string, created time.Time) surface.Stream {
	return c.newStream(req, id, created)
}

func (c ResponsesCodec) newStream(req *llm.Request, id string, created time.Time) *ResponsesStream {
	return &ResponsesStream{ro: newResponseObject(req, id, created), suffix: itemSuffix(id), shapes: shapesOf(req), now: time.Now}
}

// items is the output so far.
func (s *ResponsesStream) items(status string) []outputItem {
	if s.open == "message" || s.open == "reasoning" {
		s.content[len(s.content)-1].Text = string(s.text)
	}
	return outputItems(s.suffix, s.content, status, s.shapes)
}

// Items are the stream's output items, for the server to keep under their
// plain ids (responses_seal.go): what a later item_reference rebuilds each
// from. The server asks at the finish event, when every item is complete.
func (s *ResponsesStream) Items() []surface.Item {
	items := s.items("completed")
	kept := make([]surface.Item, 0, len(items))
	for _, it := range items {
		data, err := json.Marshal(sealedOf(it))
		if err != nil {
			continue // strings and a bool: cannot fail
		}
		kept = append(kept, surface.Item{ID: it.ID, Data: data})
	}
	return kept
}

func (s *ResponsesStream) emit(w io.Writer, typ string, fields map[string]any) error {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(b)+len(typ)+16)
	buf = append(buf, "event: "...)
	buf = append(buf, typ...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	_, err = w.Write(buf)
	return err
}

// Start writes response.created and response.in_progress.
func (s *ResponsesStream) Start(w io.Writer) error {
	if err := s.emit(w, "response.created", map[string]any{"response": s.ro}); err != nil {
		return err
	}
	return s.emit(w, "response.in_progress", map[string]any{"response": s.ro})
}

// currentItem is the output item being streamed, built from content so far.
func (s *ResponsesStream) currentItem(status string) outputItem {
	items := s.items(status)
	return items[len(items)-1]
}

// openItem closes whatever item is open and opens one of kind, appending
// part to the accumulated content.
func (s *ResponsesStream) openItem(w io.Writer, kind string, part llm.Part) error {
	if err := s.closeItem(w); err != nil {
		return err
	}
	s.content = append(s.content, part)
	s.open, s.text = kind, s.text[:0]
	s.item = len(outputItems(s.suffix, s.content, "completed", s.shapes)) - 1
	// A custom tool call's input is the "input" member of the arguments
	// the backend streams as JSON: it goes out whole once complete
	// (closeItem).
	s.deferred = kind == "custom_tool_call"
	if s.deferred {
		return nil
	}
	it := s.currentItem("in_progress")
	s.itemID = it.ID
	return s.opening(w, it)
}

// opening writes the events that open item it.
func (s *ResponsesStream) opening(w io.Writer, it outputItem) error {
	kind := it.Type
	if kind == "message" {
		it.Content = []outputPart{}
	}
	if err := s.emit(w, "response.output_item.added", map[string]any{"output_index": s.item, "item": it}); err != nil {
		return err
	}
	switch kind {
	case "message":
		return s.emit(w, "response.content_part.added", map[string]any{"item_id": it.ID, "output_index": s.item, "content_index": 0,
			"part": outputPart{Type: "output_text", Annotations: []struct{}{}, Logprobs: []struct{}{}}})
	case "reasoning":
		return s.emit(w, "response.reasoning_summary_part.added", map[string]any{"item_id": it.ID, "output_index": s.item, "summary_index": 0,
			"part": summaryPart{Type: "summary_text"}})
	}
	return nil
}

// delta writes the event of one delta of an item of type typ: the frame
// emit would write for it, written here (FuzzResponsesDelta checks it byte
// for byte), as a reply has one for every few characters.
func (s *ResponsesStream) delta(w io.Writer, typ, id, text string) error {
	// The event's members in encoding/json's (sorted) order: what comes
	// before "delta", between "item_id" and "output_index", and after
	// "sequence_number".
	event, head, mid, tail := "response.function_call_arguments.delta", "", "", ""
	switch typ {
	case "message":
		event, head, mid = "response.output_text.delta", `"content_index":0,`, `,"logprobs":[]`
	case "reasoning":
		event, tail = "response.reasoning_summary_text.delta", `,"summary_index":0`
	}
	b := append(s.out[:0], "event: "...)
	b = append(b, event...)
	b = append(b, "\ndata: {"...)
	b = append(b, head...)
	b = append(b, `"delta":`...)
	b = surface.AppendString(b, text, true) // json.Marshal escapes HTML
	b = append(b, `,"item_id":`...)
	b = surface.AppendString(b, id, true)
	b = append(b, mid...)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(s.item), 10)
	b = append(b, `,"sequence_number":`...)
	b = strconv.AppendInt(b, int64(s.seq), 10)
	s.seq++
	b = append(b, tail...)
	b = append(b, `,"type":"`...)
	b = append(b, event...)
	s.out = append(b, "\"}\n\n"...)
	_, err := w.Write(s.out)
	return err
}

// closeItem ends the open item with its .done events (a deferred custom
// tool call is opened and sent whole first).
func (s *ResponsesStream) closeItem(w io.Writer) error {
	if s.open == "" {
		return nil
	}
	it := s.currentItem("completed")
	text := string(s.text)
	base := map[string]any{"item_id": it.ID, "output_index": s.item}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	var err error
	switch s.open {
	case "message":
		part := outputPart{Type: "output_text", Text: text, Annotations: []struct{}{}, Logprobs: []struct{}{}}
		if err = s.emit(w, "response.output_text.done", with("content_index", 0, "text", text, "logprobs", []struct{}{})); err == nil {
			err = s.emit(w, "response.content_part.done", with("content_index", 0, "part", part))
		}
	case "reasoning":
		if err = s.emit(w, "response.reasoning_summary_text.done", with("summary_index", 0, "text", text)); err == nil {
			err = s.emit(w, "response.reasoning_summary_part.done", with("summary_index", 0, "part", summaryPart{Type: "summary_text", Text: text}))
		}
	case "function_call":
		err = s.emit(w, "response.function_call_arguments.done", with("name", it.Name, "arguments", text))
	case "custom_tool_call":
		added := it
		added.Status, added.Input = "in_progress", ""
		if err = s.emit(w, "response.output_item.added", map[string]any{"output_index": s.item, "item": added}); err != nil {
			return err
		}
		if it.Input != "" {
			if err = s.emit(w, "response.custom_tool_call_input.delta", with("delta", it.Input)); err != nil {
				return err
			}
		}
		err = s.emit(w, "response.custom_tool_call_input.done", with("input", it.Input))
	}
	if err != nil {
		return err
	}
	s.open = ""
	return s.emit(w, "response.output_item.done", map[string]any{"output_index": s.item, "item": it})
}

// Event writes the frames of one event.
func (s *ResponsesStream) Event(w io.Writer, ev llm.Event) error {
	switch ev.Type {
	case llm.EventReasoningDelta:
		return s.reasoning(w, &ev)
	case llm.EventTextDelta:
		if ev.Text == "" {
			return nil
		}
		if s.open != "message" {
			if err := s.openItem(w, "message", llm.Part{Type: llm.PartText}); err != nil {
				return err
			}
		}
		s.text = append(s.text, ev.Text...)
		if s.deferred {
			return nil
		}
		return s.delta(w, "message", s.itemID, ev.Text)
	case llm.EventToolCallStart:
		return s.toolCallStart(w, &ev)
	case llm.EventToolCallDelta:
		if (s.open != "function_call" && s.open != "custom_tool_call") || ev.Text == "" {
			return nil
		}
		last := s.content[len(s.content)-1].ToolCall
		last.Arguments = append(last.Arguments, ev.Text...)
		s.text = append(s.text, ev.Text...)
		if s.deferred {
			return nil
		}
		return s.delta(w, s.open, s.itemID, ev.Text)
	case llm.EventFinish:
		return s.finish(w, &ev)
	}
	return nil
}

// reasoning writes a reasoning delta (one of Event's cases, as
// toolCallStart and finish are).
func (s *ResponsesStream) reasoning(w io.Writer, ev *llm.Event) error {
	if s.open != "reasoning" {
		if err := s.openItem(w, "reasoning", llm.Part{Type: llm.PartReasoning}); err != nil {
			return err
		}
	}
	last := &s.content[len(s.content)-1]
	if ev.Signature != "" {
		last.Signature = ev.Signature
	}
	if ev.Text == "" {
		return nil
	}
	s.text = append(s.text, ev.Text...)
	if s.deferred {
		return nil
	}
	return s.delta(w, "reasoning", s.itemID, ev.Text)
}

// toolCallStart opens a tool call's item.
func (s *ResponsesStream) toolCallStart(w io.Writer, ev *llm.Event) error {
	tc := *ev.ToolCall
	tc.Arguments = nil
	kind, _, _ := s.shapes.call(tc.Name)
	return s.openItem(w, kind, llm.Part{Type: llm.PartToolCall, ToolCall: &tc})
}

// finish writes the response's end.
func (s *ResponsesStream) finish(w io.Writer, ev *llm.Event) error {
	if err := s.closeItem(w); err != nil {
		return err
	}
	var u llm.Usage
	if ev.Usage != nil {
		u = *ev.Usage
	}
	s.ro.finish(ev.FinishReason, u, s.now())
	s.ro.Output = s.items(itemStatus(s.ro.Status))
	typ := "response.completed"
	if s.ro.Status == "incomplete" {
		typ = "response.incomplete"
	}
	return s.emit(w, typ, map[string]any{"response": s.ro})
}

// responseErrorCode is a failed Response's error.code, which the schema
// limits to a closed list (ResponseErrorCode): the chat-completions codes
// of the error event are not on it.
func responseErrorCode(k llm.Kind) string {
	switch k {
	case llm.KindRateLimited:
		return "rate_limit_exceeded"
	case llm.KindInvalidRequest:
		return "invalid_prompt"
	}
	return "server_error"
}

// Error writes an error event carrying both the flat (documented) and the
// nested (what OpenAI sends, what makes every SDK raise) shapes, then
// response.failed as the terminal event.
func (s *ResponsesStream) Error(w io.Writer, e *llm.Error) error {
	p := errorPayload(e)
	if err := s.emit(w, "error", map[string]any{"code": p.Code, "message": p.Message, "param": p.Param, "error": p}); err != nil {
		return err
	}
	s.ro.Status = "failed"
	s.ro.Error = &responseError{Code: responseErrorCode(e.Kind), Message: e.Message}
	s.ro.Output = s.items("incomplete")
	return s.emit(w, "response.failed", map[string]any{"response": s.ro})
}
