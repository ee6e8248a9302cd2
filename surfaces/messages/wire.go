package messages

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// The request's wire types. A body decodes into them in one pass
// (surface.Decode); decode.go then checks them in the order the vendor's
// validator does, naming each failure's field the way its errors do
// ("messages.0.content.1.source"). JSON null counts as absent everywhere,
// as the vendor's validator treats it: optional members are pointers, and
// arrays of objects hold pointers so that a null element is refused.

// request is a messages (or count_tokens) request body.
type request struct {
	Model *string `json:"model"`
	// MaxTokens and Stream are decoded by decodeRequest: count_tokens
	// takes any value, or none.
	MaxTokens     jsontext.Value `json:"max_tokens"`
	Messages      []*inMessage   `json:"messages"`
	System        content        `json:"system"`
	Tools         []*tool        `json:"tools"`
	ToolChoice    *toolChoice    `json:"tool_choice"`
	OutputFormat  *outputFormat  `json:"output_format"`
	OutputConfig  *outputConfig  `json:"output_config"`
	Thinking      *thinking      `json:"thinking"`
	Temperature   *float64       `json:"temperature"`
	TopP          *float64       `json:"top_p"`
	TopK          *integer       `json:"top_k"`
	StopSequences []*string      `json:"stop_sequences"`
	Metadata      *struct {
		UserID *string `json:"user_id"`
	} `json:"metadata"`
	Stream       jsontext.Value `json:"stream"`
	CacheControl *cacheControl  `json:"cache_control"`
}

// inMessage is one entry of messages. ClearAt and OutputConfig are a system
// message's (turns.go).
type inMessage struct {
	Role         *string       `json:"role"`
	Content      content       `json:"content"`
	ClearAt      *string       `json:"clear_at"`
	OutputConfig *outputConfig `json:"output_config"`
}

// inBlock is a content block of any type; which members matter depends on
// Type (decodeBlock).
type inBlock struct {
	Type         *string        `json:"type"`
	Text         *string        `json:"text"`
	Source       *source        `json:"source"`
	Title        *string        `json:"title"`
	Context      *string        `json:"context"`
	ID           *string        `json:"id"`
	Name         *string        `json:"name"`
	Input        jsontext.Value `json:"input"`
	ToolUseID    *string        `json:"tool_use_id"`
	IsError      *bool          `json:"is_error"`
	Content      content        `json:"content"` // a tool_result's
	Thinking     *string        `json:"thinking"`
	Signature    *string        `json:"signature"`
	Data         *string        `json:"data"` // a redacted_thinking block's
	Tool         *toolRef       `json:"tool"` // a tool_addition or tool_removal block's
	CacheControl *cacheControl  `json:"cache_control"`
}

// source is an image's or document's source.
type source struct {
	Type      *string `json:"type"`
	MediaType *string `json:"media_type"`
	Data      *string `json:"data"`
	URL       *string `json:"url"`
}

type tool struct {
	Type         *string        `json:"type"`
	Name         *string        `json:"name"`
	Description  *string        `json:"description"`
	InputSchema  jsontext.Value `json:"input_schema"`
	Strict       *bool          `json:"strict"`
	CacheControl *cacheControl  `json:"cache_control"`
}

// toolRef is the tool of a tool_addition or tool_removal block: a
// tool_reference (Name) or a tool_definition (Definition).
type toolRef struct {
	Type       *string `json:"type"`
	Name       *string `json:"name"`
	Definition *tool   `json:"definition"`
}

type toolChoice struct {
	Type                   *string `json:"type"`
	Name                   *string `json:"name"`
	DisableParallelToolUse *bool   `json:"disable_parallel_tool_use"`
}

type outputConfig struct {
	Effort *string       `json:"effort"`
	Format *outputFormat `json:"format"`
}

type outputFormat struct {
	Type   *string        `json:"type"`
	Schema jsontext.Value `json:"schema"`
}

type thinking struct {
	Type         *string  `json:"type"`
	BudgetTokens *integer `json:"budget_tokens"`
	Display      *string  `json:"display"`
}

type cacheControl struct {
	Type *string `json:"type"`
	TTL  *string `json:"ttl"`
}

// content is the `string | []block` union of a message's content, a
// tool_result's and the system prompt. A value of another kind is kept
// (other) for decode.go to refuse in its turn, as the vendor checks the
// members in order.
type content struct {
	sent   bool // present and not null
	other  bool // neither a string nor an array
	text   *string
	blocks []*inBlock
}

