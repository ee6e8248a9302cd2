//go:build ignore

// extract writes schema.json: the part of OpenAI's published OpenAPI
// specification (github.com/openai/openai-openapi, openapi.yaml) that
// describes the chat-completions and Responses bodies svcgw returns, as a
// JSON Schema (draft 2020-12) that conformance_test.go validates against.
//
//	go run ./surfaces/chat/testdata/openai/extract.go -spec openapi.yaml -commit SHA > surfaces/chat/testdata/openai/schema.json
//
// It keeps the root components below and every component they reference,
// with only the keywords that validate (no descriptions or examples), turns
// OpenAPI's nullable into a "null" type, and narrows the unions listed in
// narrow to the members svcgw emits, so that emitting anything else fails.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// roots are the components svcgw's bodies are validated against.
var roots = []string{
	// chat-completions
	"CreateChatCompletionResponse", "CreateChatCompletionStreamResponse", "ErrorResponse",
	// Responses
	"Response", "TokenCountsResource",
	"ResponseCreatedEvent", "ResponseInProgressEvent", "ResponseCompletedEvent", "ResponseIncompleteEvent",
	"ResponseFailedEvent", "ResponseErrorEvent",
	"ResponseOutputItemAddedEvent", "ResponseOutputItemDoneEvent",
	"ResponseContentPartAddedEvent", "ResponseContentPartDoneEvent",
	"ResponseTextDeltaEvent", "ResponseTextDoneEvent",
	"ResponseReasoningSummaryPartAddedEvent", "ResponseReasoningSummaryPartDoneEvent",
	"ResponseReasoningSummaryTextDeltaEvent", "ResponseReasoningSummaryTextDoneEvent",
	"ResponseFunctionCallArgumentsDeltaEvent", "ResponseFunctionCallArgumentsDoneEvent",
}

// narrow lists, for union components, the members svcgw emits.
var narrow = map[string][]string{
	"OutputItem": {"OutputMessage", "FunctionToolCall", "ReasoningItem"},
	"Tool":       {"FunctionTool"},
}

// keep are the keywords that validate.
var keep = map[string]bool{
	"type": true, "properties": true, "required": true, "items": true, "enum": true, "const": true,
	"anyOf": true, "oneOf": true, "allOf": true, "additionalProperties": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true, "maxProperties": true,
	"pattern": true, "$ref": true,
}

const prefix = "#/components/schemas/"

func main() {
	spec := flag.String("spec", "openapi.yaml", "the OpenAPI specification")
	commit := flag.String("commit", "", "the openai/openai-openapi commit it came from")
	flag.Parse()
	b, err := os.ReadFile(*spec)
	if err != nil {
		fail(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		fail(err)
	}
	all := doc.Components.Schemas
	defs := map[string]any{}
	todo := slices.Clone(roots)
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if _, ok := defs[name]; ok {
			continue
		}
		s, ok := all[name]
		if !ok {
			fail(fmt.Errorf("no component %s", name))
		}
		if members, ok := narrow[name]; ok {
			s = narrowUnion(s.(map[string]any), members)
		}
		var refs []string
		defs[name] = schema(s, &refs)
		todo = append(todo, refs...)
	}
	var narrowed []string
	for u, ms := range narrow {
		narrowed = append(narrowed, u+" to "+strings.Join(ms, ", "))
	}
	slices.Sort(narrowed)
	out := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"$comment": "Excerpt of openapi.yaml at github.com/openai/openai-openapi commit " + *commit +
			": the components svcgw's chat-completions and Responses bodies are validated against, and those they reference;" +
			" validating keywords only, nullable as a null type, unions narrowed to what svcgw emits (" + strings.Join(narrowed, "; ") +
			"). Written by extract.go.",
		"$defs": defs,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fail(err)
	}
}

// narrowUnion keeps the members of a oneOf/anyOf union.
func narrowUnion(s map[string]any, members []string) map[string]any {
	for _, k := range []string{"oneOf", "anyOf"} {
		list, ok := s[k].([]any)
		if !ok {
			continue
		}
		var kept []any
		for _, m := range list {
			ref, _ := m.(map[string]any)["$ref"].(string)
			if slices.Contains(members, strings.TrimPrefix(ref, prefix)) {
				kept = append(kept, m)
			}
		}
		if len(kept) != len(members) {
			fail(fmt.Errorf("union narrowed to %d of %v", len(kept), members))
		}
		c := map[string]any{}
		for k2, v := range s {
			c[k2] = v
		}
		c[k] = kept
		return c
	}
	fail(fmt.Errorf("not a union: %v", members))
	return nil
}

// schema converts an OpenAPI schema object, collecting the components it
// references.
func schema(v any, refs *[]string) any {
	s, ok := v.(map[string]any)
	if !ok {
		return v // true/false schemas
	}
	out := map[string]any{}
	for k, val := range s {
		if !keep[k] {
			continue
		}
		switch k {
		case "$ref":
			name := strings.TrimPrefix(val.(string), prefix)
			*refs = append(*refs, name)
			out[k] = "#/$defs/" + name
		case "properties":
			props := map[string]any{}
			for p, ps := range val.(map[string]any) {
				props[p] = schema(ps, refs)
			}
			out[k] = props
		case "items", "additionalProperties":
			out[k] = schema(val, refs)
		case "anyOf", "oneOf", "allOf":
			var list []any
			for _, m := range val.([]any) {
				list = append(list, schema(m, refs))
			}
			out[k] = list
		default:
			out[k] = val
		}
	}
	if n, _ := s["nullable"].(bool); n {
		return nullable(out)
	}
	return out
}

// nullable also accepts null (OpenAPI 3.0's nullable, which JSON Schema
// does not know).
func nullable(s map[string]any) map[string]any {
	if t, ok := s["type"].(string); ok && s["$ref"] == nil && s["anyOf"] == nil && s["oneOf"] == nil && s["allOf"] == nil {
		s["type"] = []any{t, "null"}
		if e, ok := s["enum"].([]any); ok {
			s["enum"] = append(e, nil)
		}
		return s
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "extract:", err)
	os.Exit(1)
}
