package messages

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/svcgw/svcgw/llm"
)

// The decoder walks the request as raw JSON so that every failure names the
// exact field the way the vendor's own errors do ("messages.0.content.1.source"),
// which a struct-tag decoder cannot: its type errors drop array indexes.
// JSON null counts as absent everywhere, as the vendor's validator treats it.

// object is one decoded JSON object: its members as raw JSON.
type object map[string]json.RawMessage

// get returns member key, or nil when it is absent or null.
func (o object) get(key string) json.RawMessage {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil
	}
	return raw
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// jsonKind is the first byte of a JSON value: '{', '[', '"', 't', 'f', 'n',
// or '0' for any number.
func jsonKind(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	switch c := raw[0]; {
	case c == '-' || (c >= '0' && c <= '9'):
		return '0'
	default:
		return c
	}
}

func join(param, key string) string {
	if param == "" {
		return key
	}
	return param + "." + key
}

func index(param string, i int) string { return param + "." + strconv.Itoa(i) }

func missing(param string) error { return llm.InvalidParam(param, "Field required") }

func decodeObject(raw json.RawMessage, param string) (object, error) {
	if jsonKind(raw) != '{' {
		return nil, llm.InvalidParam(param, "Input should be an object")
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, llm.InvalidParam(param, "Input should be an object")
	}
	return o, nil
}

func decodeArray(raw json.RawMessage, param string) ([]json.RawMessage, error) {
	if jsonKind(raw) != '[' {
		return nil, llm.InvalidParam(param, "Input should be an array")
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, llm.InvalidParam(param, "Input should be an array")
	}
	return a, nil
}

func decodeString(raw json.RawMessage, param string) (string, error) {
	var s string
	if jsonKind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", llm.InvalidParam(param, "Input should be a string")
	}
	return s, nil
}

func decodeBool(raw json.RawMessage, param string) (bool, error) {
	var b bool
	if k := jsonKind(raw); (k != 't' && k != 'f') || json.Unmarshal(raw, &b) != nil {
		return false, llm.InvalidParam(param, "Input should be a boolean")
	}
	return b, nil
}

func decodeFloat(raw json.RawMessage, param string) (float64, error) {
	var f float64
	if jsonKind(raw) != '0' || json.Unmarshal(raw, &f) != nil {
		return 0, llm.InvalidParam(param, "Input should be a number")
	}
	return f, nil
}

// decodeInt accepts a JSON number with no fractional part (1024 or 1024.0,
// as the vendor's validator does).
func decodeInt(raw json.RawMessage, param string) (int, error) {
	if jsonKind(raw) != '0' {
		return 0, llm.InvalidParam(param, "Input should be an integer")
	}
	s := string(bytes.TrimSpace(raw))
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		return int(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) {
		return 0, llm.InvalidParam(param, "Input should be an integer")
	}
	if f > math.MaxInt32 || f < math.MinInt32 {
		return 0, llm.InvalidParam(param, "Input should be an integer of at most %d", math.MaxInt32)
	}
	return int(f), nil
}

// optString decodes an optional string member.
func optString(o object, key, param string) (string, error) {
	raw := o.get(key)
	if raw == nil {
		return "", nil
	}
	return decodeString(raw, join(param, key))
}

// reqString decodes a required, non-empty string member.
func reqString(o object, key, param string) (string, error) {
	raw := o.get(key)
	if raw == nil {
		return "", missing(join(param, key))
	}
	s, err := decodeString(raw, join(param, key))
	if err == nil && s == "" {
		err = llm.InvalidParam(join(param, key), "String should have at least 1 character")
	}
	return s, err
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

// compact returns raw JSON without insignificant whitespace, so that equal
// values compare and hash (prompt-cache prefixes) equal.
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return b.Bytes()
}
