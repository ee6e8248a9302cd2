package chat

import (
	"net/http"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// The model ids svcgw lists. They are one model at three effort pins, not
// three models; any other id is accepted on every call too.
var modelIDs = []string{"svc-fusion", "svc-saver", "svc-max"}

// modelsCreated is the fixed creation time listed for the model ids.
const modelsCreated = 1767225600 // 2026-01-01T00:00:00Z

var modelDescriptions = map[string]string{
	"svc-fusion": "Routes each call by its request type; effort auto (default).",
	"svc-saver":  "svc-fusion with effort pinned low: cheapest adequate route.",
	"svc-max":    "svc-fusion with effort pinned high: best available route.",
}

// supportedParameters is what every listed model accepts (docs/wire/chat-completions.md#models).
var supportedParameters = []string{"max_tokens", "temperature", "top_p", "stop", "stream", "response_format", "reasoning_effort", "reasoning", "tools", "tool_choice"}

type modelEntry struct {
	ID            string `json:"id"`
	Object        string `json:"object"`
	Created       int64  `json:"created"`
	OwnedBy       string `json:"owned_by"`
	Root          string `json:"root"`
	Name          string `json:"name"`
	Description   string `json:"description"`
	ContextLength int    `json:"context_length"`
	TopProvider   struct {
		ContextLength       int  `json:"context_length"`
		MaxCompletionTokens int  `json:"max_completion_tokens"`
		IsModerated         bool `json:"is_moderated"`
	} `json:"top_provider"`
	SupportedParameters []string `json:"supported_parameters"`
}

func entry(id string, contextLength, maxCompletion int) modelEntry {
	e := modelEntry{
		ID: id, Object: "model", Created: modelsCreated, OwnedBy: "svcgw", Root: "svc-fusion",
		Name: id, Description: modelDescriptions[id], ContextLength: contextLength,
		SupportedParameters: supportedParameters,
	}
	if e.Description == "" {
		e.Description = modelDescriptions["svc-fusion"]
	}
	e.TopProvider.ContextLength = contextLength
	e.TopProvider.MaxCompletionTokens = maxCompletion
	return e
}

// WriteModels writes the chat-completions model list. The limits are read
// from the routed backends at the time of the call.
func (Codec) WriteModels(w http.ResponseWriter, lim surface.Limits) {
	list := struct {
		Object string       `json:"object"`
		Data   []modelEntry `json:"data"`
	}{Object: "list"}
	for _, id := range modelIDs {
		list.Data = append(list.Data, entry(id, lim.ContextLength, lim.MaxCompletionTokens))
	}
	_ = surface.WriteJSON(w, http.StatusOK, list)
}

// WriteModel writes one model entry. Any id resolves: model ids are intent.
func (Codec) WriteModel(w http.ResponseWriter, id string, lim surface.Limits) {
	if id == "" {
		WriteError(w, llm.InvalidParam("model", "model id is required"))
		return
	}
	_ = surface.WriteJSON(w, http.StatusOK, entry(id, lim.ContextLength, lim.MaxCompletionTokens))
}
