package surface

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// One decoding style for every surface: a request body decodes in one pass
// into the surface's typed wire structs (Decode), and the wire types of a
// union (a string or an array of parts) read the next value's kind from the
// stream and decode the form they find (jsontext.Decoder.PeekKind), so no
// part of the body is scanned twice. Only when decoding fails is anything
// more done: the failure is located (DecodeError.Path) and worded by the
// surface in its vendor's style.
//
// The decoder is github.com/go-json-experiment/json, the implementation of
// Go's encoding/json/v2 proposal (in the standard library behind
// GOEXPERIMENT=jsonv2 since Go 1.25): encoding/json cannot decode a union
// without handing its bytes to an UnmarshalJSON method, which scans them
// twice more, and a vision call's image is inside such a union on three of
// the four surfaces. docs/decoding.md has the measurements. When v2 leaves
// the experiment, this file's imports change and nothing else.

// Rules are the leniencies a surface's decoding keeps. Both take what
// encoding/json took that the JSON standard leaves open: a repeated
// member's last value wins, and invalid UTF-8 in a string becomes U+FFFD
// rather than an error.
type Rules int

const (
	// Exact matches member names exactly, as the vendors' own validators
	// do, and a repeated member replaces the earlier one.
	Exact Rules = iota
	// EncodingJSON keeps encoding/json's rules: names match case-
	// insensitively ("Model" is "model", but "max-tokens" is not
	// "max_tokens"), and a repeated member merges into the earlier one.
	EncodingJSON
)

var (
	exactOptions        = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	encodingJSONOptions = jsonv2.JoinOptions(exactOptions, jsonv2.MatchCaseInsensitiveNames(true),
		jsonv1.MatchCaseSensitiveDelimiter(true), jsonv1.MergeWithLegacySemantics(true))
)

// Decode decodes body, a request's JSON, into v, a pointer to a surface's
// wire type. Unknown members are ignored: SDKs add fields faster than
// gateways learn them. A failure is a *DecodeError.
func Decode(body []byte, v any, rules Rules) error {
	opts := exactOptions
	if rules == EncodingJSON {
		opts = encodingJSONOptions
	}
	err := jsonv2.Unmarshal(body, v, opts)
	if err == nil {
		return nil
	}
	de := decodeError(body, err)
	if rules == EncodingJSON {
		fieldNames(reflect.TypeOf(v), de.Path)
	}
	return de
}

// fieldNames rewrites the member names in path, as sent, to the names of
// the fields of t they matched, as encoding/json's errors name them
// ("Model" matched "model"). It stops at a type that decodes itself (a
// union), whose insides it does not know.
func fieldNames(t reflect.Type, path []string) {
	for i, tok := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if reflect.PointerTo(t).Implements(unmarshalerFrom) {
			return
		}
		switch t.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
			continue
		case reflect.Struct:
		default:
			return
		}
		f, ok := fieldNamed(t, tok)
		if !ok {
			return
		}
		path[i], t = f.name, f.typ
	}
}

var unmarshalerFrom = reflect.TypeFor[jsonv2.UnmarshalerFrom]()

type field struct {
	name string
	typ  reflect.Type
}

// fieldNamed finds the field of struct t that member name matched: the one
// of that name, else one whose name folds to it.
func fieldNamed(t reflect.Type, name string) (field, bool) {
	var folded field
	found := false
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		n, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch n {
		case "-":
			continue
		case "":
			n = sf.Name
		}
		if n == name {
			return field{n, sf.Type}, true
		}
		if !found && strings.EqualFold(n, name) {
			folded, found = field{n, sf.Type}, true
		}
	}
	return folded, found
}

// DecodeError is why a request body did not decode into a wire type: it
// is not JSON (Syntax), or a value in it is not of the type the wire
// format has there, or a wire type's own decoding refused it (Err).
type DecodeError struct {
	// Syntax is set when the body is not JSON: encoding/json's account of
	// where and why (the words svcgw's errors have always used).
	Syntax *json.SyntaxError
	// Path locates the value that did not fit: the member names and array
	// indexes from the root of the body, empty for the body itself.
	Path []string
	// Got is the kind of JSON value found, named as encoding/json's
	// UnmarshalTypeError names it ("string", "number", "bool", "null",
	// "array", "object"); Number is its text when it is a number.
	Got, Number string
	// Want is the Go type it did not fit, pointers removed.
	Want reflect.Type
	// Err is what a wire type's own decoding method returned, if anything
	// (a union's WrongKind, or an *llm.Error to pass on as it is).
	Err error
}

