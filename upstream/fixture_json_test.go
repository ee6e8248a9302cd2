package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// Generated JSON (tool arguments and JSON-mode replies) checked against a
// real JSON Schema validator.

// compileSchema compiles a schema for validating generated values, with
// format assertions on.
func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("parse schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatalf("add schema: %v", err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, value []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// toolSchemas are parameter schemas of the kinds clients send.
var toolSchemas = []struct{ name, schema string }{
	{"simple", weatherTool},
	{"empty", `{}`},
	{"bare object", `{"type":"object"}`},
	{"every type, strict", `{"type":"object","additionalProperties":false,
		"properties":{"s":{"type":"string"},"n":{"type":"number"},"i":{"type":"integer"},"b":{"type":"boolean"},
		"z":{"type":"null"},"a":{"type":"array","items":{"type":"string"}},
		"o":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}},
		"required":["s","n","i","b","z","a","o"]}`},
	{"numeric bounds", `{"type":"object","properties":{
		"i":{"type":"integer","minimum":10,"maximum":20},
		"neg":{"type":"integer","maximum":-5},
		"xi":{"type":"integer","exclusiveMinimum":3,"exclusiveMaximum":5},
		"f":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},
		"m":{"type":"number","multipleOf":0.1,"minimum":0.25},
		"big":{"type":"number","minimum":1000},
		"mi":{"type":"integer","multipleOf":7,"minimum":15}},
		"required":["i","neg","xi","f","m","big","mi"]}`},
	{"string lengths", `{"type":"object","properties":{
		"long":{"type":"string","minLength":12},"short":{"type":"string","maxLength":3},"empty":{"type":"string","maxLength":0}},
		"required":["long","short","empty"]}`},
	{"arrays", `{"type":"object","properties":{
		"ints":{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":3,"maxItems":5,"uniqueItems":true},
		"tags":{"type":"array","items":{"enum":["a","b","c"]},"minItems":2,"uniqueItems":true},
		"strs":{"type":"array","items":{"type":"string","maxLength":4},"minItems":3,"uniqueItems":true},
		"none":{"type":"array","maxItems":0},
		"objs":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]},"minItems":2,"uniqueItems":true}},
		"required":["ints","tags","strs","none","objs"]}`},
	{"formats", `{"type":"object","properties":{
		"d":{"type":"string","format":"date"},"dt":{"type":"string","format":"date-time"},"t":{"type":"string","format":"time"},
		"e":{"type":"string","format":"email"},"u":{"type":"string","format":"uri"},"id":{"type":"string","format":"uuid"},
		"h":{"type":"string","format":"hostname"},"v4":{"type":"string","format":"ipv4"},"v6":{"type":"string","format":"ipv6"},
		"days":{"type":"array","items":{"type":"string","format":"date"},"minItems":3,"uniqueItems":true}},
		"required":["d","dt","t","e","u","id","h","v4","v6","days"]}`},
	{"enum and const", `{"type":"object","properties":{"unit":{"type":"string","enum":["c","f"]},"n":{"enum":[3,4]},"k":{"const":{"deep":[1,2]}}},"required":["unit","n","k"]}`},
	{"nullable", `{"type":"object","properties":{
		"opt":{"anyOf":[{"type":"null"},{"type":"string"}]},"t":{"type":["null","integer"]},
		"one":{"oneOf":[{"type":"integer"},{"type":"string"}]}},"required":["opt","t","one"]}`},
	{"pydantic $defs", `{"$defs":{"Address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":"string","minLength":5}},"required":["street","zip"]}},
		"type":"object","properties":{"home":{"$ref":"#/$defs/Address"},"work":{"anyOf":[{"$ref":"#/$defs/Address"},{"type":"null"}]}},
		"required":["home","work"]}`},
	{"draft-07 definitions", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"color":{"type":"string","enum":["red","green"]}},
		"type":"object","properties":{"c":{"$ref":"#/definitions/color"},"cs":{"type":"array","items":{"$ref":"#/definitions/color"}}},"required":["c","cs"]}`},
	{"recursive tree", `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},
		"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name"]}},"$ref":"#/$defs/node"}`},
	{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
		{"properties":{"kind":{"const":"x"}},"required":["kind"]}]}`},
	{"anyOf with shared keywords", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},
		"anyOf":[{"required":["a"]},{"required":["b"]}]}`},
	{"discriminated oneOf", `{"type":"object","properties":{"shape":{"oneOf":[
		{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number","exclusiveMinimum":0}},"required":["kind","r"]},
		{"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number"}},"required":["kind","side"]}]}},
		"required":["shape"]}`},
	{"min properties", `{"type":"object","minProperties":3,"additionalProperties":{"type":"integer"}}`},
	{"untyped keywords", `{"properties":{"q":{"minLength":2},"lim":{"minimum":100},"xs":{"minItems":2}},"required":["q","lim","xs"]}`},
	{"draft-04 tuple and exclusive bounds", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{
		"pair":{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false},
		"score":{"type":"number","minimum":5,"exclusiveMinimum":true,"maximum":6},
		"cap":{"type":"integer","maximum":1,"exclusiveMaximum":true}},"required":["pair","score","cap"]}`},
	{"prefixItems", `{"type":"object","properties":{"p":{"type":"array","prefixItems":[{"type":"boolean"},{"type":"string","format":"date"}],"items":false}},"required":["p"]}`},
	{"deeply nested required", `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{
		"c":{"type":"object","properties":{"d":{"type":"object","properties":{"e":{"type":"integer","minimum":42}},"required":["e"]}},"required":["d"]}},
		"required":["c"]}},"required":["b"]}},"required":["a"]}`},
	{"json pointer escapes", `{"$defs":{"a/b":{"type":"integer","minimum":7}},"type":"object","properties":{"v":{"$ref":"#/$defs/a~1b"}},"required":["v"]}`},
	{"unicode enum", `{"type":"object","properties":{"city":{"enum":["Zürich","東京"]}},"required":["city"]}`},
}

