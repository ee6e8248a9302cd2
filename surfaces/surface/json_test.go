package surface

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"
)

// parts is a union in the style of the surfaces' content members.
type parts struct {
	text  *string
	parts []testPart
}

func (p *parts) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case 'n':
		return dec.SkipValue()
	case '"':
		return jsonv2.UnmarshalDecode(dec, &p.text)
	case '[':
		return jsonv2.UnmarshalDecode(dec, &p.parts)
	}
	return WrongKind(dec, "a string or an array of parts")
}

type testPart struct {
	Type  string `json:"type"`
	Image *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	Count *int `json:"count"`
}

type testRequest struct {
	Model    *string            `json:"model"`
	Max      *int               `json:"max_tokens"`
	Size     *uint              `json:"size"`
	Temp     *float64           `json:"temperature"`
	Stream   bool               `json:"stream"`
	Messages []testMessage      `json:"messages"`
	Bias     map[string]float64 `json:"logit_bias"`
}

type testMessage struct {
	Role    string `json:"role"`
	Content parts  `json:"content"`
}

func TestDecode_Errors(t *testing.T) {
	tests := []struct {
		name, body string
		rules      Rules
		path       []string
		field      string // encoding/json's Field
		value      string // encoding/json's Value
		wanted     string
	}{
		{"a string where a number goes", `{"model":5}`, Exact, []string{"model"}, "model", "number", "a string"},
		{"a fraction where an integer goes", `{"max_tokens":1.5}`, Exact, []string{"max_tokens"}, "max_tokens", "number 1.5", "an integer"},
		{"an integer too large", `{"max_tokens":1e40}`, Exact, []string{"max_tokens"}, "max_tokens", "number 1e40", "an integer"},
		{"a negative size", `{"size":-1}`, Exact, []string{"size"}, "size", "number -1", "a non-negative integer"},
		{"a number too large", `{"temperature":1e400}`, Exact, []string{"temperature"}, "temperature", "number 1e400", "a number"},
		{"a string where a boolean goes", `{"stream":"yes"}`, Exact, []string{"stream"}, "stream", "string", "a boolean"},
		{"an object where an array goes", `{"messages":{}}`, Exact, []string{"messages"}, "messages", "object", "an array"},
		{"an array where an object goes", `{"logit_bias":[1]}`, Exact, []string{"logit_bias"}, "logit_bias", "array", "an object"},
		{"a map value", `{"logit_bias":{"50256":"x"}}`, Exact, []string{"logit_bias", "50256"}, "logit_bias", "string", "a number"},
		{"inside an array", `{"messages":[{},{"role":5}]}`, Exact, []string{"messages", "1", "role"}, "messages.role", "number", "a string"},
		{"a union of the wrong kind", `{"messages":[{"content":5}]}`, Exact, []string{"messages", "0", "content"}, "messages.content", "number", "a string or an array of parts"},
		{"inside a union", `{"messages":[{"content":[{"type":"x"},{"image_url":"u"}]}]}`, Exact, []string{"messages", "0", "content", "1", "image_url"}, "messages.content.image_url", "string", "an object"},
		{"a fraction inside a union", `{"messages":[{"content":[{"count":2.5}]}]}`, Exact, []string{"messages", "0", "content", "0", "count"}, "messages.content.count", "number 2.5", "an integer"},
		{"the body is an array", `[]`, Exact, nil, "", "array", "an object"},
		{"the body is a string", `"x"`, Exact, nil, "", "string", "an object"},
		{"names as matched, not as sent", `{"MESSAGES":[{"Role":5}]}`, EncodingJSON, []string{"messages", "0", "role"}, "messages.role", "number", "a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var v testRequest
			err := Decode([]byte(tt.body), &v, tt.rules)
			var de *DecodeError
			is.True(errors.As(err, &de)) // a *DecodeError
			is.Equal(de.Syntax, nil)     // the body is JSON
			if d := cmp.Diff(tt.path, de.Path); d != "" {
				t.Errorf("path (-want +got):\n%s", d)
			}
			is.Equal(de.Field(), tt.field)
			is.Equal(de.Value(), tt.value)
			is.Equal(de.Wanted(), tt.wanted)
		})
	}
}