func (e *DecodeError) Error() string {
	if e.Syntax != nil {
		if e.Err != nil {
			return "decode request: " + e.Err.Error()
		}
		return "decode request: " + e.Syntax.Error()
	}
	msg := "decode request: " + e.Got + " at /" + strings.Join(e.Path, "/")
	if e.Want != nil {
		msg += " is not " + e.Wanted()
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Field renders Path as encoding/json's UnmarshalTypeError.Field does:
// member names joined by dots, array indexes left out.
func (e *DecodeError) Field() string {
	names := make([]string, 0, len(e.Path))
	for _, tok := range e.Path {
		if !isIndex(tok) {
			names = append(names, tok)
		}
	}
	return strings.Join(names, ".")
}

// Value is the value found as encoding/json's UnmarshalTypeError.Value
// words it: its kind, and its text when a number did not fit a number
// ("number 1.5" for an integer field).
func (e *DecodeError) Value() string {
	if e.Number != "" && isNumeric(e.Want) {
		return "number " + e.Number
	}
	return e.Got
}

// Wanted names what the wire format takes there, for an error message
// ("a string", "an array", "an integer", …): what a union's WrongKind said,
// or the JSON type Want decodes from.
func (e *DecodeError) Wanted() string {
	if k, ok := errors.AsType[*kindError](e.Err); ok {
		return k.want
	}
	if e.Want == nil {
		return "a value of another type"
	}
	switch e.Want.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// WrongKind is what a union's decoding method returns for a value of a
// kind it does not take: it consumes the value (so that the error points
// at it) and says what the union takes there, in the surface's words ("a
// string or an array of content parts").
func WrongKind(dec *jsontext.Decoder, want string) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	k := &kindError{want: want, got: v.Kind()}
	if k.got == '0' {
		k.number = string(v)
	}
	return k
}

// kindError is a union's refusal of a value's kind.
type kindError struct {
	want   string
	got    jsontext.Kind
	number string
}

func (e *kindError) Error() string { return "expected " + e.want + ", got " + kindName(e.got) }

// decodeError locates err, a failure of jsonv2.Unmarshal, in body.
func decodeError(body []byte, err error) *DecodeError {
	// A body that is not JSON is that before anything else, wherever the
	// fault (v2 stops at the first value that does not fit, before
	// reading the rest). encoding/json words it as svcgw's errors always
	// have.
	var se *json.SyntaxError
	if errors.As(json.Unmarshal(body, new(struct{})), &se) {
		return &DecodeError{Syntax: se}
	}
	var serr *jsonv2.SemanticError
	if !errors.As(err, &serr) {
		// v2 refused what encoding/json takes: say so plainly.
		return &DecodeError{Syntax: &json.SyntaxError{}, Err: err}
	}
	e := &DecodeError{Want: serr.GoType, Err: serr.Err, Got: kindName(serr.JSONKind)}
	for tok := range serr.JSONPointer.Tokens() {
		e.Path = append(e.Path, tok)
	}
	for e.Want != nil && e.Want.Kind() == reflect.Pointer {
		e.Want = e.Want.Elem()
	}
	if serr.JSONKind == '0' {
		e.Number = string(serr.JSONValue)
	}
	if k, ok := errors.AsType[*kindError](e.Err); ok {
		e.Want, e.Got, e.Number = nil, kindName(k.got), k.number
	}
	return e
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	case '[':
		return "array"
	case '{':
		return "object"
	}
	return ""
}

func isIndex(tok string) bool {
	_, err := strconv.ParseUint(tok, 10, 64)
	return err == nil
}

func isNumeric(t reflect.Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// WriteJSON writes v as the response body with status: one line of JSON
// and a newline, with <, > and & as they are (as the vendors send them),
// typed application/json unless the surface set a Content-Type of its own.
//
// A value that is a JSONAppender writes its own JSON, without reflection.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	je := jsonEncoders.Get().(*jsonEncoder)
	defer putJSONEncoder(je)
	var body []byte
	if a, ok := v.(JSONAppender); ok {
		if z, ok := v.(JSONSizer); ok {
			if n := z.JSONSize() + 1; n > cap(je.b) {
				// One allocation of the reply's size, instead of the
				// doublings (and copies) of appending a large reply,
				// an embeddings batch's 150 KB, to a small buffer.
				je.b = make([]byte, 0, n)
			}
		}
		je.b = append(a.AppendJSON(je.b[:0]), '\n')
		body = je.b
	} else {
		if err := je.enc.Encode(v); err != nil {
			return err
		}
		body = je.buf.Bytes()
	}
	if h := w.Header(); h.Get("Content-Type") == "" {
		h["Content-Type"] = contentTypeJSON
	}
	w.WriteHeader(status)
	_, err := w.Write(body) // copied: the writer keeps no reference
	return err
}

// JSONAppender is a reply that writes its own JSON: AppendJSON appends to
// dst the bytes encoding/json writes for it with HTML escaping off
// (without Encode's newline), as a surface's tests check.
type JSONAppender interface {
	AppendJSON(dst []byte) []byte
}

// JSONSizer is a JSONAppender that knows about how long its JSON is (at
// least as long, for WriteJSON to allocate it once).
type JSONSizer interface {
	JSONSize() int
}

// contentTypeJSON is WriteJSON's Content-Type value, shared (net/http only
// reads it, and copies it when the header is written; Set would allocate it
// for every reply).
var contentTypeJSON = []string{"application/json"}

// jsonEncoder is a buffer and an encoder writing into it, and a buffer
// for a JSONAppender.
type jsonEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
	b   []byte
}

// jsonEncoders are WriteJSON's buffers and encoders: one per reply would be
// allocated and grown again (several times for a reply of a few hundred
// bytes) only to be copied into the connection's writer.
var jsonEncoders = sync.Pool{New: func() any {
	je := new(jsonEncoder)
	je.enc = json.NewEncoder(&je.buf)
	je.enc.SetEscapeHTML(false)
	return je
}}

// maxPooledJSON is the largest buffer kept for reuse, so that one large
// reply does not pin its memory in the pool.
const maxPooledJSON = 64 << 10

func putJSONEncoder(je *jsonEncoder) {
	if je.buf.Cap() > maxPooledJSON || cap(je.b) > maxPooledJSON {
		return
	}
	je.buf.Reset()
	jsonEncoders.Put(je)
}
