package upstream

import (
	"encoding/json"
	"testing"
	"time"
)

func TestToolArguments_bounded(t *testing.T) {
	schemas := []string{
		`{"type":"object","properties":{"a":{"type":"array","minItems":1000000,"items":{"type":"array","minItems":1000000}}},"required":["a"]}`,
		`{"type":"object","properties":{"s":{"type":"string","minLength":1000000}},"required":["s"]}`,
		`{"type":"object","minProperties":1000000}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"]}`,
		`{"type":"object","properties":{"self":{"$ref":"#"}},"required":["self"]}`,
		`{"type":"object","properties":{"a":{"$ref":"#"},"b":{"$ref":"#"},"c":{"$ref":"#"},"d":{"$ref":"#"},"e":{"$ref":"#"},"f":{"$ref":"#"}},"required":["a","b","c","d","e","f"]}`,
	}
	for _, s := range schemas {
		out := toolArguments([]byte(s))
		if !json.Valid(out) {
			t.Errorf("schema %s: invalid JSON %s", s, out)
		}
		if len(out) > 1<<20 {
			t.Errorf("schema %s: %d bytes of arguments", s, len(out))
		}
	}
}

// FuzzToolArguments checks that no schema makes the generator panic or
// produce anything but a JSON object.
func FuzzToolArguments(f *testing.F) {
	for _, s := range []string{
		`{}`, `true`, `{"type":"object","properties":{"a":{"type":"integer","minimum":3,"multipleOf":2}},"required":["a"]}`,
		`{"anyOf":[{"type":"null"},{"$ref":"#/$defs/x"}],"$defs":{"x":{"type":"object"}}}`,
		`{"type":["string","null"],"enum":[]}`, `{"items":[{"type":5}],"minItems":"x"}`,
		`{"allOf":[{"$ref":"#"}]}`, `{"type":"number","exclusiveMinimum":1e308,"maximum":-1e308}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		start := time.Now()
		out := toolArguments(schema)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %v", d)
		}
		var obj map[string]any
		if err := json.Unmarshal(out, &obj); err != nil {
			t.Fatalf("arguments %s are not a JSON object: %v", out, err)
		}
		if len(out) > 4<<20 {
			t.Fatalf("%d bytes of arguments", len(out))
		}
	})
}
