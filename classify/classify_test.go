package classify_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/classify"
	"github.com/svcgw/svcgw/llm"
)

// Request builders: each returns a modification of a request, so cases read
// as a list of the features a call has.
type feature func(*llm.Request)

func model(id string) feature { return func(r *llm.Request) { r.Model = id } }

func userText(s string) feature {
	return func(r *llm.Request) {
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(s)}})
	}
}

func pdf() feature {
	return func(r *llm.Request) {
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
			{Type: llm.PartDocument, MediaType: "application/pdf", Data: []byte("%PDF-1.7")},
		}})
	}
}

func image() feature {
	return func(r *llm.Request) {
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
			{Type: llm.PartImage, MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
		}})
	}
}

func tools() feature {
	return func(r *llm.Request) {
		r.Tools = append(r.Tools, llm.Tool{Name: "get_weather", Parameters: []byte(`{"type":"object"}`)})
	}
}

func toolChoice(m llm.ToolChoiceMode) feature {
	return func(r *llm.Request) { r.ToolChoice.Mode = m }
}

// toolRound appends an assistant tool call and its result, without tools.
func toolRound() feature {
	return func(r *llm.Request) {
		r.Messages = append(r.Messages,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall,
				ToolCall: &llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: []byte(`{}`)}}}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult,
				ToolResult: &llm.ToolResult{CallID: "call_1", Content: []llm.Part{llm.TextPart("sunny")}}}}},
		)
	}
}

// toolResultWith appends a tool result whose content holds p.
func toolResultWith(p llm.Part) feature {
	return func(r *llm.Request) {
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult,
			ToolResult: &llm.ToolResult{CallID: "call_1", Content: []llm.Part{p}}}}})
	}
}

func systemPart(p llm.Part) feature {
	return func(r *llm.Request) { r.System = append(r.System, p) }
}

func jsonSchema() feature {
	return func(r *llm.Request) {
		r.ResponseFormat = &llm.ResponseFormat{Name: "x", Schema: []byte(`{"type":"object"}`)}
	}
}

func jsonObject() feature {
	return func(r *llm.Request) { r.ResponseFormat = &llm.ResponseFormat{} }
}

func long() feature { return userText(strings.Repeat("word ", classify.LongThreshold)) }

func reasoning(effort string, enabled bool) feature {
	return func(r *llm.Request) { r.Reasoning = &llm.Reasoning{Effort: effort, Enabled: enabled} }
}

func build(fs ...feature) *llm.Request {
	r := &llm.Request{Model: "svc-fusion"}
	for _, f := range fs {
		f(r)
	}
	if len(r.Messages) == 0 {
		userText("hello")(r)
	}
	return r
}

