package gencontent

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// model is one entry of GET /v1beta/models (docs/wire/generate-content.md#models). The SDKs read name (with its "models/" prefix), the token limits and
// supportedGenerationMethods (as supportedActions).
type model struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	Description                string   `json:"description"`
	InputTokenLimit            int      `json:"inputTokenLimit"`
	OutputTokenLimit           int      `json:"outputTokenLimit"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	Thinking                   bool     `json:"thinking"`
}

// modelList is the list body. It never carries nextPageToken: the three
// models fit one page, and js-genai's pager keeps fetching while the token
// is anything but absent (an empty string loops forever).
type modelList struct {
	Models []model `json:"models"`
}

// The listed ids and what each means. They are one model with three effort
// settings (docs/contract.md#model-ids).
var listed = []struct{ id, description string }{
	{"svc-fusion", "svcgw's model: each call is classified and routed; effort from the X-SVC-Effort header (auto by default)."},
	{"svc-saver", "svcgw's model with effort pinned low: the cheapest routing for each kind of call."},
	{"svc-max", "svcgw's model with effort pinned high: the strongest routing for each kind of call."},
}

func newModel(id, description string, lim surface.Limits) model {
	return model{
		Name:                       "models/" + id,
		Version:                    "001",
		DisplayName:                id,
		Description:                description,
		InputTokenLimit:            lim.ContextLength,
		OutputTokenLimit:           lim.MaxCompletionTokens,
		SupportedGenerationMethods: []string{MethodGenerate, MethodStreamGenerate, MethodCountTokens},
		Thinking:                   true,
	}
}

// WriteModels writes GET /v1beta/models: svc-fusion, svc-saver and svc-max,
// with the token limits the routed backends report now. pageSize and
// pageToken are ignored: there is one page.
func (Codec) WriteModels(w http.ResponseWriter, lim surface.Limits) {
	list := modelList{Models: make([]model, 0, len(listed))}
	for _, m := range listed {
		list.Models = append(list.Models, newModel(m.id, m.description, lim))
	}
	_ = writeJSON(w, http.StatusOK, list)
}

// WriteModel writes GET /v1beta/models/{model}. Any id resolves (docs/contract.md#model-ids:
// model ids are intent, never unknown) and is echoed as the name; only an
// empty one is an error.
func (Codec) WriteModel(w http.ResponseWriter, id string, lim surface.Limits) {
	id = strings.TrimPrefix(id, "models/")
	if strings.TrimSpace(id) == "" {
		writeError(w, &llm.Error{Kind: llm.KindNotFound, Message: "no model id in the path: call models/{model}"})
		return
	}
	description := "Any model id is accepted: the call is classified and routed like svc-fusion."
	for _, m := range listed {
		if m.id == id {
			description = m.description
		}
	}
	_ = writeJSON(w, http.StatusOK, newModel(id, description, lim))
}

// countTokensResponse is the body of :countTokens.
type countTokensResponse struct {
	TotalTokens int `json:"totalTokens"`
}

// CountTokens serves :countTokens: an advisory estimate from
// llm.Request.InputTokens that never reaches a backend. The body is
// {contents} (what the SDKs send; systemInstruction, tools and
// generationConfig are counted too if present) or
// {generateContentRequest: {…}} (REST clients).
func (Codec) CountTokens(w http.ResponseWriter, r *http.Request, body []byte) {
	var wrapped struct {
		GenerateContentRequest json.RawMessage `json:"generateContentRequest"`
	}
	prefix := ""
	if surface.Decode(body, &wrapped, surface.EncodingJSON) == nil && present(wrapped.GenerateContentRequest) {
		body, prefix = wrapped.GenerateContentRequest, "generateContentRequest."
	}
	req, err := decodeRequest(body, prefix)
	if err != nil {
		writeError(w, err)
		return
	}
	_ = writeJSON(w, http.StatusOK, countTokensResponse{TotalTokens: req.InputTokens()})
}
