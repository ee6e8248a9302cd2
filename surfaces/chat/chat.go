// Package chat is the OpenAI wire format: chat-completions
// (POST /v1/chat/completions), the Responses API served statelessly
// (POST /v1/responses), and the chat-completions models list. It decodes
// native requests into llm.Request, encodes llm.Response and llm.Event back
// into native bodies and SSE frames, and owns the OpenAI error envelope.
//
// chat imports only llm and surface (and the standard library); it never
// imports server, upstream or another surface. Wire details:
// docs/wire/chat-completions.md.
package chat

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// Codec is the chat-completions endpoint. It is also the server's default
// surface: its envelope answers what no surface claims (the account
// endpoints, unknown paths), and its models list is the /v1/models of
// clients that say nothing else.
type Codec struct{}

// Surface names the wire format.
func (Codec) Surface() llm.Surface { return llm.SurfaceChat }

// Routes lists POST /v1/chat/completions.
func (Codec) Routes() []surface.Route {
	return []surface.Route{
		{Method: http.MethodPost, Path: "/v1/chat/completions", Endpoint: surface.Generate},
		{Method: http.MethodPost, Path: "/v1/embeddings", Endpoint: surface.Embed},
	}
}

// Fields names the bounded fields: system prompts are messages here too.
func (Codec) Fields() surface.Fields {
	return surface.Fields{Messages: "messages", System: "messages", Tools: "tools",
		Schema: "response_format.json_schema.schema", Turn: "messages"}
}

// NewID returns a gateway-issued completion id, chatcmpl-<24 base62> (see
// llm.NewID).
func (Codec) NewID() string { return llm.NewID("chatcmpl-", 24) }

// WriteError writes err in the OpenAI envelope.
func (Codec) WriteError(w http.ResponseWriter, err error) { WriteError(w, err) }

// finishReason maps a canonical finish reason to chat-completions'.
func finishReason(f llm.FinishReason) string {
	switch f {
	case llm.FinishLength:
		return "length"
	case llm.FinishToolCalls:
		return "tool_calls"
	case llm.FinishContentFilter:
		return "content_filter"
	default: // stop, stop_sequence (OpenAI does not say which stop matched)
		return "stop"
	}
}

type usageJSON struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func usageOf(u llm.Usage) *usageJSON {
	out := &usageJSON{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens()}
	out.PromptTokensDetails.CachedTokens = u.CachedInputTokens
	out.PromptTokensDetails.CacheWriteTokens = u.CacheCreationTokens
	out.CompletionTokensDetails.ReasoningTokens = u.ReasoningTokens
	return out
}

type toolCallJSON struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string  `json:"name,omitempty"`
		Arguments *string `json:"arguments,omitempty"`
	} `json:"function"`
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usageJSON         `json:"usage"`
}

type completionChoice struct {
	Index   int `json:"index"`
	Message struct {
		Role        string         `json:"role"`
		Content     *string        `json:"content"`
		Reasoning   *string        `json:"reasoning"`
		Refusal     *string        `json:"refusal"`
		ToolCalls   []toolCallJSON `json:"tool_calls,omitempty"`
		Annotations []struct{}     `json:"annotations"`
	} `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

// WriteResponse encodes a complete chat completion. message.reasoning is a
// string or null; reasoning_content never appears.
func (Codec) WriteResponse(w http.ResponseWriter, _ *llm.Request, resp *llm.Response) error {
	r := new(completionReply) // what the reply points into, in one allocation
	ch := &r.choice[0]
	ch.FinishReason = finishReason(resp.FinishReason)
	ch.Message.Role = "assistant"
	ch.Message.Annotations = []struct{}{}
	var hasText, hasReasoning bool
	for _, p := range resp.Content {
		switch p.Type {
		case llm.PartText:
			r.text += p.Text
			hasText = true
		case llm.PartReasoning:
			r.reasoning += p.Text
			hasReasoning = hasReasoning || p.Text != ""
		case llm.PartToolCall:
			args := string(p.ToolCall.Arguments)
			tc := toolCallJSON{ID: p.ToolCall.ID, Type: "function"}
			tc.Function.Name = p.ToolCall.Name
			tc.Function.Arguments = &args
			ch.Message.ToolCalls = append(ch.Message.ToolCalls, tc)
		}
	}
	if hasText || len(ch.Message.ToolCalls) == 0 {
		ch.Message.Content = &r.text
	}
	if hasReasoning {
		ch.Message.Reasoning = &r.reasoning
	}
	r.completion = completion{
		ID:      resp.ID,
		Object:  "chat.completion",
		Created: resp.Created.Unix(),
		Model:   resp.Model,
		Choices: r.choice[:],
		Usage:   &r.usage,
	}
	r.usage = *usageOf(resp.Usage)
	return surface.WriteJSON(w, http.StatusOK, &r.completion)
}

// completionReply is a completion and what it points to.
type completionReply struct {
	completion      completion
	choice          [1]completionChoice
	usage           usageJSON
	text, reasoning string
}

// Stream encodes one streamed chat completion as `data:` frames. It
// reuses one chunk value and one buffer for all of them, so a text delta
// costs no allocation once the first frames have sized the buffer.
//
// A content or reasoning delta, most of a stream's frames, differs from
// the one before only in its text: its frame is built once around an
// empty text (textFrame), and each delta writes that prefix, its text as a
// JSON string (surface.AppendString) and the suffix, the same bytes as
// encoding the chunk at a fraction of the cost. The role, finish and usage
// chunks are built by hand too; encoding/json writes only tool-call
// deltas.
type Stream struct {
	id, model    string
	created      int64
	includeUsage bool

	buf    bytes.Buffer
	enc    *json.Encoder // writes to buf
	chunk  chunk
	choice [1]chunkChoice
	finish string

	tmpl [2]textFrame // content, reasoning: built on first use
	out  []byte       // a frame built by hand
}

// textFrame is a text delta's frame around its text.
type textFrame struct{ prefix, suffix []byte }

// NewStream returns the encoder of one streamed completion.
func (Codec) NewStream(req *llm.Request, id string, created time.Time) surface.Stream {
	return &Stream{id: id, model: req.Model, created: created.Unix(), includeUsage: req.IncludeUsage}
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when the caller asked for
	// usage, and absent otherwise.
	Usage *usageJSON `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	Reasoning *string        `json:"reasoning,omitempty"`
	ToolCalls []toolCallJSON `json:"tool_calls,omitempty"`
}