func TestClassify(t *testing.T) {
	const (
		chat = llm.SurfaceChat
		msgs = llm.SurfaceMessages
		gen  = llm.SurfaceGenContent
		resp = llm.SurfaceResponses

		auto   = llm.EffortAuto
		low    = llm.EffortLow
		medium = llm.EffortMedium
		high   = llm.EffortHigh
	)
	tests := []struct {
		name    string
		surface llm.Surface
		effort  llm.Effort
		req     *llm.Request
		want    classify.Result
	}{
		// Each capability on its own, with its auto tier.
		{"pdf gives document", msgs, auto, build(pdf()), res(llm.TypeDocument, llm.TierMedium)},
		{"pdf in system prompt gives document", msgs, auto,
			build(systemPart(llm.Part{Type: llm.PartDocument, Data: []byte("%PDF")})), res(llm.TypeDocument, llm.TierMedium)},
		{"pdf inside a tool result gives document", msgs, auto,
			build(toolResultWith(llm.Part{Type: llm.PartDocument, Data: []byte("%PDF")})), res(llm.TypeDocument, llm.TierMedium)},
		{"pdf carried as inline data gives document", gen, auto,
			build(systemPart(llm.Part{Type: llm.PartImage, MediaType: "Application/PDF"})), res(llm.TypeDocument, llm.TierMedium)},
		{"image gives vision", chat, auto, build(image()), res(llm.TypeVision, llm.TierMedium)},
		{"image url gives vision", chat, auto,
			build(systemPart(llm.Part{Type: llm.PartImage, URL: "https://example.com/a.png"})), res(llm.TypeVision, llm.TierMedium)},
		{"image inside a tool result gives vision", msgs, auto,
			build(toolResultWith(llm.Part{Type: llm.PartImage, MediaType: "image/jpeg"})), res(llm.TypeVision, llm.TierMedium)},
		{"tools give code", chat, auto, build(tools()), res(llm.TypeCode, llm.TierMedium)},
		{"tools give code on messages", msgs, auto, build(tools()), res(llm.TypeCode, llm.TierMedium)},
		{"tools give code on gencontent", gen, auto, build(model("gemini-2.5-flash"), tools()), res(llm.TypeCode, llm.TierMedium)},
		{"tools with tool_choice none still give code", chat, auto, build(tools(), toolChoice(llm.ToolChoiceNone)), res(llm.TypeCode, llm.TierMedium)},
		{"tool history without tools gives code", chat, auto, build(userText("hi"), toolRound()), res(llm.TypeCode, llm.TierMedium)},
		{"json schema gives json", chat, auto, build(jsonSchema()), res(llm.TypeJSON, llm.TierMedium)},
		{"json object mode gives json", chat, auto, build(jsonObject()), res(llm.TypeJSON, llm.TierMedium)},
		{"long input gives long", chat, auto, build(long()), res(llm.TypeLong, llm.TierMedium)},
		{"input at the threshold is not long", chat, auto,
			build(userText(strings.Repeat("a", 4*classify.LongThreshold-4*4))), res(llm.TypePro, llm.TierMedium)},
		{"reasoning gives reason", chat, auto, build(reasoning("", true)), res(llm.TypeReason, llm.TierHigh)},
		{"reasoning effort low gives reason at low tier", chat, auto, build(reasoning("low", true)), res(llm.TypeReason, llm.TierLow)},
		{"reasoning effort minimal gives reason at low tier", resp, auto, build(reasoning("minimal", true)), res(llm.TypeReason, llm.TierLow)},
		{"reasoning effort medium gives reason at medium tier", chat, auto, build(reasoning("medium", true)), res(llm.TypeReason, llm.TierMedium)},
		{"reasoning effort high gives reason at high tier", chat, auto, build(reasoning("HIGH", true)), res(llm.TypeReason, llm.TierHigh)},
		{"reasoning switched off is not reason", chat, auto, build(reasoning("none", false)), res(llm.TypePro, llm.TierMedium)},
		{"reasoning switched off beats a reasoning id at high effort", chat, high,
			build(model("o3"), reasoning("none", false)), res(llm.TypePro, llm.TierHigh)},
		{"effort high on a reasoning id gives reason", chat, high, build(model("o3")), res(llm.TypeReason, llm.TierHigh)},
		{"effort high on deepseek-reasoner gives reason", msgs, high, build(model("deepseek-reasoner")), res(llm.TypeReason, llm.TierHigh)},
		{"effort auto on a reasoning id is not reason", chat, auto, build(model("o3")), res(llm.TypePro, llm.TierMedium)},
		{"effort high on a plain id is pro, not reason", chat, high, build(model("gpt-4o")), res(llm.TypePro, llm.TierHigh)},
		{"svc-max on a plain request is pro high", chat, auto, build(model("svc-max")), res(llm.TypePro, llm.TierHigh)},
		{"reasoning effort does not override a header tier", chat, low, build(reasoning("high", true)), res(llm.TypeReason, llm.TierLow)},

		// Precedence pairs.
		{"document beats vision", msgs, auto, build(image(), pdf()), res(llm.TypeDocument, llm.TierMedium)},
		{"document beats code", msgs, auto, build(pdf(), tools()), res(llm.TypeDocument, llm.TierMedium)},
		{"document beats json", msgs, auto, build(pdf(), jsonSchema()), res(llm.TypeDocument, llm.TierMedium)},
		{"document beats long", msgs, auto, build(pdf(), long()), res(llm.TypeDocument, llm.TierMedium)},
		{"document beats reason", msgs, auto, build(pdf(), reasoning("high", true)), res(llm.TypeDocument, llm.TierMedium)},
		{"document beats a flash model id", gen, auto, build(model("gemini-2.5-flash"), pdf()), res(llm.TypeDocument, llm.TierMedium)},
		{"document beats effort low", msgs, low, build(pdf()), res(llm.TypeDocument, llm.TierLow)},
		{"document beats svc-saver", msgs, auto, build(model("svc-saver"), pdf()), res(llm.TypeDocument, llm.TierLow)},
		{"document beats svc-max", msgs, auto, build(model("svc-max"), pdf()), res(llm.TypeDocument, llm.TierHigh)},
		{"vision beats code", chat, auto, build(image(), tools()), res(llm.TypeVision, llm.TierMedium)},
		{"vision beats long", chat, auto, build(image(), long()), res(llm.TypeVision, llm.TierMedium)},
		{"vision beats a flash model id", gen, auto, build(model("gemini-2.0-flash"), image()), res(llm.TypeVision, llm.TierMedium)},
		{"vision beats effort low", chat, low, build(model("gpt-4o-mini"), image()), res(llm.TypeVision, llm.TierLow)},
		{"code beats json", chat, auto, build(tools(), jsonSchema()), res(llm.TypeCode, llm.TierMedium)},
		{"code beats long", chat, auto, build(tools(), long()), res(llm.TypeCode, llm.TierMedium)},
		{"code beats reason", chat, auto, build(tools(), reasoning("high", true)), res(llm.TypeCode, llm.TierMedium)},
		{"json beats long", chat, auto, build(jsonSchema(), long()), res(llm.TypeJSON, llm.TierMedium)},
		{"json beats reason", chat, auto, build(jsonSchema(), reasoning("", true)), res(llm.TypeJSON, llm.TierMedium)},
		{"long beats reason", chat, auto, build(long(), reasoning("high", true)), res(llm.TypeLong, llm.TierMedium)},
		{"long beats a flash id", chat, auto, build(model("gpt-4o-mini"), long()), res(llm.TypeLong, llm.TierMedium)},
		{"reason beats a flash id", chat, auto, build(model("gpt-4o-mini"), reasoning("", true)), res(llm.TypeReason, llm.TierHigh)},
		{"reason beats a gencontent flash id", gen, auto,
			build(model("gemini-2.5-flash"), reasoning("", true)), res(llm.TypeReason, llm.TierHigh)},
		{"reason beats svc-saver", chat, auto, build(model("svc-saver"), reasoning("", true)), res(llm.TypeReason, llm.TierLow)},
		{"reason beats effort medium", chat, medium, build(reasoning("", true)), res(llm.TypeReason, llm.TierMedium)},

		// Generate-content ids.
		{"gencontent flash id gives flash", gen, auto, build(model("gemini-2.5-flash")), res(llm.TypeFlash, llm.TierLow)},
		{"gencontent flash-lite id gives flash", gen, auto, build(model("gemini-2.0-flash-lite")), res(llm.TypeFlash, llm.TierLow)},
		{"gencontent lite token gives flash", gen, auto, build(model("gemma-lite")), res(llm.TypeFlash, llm.TierLow)},
		{"gencontent flash id with models/ prefix gives flash", gen, auto, build(model("models/Gemini-Flash-Latest")), res(llm.TypeFlash, llm.TierLow)},
		{"gencontent pro id gives pro", gen, auto, build(model("gemini-2.5-pro")), res(llm.TypePro, llm.TierMedium)},
		{"gencontent other id gives pro", gen, auto, build(model("gpt-4o-mini")), res(llm.TypePro, llm.TierMedium)},
		{"gencontent flash id with effort high stays flash", gen, high, build(model("gemini-2.5-flash")), res(llm.TypeFlash, llm.TierHigh)},
		{"gencontent pro id with effort low stays pro", gen, low, build(model("gemini-2.5-pro")), res(llm.TypePro, llm.TierLow)},
		{"gencontent svc-saver gives flash", gen, auto, build(model("svc-saver")), res(llm.TypeFlash, llm.TierLow)},
		{"gencontent svc-fusion with effort low gives flash", gen, low, build(model("svc-fusion")), res(llm.TypeFlash, llm.TierLow)},
		{"gencontent svc-fusion gives pro", gen, auto, build(model("svc-fusion")), res(llm.TypePro, llm.TierMedium)},

		// Other surfaces: effort, then id hints.
		{"mini id gives flash", chat, auto, build(model("gpt-4o-mini")), res(llm.TypeFlash, llm.TierLow)},
		{"haiku id gives flash", msgs, auto, build(model("claude-3-5-haiku-latest")), res(llm.TypeFlash, llm.TierLow)},
		{"nano id gives flash", resp, auto, build(model("gpt-4.1-nano")), res(llm.TypeFlash, llm.TierLow)},
		{"flash id gives flash on chat", chat, auto, build(model("gemini-2.5-flash")), res(llm.TypeFlash, llm.TierLow)},
		{"gemini is not mini", chat, auto, build(model("gemini-2.5-pro")), res(llm.TypePro, llm.TierMedium)},
		{"plain id gives pro", chat, auto, build(model("gpt-4o")), res(llm.TypePro, llm.TierMedium)},
		{"empty id gives pro", chat, auto, build(model("")), res(llm.TypePro, llm.TierMedium)},
		{"effort low gives flash", chat, low, build(model("gpt-4o")), res(llm.TypeFlash, llm.TierLow)},
		{"effort medium gives pro", chat, medium, build(model("gpt-4o-mini")), res(llm.TypePro, llm.TierMedium)},
		{"effort high gives pro", msgs, high, build(model("claude-3-5-haiku")), res(llm.TypePro, llm.TierHigh)},
		{"zero effort means auto", chat, "", build(model("gpt-4o-mini")), res(llm.TypeFlash, llm.TierLow)},

		// Pinned ids.
		{"svc-saver pins low", chat, auto, build(model("svc-saver")), res(llm.TypeFlash, llm.TierLow)},
		{"svc-saver overrides header high", chat, high, build(model("svc-saver")), res(llm.TypeFlash, llm.TierLow)},
		{"svc-max pins high", msgs, auto, build(model("svc-max")), res(llm.TypePro, llm.TierHigh)},
		{"svc-max overrides header low", msgs, low, build(model("SVC-MAX")), res(llm.TypePro, llm.TierHigh)},
		{"svc-max on a capability keeps the type", chat, auto, build(model("svc-max"), tools()), res(llm.TypeCode, llm.TierHigh)},
		{"svc-fusion follows header low", chat, low, build(model("svc-fusion")), res(llm.TypeFlash, llm.TierLow)},
		{"svc-fusion follows header medium", chat, medium, build(model("svc-fusion")), res(llm.TypePro, llm.TierMedium)},
		{"svc-fusion auto gives pro", chat, auto, build(model("svc-fusion")), res(llm.TypePro, llm.TierMedium)},

		// Header effort on capability types changes the tier only.
		{"effort low on code", chat, low, build(tools()), res(llm.TypeCode, llm.TierLow)},
		{"effort high on json", chat, high, build(jsonSchema()), res(llm.TypeJSON, llm.TierHigh)},
		{"effort medium on long", chat, medium, build(long()), res(llm.TypeLong, llm.TierMedium)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got := classify.Classify(classify.Input{Request: tt.req, Surface: tt.surface, Effort: tt.effort})
			is.Equal(got, tt.want)
		})
	}
}

