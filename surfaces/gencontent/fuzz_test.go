package gencontent

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcgw/svcgw/llm"
)

// FuzzDecodeRequest feeds arbitrary bodies to the decoder. It must never
// panic, fail only with invalid_request errors, and be stable: a decoded
// request, encoded back to the wire (encodeRequest) and decoded again, is
// the same request.
func FuzzDecodeRequest(f *testing.F) {
	for _, name := range decodeCases(f) {
		b, err := os.ReadFile(filepath.Join("testdata", "decode", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"contents":[{"parts":[{"text":"x","thoughtSignature":"%%%"}]}]}`))
	f.Add([]byte(`{"contents":[{"role":"model","parts":[{"thoughtSignature":"eyJ2IjoxfQ=="}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRequest(body, "")
		if err != nil {
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != llm.KindInvalidRequest || e.Message == "" {
				t.Fatalf("decode failed with %#v", err)
			}
			return
		}
		again := encodeRequest(t, req)
		req2, err := decodeRequest(again, "")
		if err != nil {
			t.Fatalf("re-decode: %v\nencoded: %s", err, again)
		}
		if d := cmp.Diff(req, req2, partsCmp...); d != "" {
			t.Fatalf("decode → encode → decode is unstable (-first +second):\n%s\nencoded: %s", d, again)
		}
	})
}

// encodeRequest renders a canonical request as a generate-content body, the
// way a client replays history: what the decoder gives back must decode to
// the same request.
func encodeRequest(t *testing.T, req *llm.Request) []byte {
	t.Helper()
	w := map[string]any{}
	if len(req.System) > 0 {
		var ps []part
		for _, p := range req.System {
			ps = append(ps, part{Text: p.Text})
		}
		w["systemInstruction"] = content{Parts: ps}
	}
	var contents []content
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant {
			contents = append(contents, content{Role: "model", Parts: modelParts(m.Parts, true)})
			continue
		}
		var ps []part
		for _, p := range m.Parts {
			switch p.Type {
			case llm.PartText:
				ps = append(ps, part{Text: p.Text})
			case llm.PartImage, llm.PartDocument:
				ps = append(ps, part{InlineData: &blob{MIMEType: p.MediaType, Data: base64.StdEncoding.EncodeToString(p.Data)}})
			case llm.PartToolResult:
				tr := p.ToolResult
				fr := &functionResponse{ID: tr.CallID, Name: tr.Name, Response: json.RawMessage(tr.Content[0].Text)}
				for _, c := range tr.Content[1:] {
					fr.Parts = append(fr.Parts, functionResponsePart{InlineData: &blob{MIMEType: c.MediaType, Data: base64.StdEncoding.EncodeToString(c.Data)}})
				}
				ps = append(ps, part{FunctionResponse: fr})
			default:
				t.Fatalf("unexpected %s part in a user message", p.Type)
			}
		}
		contents = append(contents, content{Role: "user", Parts: ps})
	}
	w["contents"] = contents
	if len(req.Tools) > 0 {
		var decls []map[string]any
		for _, tl := range req.Tools {
			d := map[string]any{"name": tl.Name, "description": tl.Description}
			if tl.Parameters != nil {
				d["parametersJsonSchema"] = tl.Parameters
			}
			decls = append(decls, d)
		}
		w["tools"] = []any{map[string]any{"functionDeclarations": decls}}
	}
	if tc := req.ToolChoice; tc.Mode != "" {
		fc := map[string]any{"allowedFunctionNames": tc.Allowed}
		switch tc.Mode {
		case llm.ToolChoiceAuto:
			fc["mode"] = "AUTO"
		case llm.ToolChoiceNone:
			fc["mode"] = "NONE"
		case llm.ToolChoiceRequired:
			fc["mode"] = "ANY"
		case llm.ToolChoiceTool:
			fc["mode"], fc["allowedFunctionNames"] = "ANY", []string{tc.Name}
		}
		w["toolConfig"] = map[string]any{"functionCallingConfig": fc}
	}
	g := map[string]any{
		"temperature": req.Temperature, "topP": req.TopP, "topK": req.TopK, "seed": req.Seed,
		"presencePenalty": req.PresencePenalty, "frequencyPenalty": req.FrequencyPenalty,
		"stopSequences": req.Stop, "maxOutputTokens": req.MaxTokens, "candidateCount": req.N,
		"responseLogprobs": req.Logprobs, "logprobs": req.TopLogprobs,
	}
	if rf := req.ResponseFormat; rf != nil {
		g["responseMimeType"] = "application/json"
		if rf.Schema != nil {
			g["responseJsonSchema"] = rf.Schema
		}
	}
	if r := req.Reasoning; r != nil {
		tc := map[string]any{"includeThoughts": r.IncludeThoughts, "thinkingLevel": strings.ToUpper(r.Effort)}
		switch {
		case !r.Enabled:
			tc["thinkingBudget"] = 0
		case r.BudgetTokens > 0:
			tc["thinkingBudget"] = r.BudgetTokens
		default:
			tc["thinkingBudget"] = -1
		}
		g["thinkingConfig"] = tc
	}
	w["generationConfig"] = g
	b, err := marshal(w)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return b
}