func (c *content) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*c = content{} // a repeated member's last value wins
	switch dec.PeekKind() {
	case 'n':
		return dec.SkipValue()
	case '"':
		c.sent = true
		return jsonv2.UnmarshalDecode(dec, &c.text)
	case '[':
		c.sent = true
		c.blocks = []*inBlock{}
		return jsonv2.UnmarshalDecode(dec, &c.blocks)
	}
	c.sent, c.other = true, true
	return dec.SkipValue()
}

// integer is a JSON number with no fractional part (1024 or 1024.0, as
// the vendor's validator takes it) that fits an int32.
type integer int

var (
	errNotInteger = errors.New("not an integer")
	errIntRange   = errors.New("integer out of range")
)

func (n *integer) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '0' {
		return surface.WrongKind(dec, "an integer")
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	i, err := parseInteger(v)
	*n = integer(i)
	return err
}

func parseInteger(v []byte) (int, error) {
	s := string(v)
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		return int(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) {
		return 0, errNotInteger
	}
	if f > math.MaxInt32 || f < math.MinInt32 {
		return 0, errIntRange
	}
	return int(f), nil
}

// decodeError words a body's decoding failure as the vendor's validator
// does: the field's path, and what it should have been.
func decodeError(err error) error {
	var de *surface.DecodeError
	if !errors.As(err, &de) || de.Syntax != nil {
		return &llm.Error{Kind: llm.KindInvalidRequest, Message: "The request body is not valid JSON.", Err: err}
	}
	if len(de.Path) == 0 {
		return &llm.Error{Kind: llm.KindInvalidRequest, Message: "The request body must be a JSON object.", Err: err}
	}
	param := strings.Join(de.Path, ".")
	var e *llm.Error
	switch {
	case errors.Is(de.Err, errIntRange):
		e = llm.InvalidParam(param, "Input should be an integer of at most %d", math.MaxInt32)
	case errors.Is(de.Err, errNotInteger):
		e = llm.InvalidParam(param, "Input should be an integer")
	default:
		e = llm.InvalidParam(param, "Input should be %s", de.Wanted())
	}
	e.Err = err
	return e
}

// rawKind is the kind of a raw value: 0 when it is absent or null.
func rawKind(v jsontext.Value) jsontext.Kind {
	if k := v.Kind(); k != 'n' {
		return k
	}
	return 0
}

// decodeInt decodes a raw integer member (see integer).
func decodeInt(v jsontext.Value, param string) (int, error) {
	if rawKind(v) != '0' {
		return 0, llm.InvalidParam(param, "Input should be an integer")
	}
	n, err := parseInteger(bytes.TrimSpace(v))
	switch {
	case errors.Is(err, errIntRange):
		return 0, llm.InvalidParam(param, "Input should be an integer of at most %d", math.MaxInt32)
	case err != nil:
		return 0, llm.InvalidParam(param, "Input should be an integer")
	}
	return n, nil
}

// decodeBool decodes a raw boolean member.
func decodeBool(v jsontext.Value, param string) (bool, error) {
	switch rawKind(v) {
	case 't':
		return true, nil
	case 'f':
		return false, nil
	}
	return false, llm.InvalidParam(param, "Input should be a boolean")
}

func join(param, key string) string {
	if param == "" {
		return key
	}
	return param + "." + key
}

func index(param string, i int) string { return param + "." + strconv.Itoa(i) }

func missing(param string) error { return llm.InvalidParam(param, "Field required") }

// optString is an optional string member's value.
func optString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// reqString is a required, non-empty string member's value.
func reqString(s *string, param string) (string, error) {
	switch {
	case s == nil:
		return "", missing(param)
	case *s == "":
		return "", llm.InvalidParam(param, "String should have at least 1 character")
	}
	return *s, nil
}

// oneOf checks that s is one of the allowed values.
func oneOf(s, param string, allowed ...string) error {
	for _, a := range allowed {
		if s == a {
			return nil
		}
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = strconv.Quote(a)
	}
	list := quoted[0]
	for i := 1; i < len(quoted); i++ {
		sep := ", "
		if i == len(quoted)-1 {
			sep = " or "
		}
		list += sep + quoted[i]
	}
	return llm.InvalidParam(param, "Input should be %s", list)
}