func res(t llm.RequestType, tier llm.Tier) classify.Result {
	return classify.Result{Type: t, Tier: tier}
}

func TestClassify_NilRequest(t *testing.T) {
	is := is.New(t)
	got := classify.Classify(classify.Input{Surface: llm.SurfaceChat})
	is.Equal(got, res(llm.TypePro, llm.TierMedium)) // empty request is pro
}

func TestClassify_EveryResultIsValid(t *testing.T) {
	is := is.New(t)
	got := classify.Classify(classify.Input{Request: build(image()), Surface: llm.SurfaceChat, Effort: llm.EffortHigh})
	is.True(got.Type.Valid()) // a known request type
}

func TestParseEffort(t *testing.T) {
	tests := []struct {
		header string
		want   llm.Effort
		ok     bool
	}{
		{"", llm.EffortAuto, true},
		{"   ", llm.EffortAuto, true},
		{"auto", llm.EffortAuto, true},
		{"low", llm.EffortLow, true},
		{"medium", llm.EffortMedium, true},
		{"high", llm.EffortHigh, true},
		{" High ", llm.EffortHigh, true},
		{"LOW", llm.EffortLow, true},
		{"max", "", false},
		{"none", "", false},
		{"hi", "", false},
		{"low,high", "", false},
		{strings.Repeat("x", 500), "", false},
	}
	for _, tt := range tests {
		t.Run("header "+tt.header[:min(len(tt.header), 16)], func(t *testing.T) {
			is := is.New(t)
			got, err := classify.ParseEffort(tt.header)
			if tt.ok {
				is.NoErr(err)
				is.Equal(got, tt.want)
				return
			}
			var e *llm.Error
			is.True(errors.As(err, &e))                                        // an *llm.Error
			is.Equal(e.Kind, llm.KindInvalidRequest)                           // a 400
			is.Equal(e.Param, "X-SVC-Effort")                                  // names the header
			is.True(strings.Contains(e.Message, "auto, low, medium and high")) // lists allowed values
			is.True(len(e.Message) < 200)                                      // does not echo a long value
		})
	}
}