func (s *Stream) frame(w io.Writer, choices []chunkChoice, usage *usageJSON) error {
	if err := s.encode(choices, usage); err != nil {
		return err
	}
	_, err := w.Write(s.buf.Bytes())
	return err
}

// encode puts a chunk's whole frame in buf.
func (s *Stream) encode(choices []chunkChoice, usage *usageJSON) error {
	s.chunk = chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Choices: choices, Usage: usage}
	if s.enc == nil {
		s.enc = json.NewEncoder(&s.buf)
	}
	s.buf.Reset()
	s.buf.WriteString("data: ")
	if err := s.enc.Encode(&s.chunk); err != nil { // the JSON and "\n"
		return err
	}
	if s.includeUsage && usage == nil {
		// "usage": null on every chunk before the usage chunk, as OpenAI does.
		s.buf.Truncate(s.buf.Len() - len("}\n"))
		s.buf.WriteString(`,"usage":null}` + "\n")
	}
	s.buf.WriteByte('\n')
	return nil
}

func (s *Stream) delta(w io.Writer, d chunkDelta) error {
	s.choice[0] = chunkChoice{Delta: d}
	return s.frame(w, s.choice[:], nil)
}

// textDelta writes a content delta, or a reasoning one, from the frame
// template of its kind: the frame delta writes, without encoding it.
func (s *Stream) textDelta(w io.Writer, reasoning bool, text string) error {
	t, err := s.textTemplate(reasoning)
	if err != nil {
		return err
	}
	s.out = append(s.out[:0], t.prefix...)
	s.out = surface.AppendString(s.out, text, true) // json.Encoder escapes HTML
	s.out = append(s.out, t.suffix...)
	_, err = w.Write(s.out)
	return err
}

// textTemplate is the frame template of a content delta, or of a
// reasoning one, made at its first use.
func (s *Stream) textTemplate(reasoning bool) (*textFrame, error) {
	t := &s.tmpl[0]
	if reasoning {
		t = &s.tmpl[1]
	}
	if t.prefix == nil {
		if err := s.template(t, reasoning); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// template makes a text delta's frame template: the bytes encode writes
// for the chunk, built by hand around an empty text (FuzzTextFrame checks
// them against encode's).
func (s *Stream) template(t *textFrame, reasoning bool) error {
	key := `{"index":0,"delta":{"content":`
	if reasoning {
		key = `{"index":0,"delta":{"reasoning":`
	}
	t.prefix = append(s.appendHead(make([]byte, 0, 128+len(s.id)+len(s.model))), key...)
	t.suffix = textSuffix
	if s.includeUsage {
		t.suffix = textSuffixUsage // "usage": null on every chunk before the usage chunk, as OpenAI does
	}
	return nil
}

// The end of a text delta's frame after its text, without and with
// include_usage; shared, as a template's suffix is only read.
var (
	textSuffix      = []byte(`},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	textSuffixUsage = []byte(`},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
)

// appendHead appends a chunk's frame up to its choices: `data: `, then the
// chunk's id, object, created and model as encode writes them (strings
// escaped as json.Encoder does, HTML included), and `"choices":[`.
func (s *Stream) appendHead(b []byte) []byte {
	b = append(b, `data: {"id":`...)
	b = surface.AppendString(b, s.id, true)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, s.created, 10)
	b = append(b, `,"model":`...)
	b = surface.AppendString(b, s.model, true)
	return append(b, `,"choices":[`...)
}

// usageFrame writes the last chunk, which has no choices and the call's
// usage, as encode would (FuzzUsageFrame checks it).
func (s *Stream) usageFrame(w io.Writer, u *usageJSON) error {
	b := append(s.appendHead(s.out[:0]), `],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokensDetails.CachedTokens), 10)
	b = append(b, `,"cache_write_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokensDetails.CacheWriteTokens), 10)
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokensDetails.ReasoningTokens), 10)
	b = append(b, "}}}\n\n"...)
	s.out = b
	_, err := w.Write(b)
	return err
}

