package gencontent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/svcgw/svcgw/llm"
)

// openAPISchema translates Gemini's Schema (an OpenAPI 3.0 subset, used by
// responseSchema and functionDeclarations[].parameters) into the JSON Schema
// every backend takes:
//
//   - type names are upper case ("STRING", "OBJECT"): lower-cased, and
//     TYPE_UNSPECIFIED dropped;
//   - nullable: true becomes a ["t", "null"] type;
//   - format "enum" (Gemini's marker for enum strings) and propertyOrdering
//     (Gemini-only) are dropped; example becomes examples;
//   - proto3 JSON may write the int64 bounds (minItems, maxLength, …) as
//     strings: they become numbers.
//
// Other keywords pass unchanged. Property names are never touched.
func openAPISchema(raw json.RawMessage, path string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep numbers exactly as sent
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, llm.InvalidParam(path, "%s is not valid JSON", path)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, llm.InvalidParam(path, "%s must be a JSON object", path)
	}
	out, err := convertSchema(m, path)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// int64Keywords are the Schema fields of proto type int64.
var int64Keywords = map[string]bool{
	"minItems": true, "maxItems": true, "minLength": true, "maxLength": true,
	"minProperties": true, "maxProperties": true,
}

func convertSchema(s map[string]any, path string) (map[string]any, error) {
	out := make(map[string]any, len(s))
	for k, v := range s {
		kp := path + "." + k
		switch {
		case k == "type":
			t, ok := v.(string)
			if !ok {
				return nil, llm.InvalidParam(kp, "%s must be a string", kp)
			}
			if t = strings.ToLower(t); t != "" && t != "type_unspecified" {
				out[k] = t
			}
		case k == "nullable", k == "propertyOrdering":
		case k == "format" && v == "enum":
		case k == "example":
			out["examples"] = []any{v}
		case k == "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil, llm.InvalidParam(kp, "%s must be an object of schemas", kp)
			}
			conv := make(map[string]any, len(props))
			for name, ps := range props {
				sub, err := subSchema(ps, fmt.Sprintf("%s[%s]", kp, strconv.Quote(name)))
				if err != nil {
					return nil, err
				}
				conv[name] = sub
			}
			out[k] = conv
		case k == "items":
			sub, err := subSchema(v, kp)
			if err != nil {
				return nil, err
			}
			out[k] = sub
		case k == "anyOf":
			list, ok := v.([]any)
			if !ok {
				return nil, llm.InvalidParam(kp, "%s must be an array of schemas", kp)
			}
			conv := make([]any, len(list))
			for i, item := range list {
				sub, err := subSchema(item, fmt.Sprintf("%s[%d]", kp, i))
				if err != nil {
					return nil, err
				}
				conv[i] = sub
			}
			out[k] = conv
		case int64Keywords[k]:
			if str, ok := v.(string); ok {
				if _, err := strconv.ParseInt(str, 10, 64); err != nil {
					return nil, llm.InvalidParam(kp, "%s must be an integer", kp)
				}
				v = json.Number(str)
			}
			out[k] = v
		default:
			out[k] = v
		}
	}
	if s["nullable"] == true {
		if t, ok := out["type"].(string); ok {
			out["type"] = []any{t, "null"}
		}
	}
	return out, nil
}

func subSchema(v any, path string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, llm.InvalidParam(path, "%s must be a schema object", path)
	}
	return convertSchema(m, path)
}