func BenchmarkClassify(b *testing.B) {
	reqs := []*llm.Request{
		build(model("gpt-4o-mini"), userText("What is the capital of France?")),
		build(model("claude-sonnet-4"), tools(), userText("hi"), toolRound()),
		build(model("svc-max"), reasoning("high", true), userText(strings.Repeat("context ", 2000))),
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		classify.Classify(classify.Input{Request: reqs[i%len(reqs)], Surface: llm.SurfaceChat, Effort: llm.EffortAuto})
	}
}

// 30,000 CJK characters are some 30,000 tokens, not the 7,500 a
// characters-÷-4 estimate gave, and 30,000 emoji three times that: a
// caller cannot slip a long prompt past the threshold by its script.
func TestClassify_LongWhateverTheScript(t *testing.T) {
	for _, text := range []string{strings.Repeat("漢字かな", 9000), strings.Repeat("😀", 12000)} {
		req := &llm.Request{Model: "svc-fusion", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(text)}}}}
		if got := classify.Classify(classify.Input{Request: req}).Type; got != llm.TypeLong {
			t.Errorf("%d characters of %q…: %s, want long", utf8.RuneCountInString(text), text[:12], got)
		}
	}
}

func TestEmbedding(t *testing.T) {
	for _, tc := range []struct {
		model  string
		effort llm.Effort
		want   llm.Tier
	}{
		{"text-embedding-3-small", "", llm.TierMedium},
		{"text-embedding-3-small", llm.EffortAuto, llm.TierMedium},
		{"text-embedding-3-small", llm.EffortLow, llm.TierLow},
		{"gemini-embedding-001", llm.EffortHigh, llm.TierHigh},
		{"svc-saver", llm.EffortHigh, llm.TierLow}, // the id pins the effort
		{"models/SVC-MAX", "", llm.TierHigh},
	} {
		t.Run(tc.model+" "+string(tc.effort), func(t *testing.T) {
			is := is.New(t)
			is.Equal(classify.Embedding(tc.model, tc.effort), classify.Result{Type: llm.TypeEmbedding, Tier: tc.want})
		})
	}
}