// Start writes the first chunk, which carries the assistant role and no
// content, so reasoning can still come before the first content delta.
//
// It is the content delta's frame with {"role":"assistant"} for its delta:
// the chunk's other fields are the same, so it is cut from that frame's
// template (which the first content delta uses next) rather than encoded.
func (s *Stream) Start(w io.Writer) error {
	t, err := s.textTemplate(false)
	if err != nil {
		return err
	}
	// The template is `…{"content":` and `}…` around the text.
	s.out = append(s.out[:0], t.prefix[:len(t.prefix)-len(`{"content":`)]...)
	s.out = append(s.out, `{"role":"assistant"}`...)
	s.out = append(s.out, t.suffix[len(`}`):]...)
	_, err = w.Write(s.out)
	return err
}

// finishFrame writes the chunk of the finish reason. It is the content
// delta's frame with an empty delta and the reason for the choice's
// finish_reason (the first one after the delta: the id and model come
// before it), cut from that frame's template rather than encoded.
func (s *Stream) finishFrame(w io.Writer) error {
	t, err := s.textTemplate(false)
	if err != nil {
		return err
	}
	const null = `"finish_reason":null`
	rest := t.suffix[len(`}`):]
	i := bytes.Index(rest, []byte(null))
	s.out = append(s.out[:0], t.prefix[:len(t.prefix)-len(`{"content":`)]...)
	s.out = append(s.out, `{}`...)
	s.out = append(s.out, rest[:i+len(null)-len(`null`)]...)
	s.out = surface.AppendString(s.out, s.finish, true) // json.Encoder escapes HTML
	s.out = append(s.out, rest[i+len(null):]...)
	_, err = w.Write(s.out)
	return err
}

// Event writes one event as a chunk. Tool calls follow the SDK accumulator's
// rules: the first delta of an index carries id, type, name and empty
// arguments; later ones only argument fragments.
func (s *Stream) Event(w io.Writer, ev llm.Event) error {
	switch ev.Type {
	case llm.EventReasoningDelta:
		if ev.Text == "" {
			return nil // a signature only: chat-completions has no slot for it
		}
		return s.textDelta(w, true, ev.Text)
	case llm.EventTextDelta:
		if ev.Text == "" {
			return nil
		}
		return s.textDelta(w, false, ev.Text)
	case llm.EventToolCallStart:
		idx, empty := ev.Index, ""
		tc := toolCallJSON{Index: &idx, ID: ev.ToolCall.ID, Type: "function"}
		tc.Function.Name = ev.ToolCall.Name
		tc.Function.Arguments = &empty
		return s.delta(w, chunkDelta{ToolCalls: []toolCallJSON{tc}})
	case llm.EventToolCallDelta:
		if ev.Text == "" {
			return nil
		}
		idx, args := ev.Index, ev.Text
		tc := toolCallJSON{Index: &idx}
		tc.Function.Arguments = &args
		return s.delta(w, chunkDelta{ToolCalls: []toolCallJSON{tc}})
	case llm.EventFinish:
		s.finish = finishReason(ev.FinishReason)
		if err := s.finishFrame(w); err != nil {
			return err
		}
		if s.includeUsage && ev.Usage != nil {
			if err := s.usageFrame(w, usageOf(*ev.Usage)); err != nil {
				return err
			}
		}
		_, err := io.WriteString(w, "data: [DONE]\n\n")
		return err
	}
	return nil
}

// Error writes the in-stream error frame; no [DONE] follows it.
func (s *Stream) Error(w io.Writer, e *llm.Error) error {
	b, err := json.Marshal(errorBody{Error: errorPayload(e)})
	if err != nil {
		return err
	}
	_, err = w.Write(append(append([]byte("data: "), b...), "\n\n"...))
	return err
}