func TestFixture_toolArgumentsValidate(t *testing.T) {
	for _, tt := range toolSchemas {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			sch := compileSchema(t, tt.schema)
			req := withTools(chatRequest("call it"), tt.schema)
			resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
			is.NoErr(err)
			is.Equal(resp.FinishReason, llm.FinishToolCalls)
			is.Equal(len(resp.Content), 1)
			call := resp.Content[0].ToolCall
			is.True(call != nil) // a tool call
			var obj map[string]any
			is.NoErr(json.Unmarshal(call.Arguments, &obj)) // arguments are a JSON object
			if err := validate(t, sch, call.Arguments); err != nil {
				t.Fatalf("arguments %s do not validate: %v", call.Arguments, err)
			}
		})
	}
}

// Codex's tool runner decodes a "number" it uses as a count (timeout_ms,
// yield_time_ms, max_output_tokens) into an integer and rejects 1.5; the
// fixture writes whole numbers wherever the schema allows one.
func TestFixture_numbersAreWholeWhenAllowed(t *testing.T) {
	tests := []struct {
		name, schema string
		whole        bool
	}{
		{"plain number (Codex exec_command timeout_ms)", `{"type":"number","description":"timeout in ms"}`, true},
		{"bounded", `{"type":"number","minimum":10,"maximum":20}`, true},
		{"exclusive bounds around an integer", `{"type":"number","exclusiveMinimum":2.5,"exclusiveMaximum":3.5}`, true},
		{"multipleOf 0.5", `{"type":"number","multipleOf":0.5}`, true},
		{"multipleOf 0.3", `{"type":"number","multipleOf":0.3,"minimum":0.25}`, true},
		{"no integer within bounds", `{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`, false},
		{"a fractional interval", `{"type":"number","minimum":0.25,"maximum":0.75}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			schema := `{"type":"object","properties":{"n":` + tt.schema + `},"required":["n"]}`
			resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), withTools(chatRequest("run it"), schema))
			is.NoErr(err)
			args := resp.Content[0].ToolCall.Arguments
			if err := validate(t, compileSchema(t, schema), args); err != nil {
				t.Fatalf("arguments %s do not validate: %v", args, err)
			}
			var v struct{ N json.Number }
			is.NoErr(json.Unmarshal(args, &v))
			_, intErr := v.N.Int64() // what a strict integer parser accepts
			if tt.whole != (intErr == nil) {
				t.Fatalf("n = %s; want whole number: %v", v.N, tt.whole)
			}
		})
	}
}

func TestFixture_toolArgumentsForGeminiSchemas(t *testing.T) {
	is := is.New(t)
	// Gemini's OpenAPI-subset schemas spell types in upper case.
	gemini := `{"type":"OBJECT","properties":{"n":{"type":"INTEGER","minimum":3},"tags":{"type":"ARRAY","items":{"type":"STRING"}},"ok":{"type":"BOOLEAN"}},"required":["n","tags","ok"]}`
	resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), withTools(chatRequest("go"), gemini))
	is.NoErr(err)
	sch := compileSchema(t, strings.ToLower(gemini))
	is.NoErr(validate(t, sch, resp.Content[0].ToolCall.Arguments)) // valid against the lower-case schema
}

func TestFixture_jsonMode(t *testing.T) {
	schemas := []struct{ name, schema string }{
		{"object", `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"required":["name","age"],"additionalProperties":false}`},
		{"array", `{"type":"array","items":{"type":"number"},"minItems":2}`},
		{"string", `{"type":"string","format":"email"}`},
		{"enum", `{"enum":["yes","no"]}`},
	}
	for _, tt := range append(schemas, toolSchemas...) {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), withFormat(chatRequest("extract"), tt.schema))
			is.NoErr(err)
			is.Equal(resp.FinishReason, llm.FinishStop)
			if err := validate(t, compileSchema(t, tt.schema), []byte(resp.Text())); err != nil {
				t.Fatalf("reply %s does not validate: %v", resp.Text(), err)
			}
		})
	}
	t.Run("no schema", func(t *testing.T) {
		is := is.New(t)
		resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), withFormat(chatRequest("hi"), ""))
		is.NoErr(err)
		var v struct{ Reply string }
		is.NoErr(json.Unmarshal([]byte(resp.Text()), &v)) // a JSON object
		is.True(strings.HasPrefix(v.Reply, `Fixture reply to: "hi"`))
	})
}