func TestDecode_NotJSON(t *testing.T) {
	tests := []struct {
		name, body string
		offset     int64
		message    string
	}{
		{"empty", ``, 0, "unexpected end of JSON input"},
		{"cut short", `{"model":`, 9, "unexpected end of JSON input"},
		{"trailing garbage", `{"model":"m"} x`, 15, "invalid character 'x' after top-level value"},
		// v2 would stop at the first value that does not fit; a body
		// that is not JSON is that first, wherever the fault.
		{"not JSON after a value that does not fit", `{"model":5,"max_tokens":}`, 25, "invalid character '}' looking for beginning of value"},
		{"leading zeros", `000`, 2, "invalid character '0' after top-level value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var v testRequest
			var de *DecodeError
			is.True(errors.As(Decode([]byte(tt.body), &v, Exact), &de))
			is.True(de.Syntax != nil)                // not JSON
			is.Equal(de.Syntax.Offset, tt.offset)    // where, as encoding/json says
			is.Equal(de.Syntax.Error(), tt.message)  // and why, in its words
			is.Equal(errors.Unwrap(de) == nil, true) // nothing a wire type said
		})
	}
}

func TestDecode_Rules(t *testing.T) {
	t.Run("exact names", func(t *testing.T) {
		is := is.New(t)
		var v testRequest
		is.NoErr(Decode([]byte(`{"Model":"a","max_tokens":1}`), &v, Exact))
		is.Equal(v.Model, nil) // "Model" is not "model"
	})
	t.Run("encoding/json's names", func(t *testing.T) {
		is := is.New(t)
		var v testRequest
		is.NoErr(Decode([]byte(`{"Model":"a","MAX_TOKENS":1,"max-tokens":2}`), &v, EncodingJSON))
		is.Equal(*v.Model, "a")
		is.Equal(*v.Max, 1) // folded case, but not "-" for "_"
	})
	t.Run("the last of a repeated member wins", func(t *testing.T) {
		is := is.New(t)
		var v testRequest
		is.NoErr(Decode([]byte(`{"model":"a","model":"b"}`), &v, Exact))
		is.Equal(*v.Model, "b")
	})
	t.Run("invalid UTF-8 becomes U+FFFD", func(t *testing.T) {
		is := is.New(t)
		var v testRequest
		is.NoErr(Decode([]byte("{\"model\":\"a\xffb\"}"), &v, Exact))
		is.Equal(*v.Model, "a\uFFFDb")
	})
	t.Run("a union takes each of its forms, and null", func(t *testing.T) {
		is := is.New(t)
		var v testRequest
		is.NoErr(Decode([]byte(`{"messages":[{"content":"hi"},{"content":[{"type":"text"}]},{"content":null}]}`), &v, Exact))
		is.Equal(*v.Messages[0].Content.text, "hi")
		is.Equal(v.Messages[1].Content.parts, []testPart{{Type: "text"}})
		is.Equal(v.Messages[2].Content, parts{})
	})
}

func TestWriteJSON(t *testing.T) {
	t.Run("one line, <, > and & as they are", func(t *testing.T) {
		is := is.New(t)
		rec := httptest.NewRecorder()
		is.NoErr(WriteJSON(rec, http.StatusTeapot, map[string]string{"text": "a < b && c > d"}))
		is.Equal(rec.Code, http.StatusTeapot)
		is.Equal(rec.Header().Get("Content-Type"), "application/json")
		is.Equal(rec.Body.String(), `{"text":"a < b && c > d"}`+"\n")
	})
	t.Run("a surface's own media type", func(t *testing.T) {
		is := is.New(t)
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "application/json; charset=utf-8")
		is.NoErr(WriteJSON(rec, http.StatusOK, struct{}{}))
		is.Equal(rec.Header().Get("Content-Type"), "application/json; charset=utf-8")
	})
	t.Run("a value that does not encode writes nothing", func(t *testing.T) {
		is := is.New(t)
		rec := httptest.NewRecorder()
		is.True(WriteJSON(rec, http.StatusOK, func() {}) != nil)
		is.True(!strings.Contains(rec.Body.String(), "{"))
	})
}
