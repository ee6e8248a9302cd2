package gencontent

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// WriteResponse encodes a complete reply as a GenerateContentResponse with
// status 200 (python-genai treats any other 2xx as an error). responseId is
// the gateway id and modelVersion the caller's model id.
func (Codec) WriteResponse(w http.ResponseWriter, req *llm.Request, resp *llm.Response) error {
	model := resp.Model
	if model == "" {
		model = req.Model
	}
	out := generateContentResponse{
		Candidates: []candidate{{
			Content:      content{Role: "model", Parts: modelParts(resp.Content, showThoughts(req))},
			FinishReason: finishReason(resp.FinishReason),
		}},
		UsageMetadata: usage(resp.Usage),
		ModelVersion:  model,
		ResponseID:    resp.ID,
	}
	return writeJSON(w, http.StatusOK, out)
}

// showThoughts reports whether the caller asked for thought parts
// (thinkingConfig.includeThoughts). Gemini sends none otherwise; the
// reasoning is still counted in thoughtsTokenCount.
func showThoughts(req *llm.Request) bool {
	return req != nil && req.Reasoning != nil && req.Reasoning.IncludeThoughts
}

// finishReason maps a canonical finish reason (docs/translation.md#finish-reasons). Tool
// calls end with STOP: Gemini has no tool-call finish reason.
func finishReason(fr llm.FinishReason) string {
	switch fr {
	case llm.FinishStop, llm.FinishStopSequence, llm.FinishToolCalls, "":
		return "STOP"
	case llm.FinishLength:
		return "MAX_TOKENS"
	case llm.FinishContentFilter:
		return "SAFETY"
	}
	return "OTHER"
}

// usage maps canonical usage (docs/translation.md#usage): the prompt count includes
// the cached tokens, the candidates count excludes the reasoning.
func usage(u llm.Usage) *usageMetadata {
	return &usageMetadata{
		PromptTokenCount:        u.InputTokens,
		CachedContentTokenCount: u.CachedInputTokens,
		CandidatesTokenCount:    max(u.OutputTokens-u.ReasoningTokens, 0),
		ThoughtsTokenCount:      u.ReasoningTokens,
		TotalTokenCount:         u.TotalTokens(),
	}
}

// marshal encodes v as one line of JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeJSON writes v with status, typed as Google's API types its JSON
// (js-genai reads error bodies only when the Content-Type says JSON).
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	return surface.WriteJSON(w, status, v)
}
