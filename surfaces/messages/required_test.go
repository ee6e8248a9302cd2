package messages

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// The SDKs' types declare some members always present, as `T | null` in
// anthropic-sdk-typescript (1.15.0: container, stop_details, diagnostics,
// usage.inference_geo, usage.speed, citations, caller…) and api:"required"
// in anthropic-sdk-go, generated from the same specification. A reply that
// leaves one out breaks a caller that reads it as declared. These tests walk
// every golden reply and stream event with the Go SDK's types and fail on
// each required member that is missing.

// variants are the union variants svcgw sends, by type: content blocks,
// deltas and a tool call's caller.
var variants = map[string]reflect.Type{
	"text":              reflect.TypeFor[anthropic.TextBlock](),
	"thinking":          reflect.TypeFor[anthropic.ThinkingBlock](),
	"redacted_thinking": reflect.TypeFor[anthropic.RedactedThinkingBlock](),
	"tool_use":          reflect.TypeFor[anthropic.ToolUseBlock](),
	"direct":            reflect.TypeFor[anthropic.DirectCaller](),
	"text_delta":        reflect.TypeFor[anthropic.TextDelta](),
	"thinking_delta":    reflect.TypeFor[anthropic.ThinkingDelta](),
	"signature_delta":   reflect.TypeFor[anthropic.SignatureDelta](),
	"input_json_delta":  reflect.TypeFor[anthropic.InputJSONDelta](),
}

// eventTypes are the stream events, by type (ping and error have no
// required members beyond their type).
var eventTypes = map[string]reflect.Type{
	"message_start":       reflect.TypeFor[anthropic.MessageStartEvent](),
	"message_delta":       reflect.TypeFor[anthropic.MessageDeltaEvent](),
	"message_stop":        reflect.TypeFor[anthropic.MessageStopEvent](),
	"content_block_start": reflect.TypeFor[anthropic.ContentBlockStartEvent](),
	"content_block_delta": reflect.TypeFor[anthropic.ContentBlockDeltaEvent](),
	"content_block_stop":  reflect.TypeFor[anthropic.ContentBlockStopEvent](),
}

// missingRequired returns the paths of the members typ declares required
// that v (decoded JSON) lacks, looking into every member that is there.
func missingRequired(t *testing.T, path string, typ reflect.Type, v any) []string {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ.Kind() {
	case reflect.Slice:
		arr, _ := v.([]any)
		var out []string
		for i, el := range arr {
			out = append(out, missingRequired(t, path+"."+strconv.Itoa(i), typ.Elem(), el)...)
		}
		return out
	case reflect.Struct:
	default:
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil // null: nothing inside to check
	}
	// A union is checked as the variant its type names.
	if strings.HasSuffix(typ.Name(), "Union") {
		typName, _ := obj["type"].(string)
		vt, ok := variants[typName]
		if !ok {
			t.Errorf("%s: a %s of type %q the test does not know", path, typ.Name(), typName)
			return nil
		}
		return missingRequired(t, path, vt, v)
	}
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		member, present := obj[name]
		if !present {
			if f.Tag.Get("api") == "required" {
				out = append(out, path+"."+name)
			}
			continue
		}
		out = append(out, missingRequired(t, path+"."+name, f.Type, member)...)
	}
	return out
}

func TestWire_RequiredMembersOfReplies(t *testing.T) {
	files, err := filepath.Glob("testdata/response/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden replies: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, m := range missingRequired(t, "message", reflect.TypeFor[anthropic.Message](), v) {
			t.Errorf("%s: %s is missing", filepath.Base(f), m)
		}
	}
}

func TestWire_RequiredMembersOfStreamEvents(t *testing.T) {
	files, err := filepath.Glob("testdata/stream/*.sse")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden streams: %v", err)
	}
	checked := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range parseSSE(t, b) {
			typ, ok := eventTypes[ev.Event]
			if !ok {
				continue
			}
			checked[ev.Event] = true
			for _, m := range missingRequired(t, ev.Event, typ, ev.Data) {
				t.Errorf("%s: event %d: %s is missing", filepath.Base(f), i, m)
			}
		}
	}
	for name := range eventTypes {
		if !checked[name] {
			t.Errorf("no golden stream has a %s event", name)
		}
	}
}

// A text block's citations is an array, never null: @ai-sdk/anthropic
// (3.0.140) validates it as z.array(…).optional() and failed the whole
// reply ("expected array, received null"); the SDKs' types take either.
func TestWire_TextCitationsAreAnArray(t *testing.T) {
	files, err := filepath.Glob("testdata/response/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden replies: %v", err)
	}
	texts := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Content []map[string]json.RawMessage
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, bl := range m.Content {
			if string(bl["type"]) != `"text"` {
				continue
			}
			texts++
			if c := strings.TrimSpace(string(bl["citations"])); !strings.HasPrefix(c, "[") {
				t.Errorf("%s: content.%d.citations is %s, not an array", filepath.Base(f), i, c)
			}
		}
	}
	if texts == 0 {
		t.Fatal("no text block in the golden replies")
	}
}
