package messages

import (
	"net/http"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// modelInfo is a native model entry (docs/wire/messages.md#models).
type modelInfo struct {
	Type           string `json:"type"` // "model"
	ID             string `json:"id"`
	DisplayName    string `json:"display_name"`
	CreatedAt      string `json:"created_at"` // RFC 3339
	MaxInputTokens int    `json:"max_input_tokens"`
	MaxTokens      int    `json:"max_tokens"`
}

type modelList struct {
	Data    []modelInfo `json:"data"`
	HasMore bool        `json:"has_more"`
	FirstID string      `json:"first_id"`
	LastID  string      `json:"last_id"`
}

// The three model ids of the contract (docs/contract.md#model-ids): one model, three effort biases.
var models = []struct{ id, name string }{
	{"svc-fusion", "SVC Fusion"},
	{"svc-saver", "SVC Saver (low effort)"},
	{"svc-max", "SVC Max (high effort)"},
}

// createdAt is the fixed creation date listed for the model ids, the same
// instant as the chat-completions surface's "created" (the epoch, which
// the SDK allows for an unknown date, sorted the ids before every real
// model).
const createdAt = "2026-01-01T00:00:00Z"

func newModelInfo(id, name string, lim surface.Limits) modelInfo {
	return modelInfo{Type: "model", ID: id, DisplayName: name, CreatedAt: createdAt,
		MaxInputTokens: lim.ContextLength, MaxTokens: lim.MaxCompletionTokens}
}

// WriteModels writes GET /v1/models in the native shape. The list is one
// page: has_more is always sent, and false, so no SDK pager asks again.
func (Codec) WriteModels(w http.ResponseWriter, lim surface.Limits) {
	list := modelList{Data: make([]modelInfo, 0, len(models))}
	for _, m := range models {
		list.Data = append(list.Data, newModelInfo(m.id, m.name, lim))
	}
	list.FirstID, list.LastID = list.Data[0].ID, list.Data[len(list.Data)-1].ID
	_ = surface.WriteJSON(w, http.StatusOK, list)
}

// WriteModel writes GET /v1/models/{id}. Any id resolves (docs/contract.md#model-ids: model ids
// are intent and never unknown); ids other than the three listed are echoed
// with their own name.
func (Codec) WriteModel(w http.ResponseWriter, id string, lim surface.Limits) {
	if id == "" {
		Codec{}.WriteError(w, &llm.Error{Kind: llm.KindNotFound, Message: "model id is required"})
		return
	}
	name := id
	for _, m := range models {
		if m.id == id {
			name = m.name
		}
	}
	_ = surface.WriteJSON(w, http.StatusOK, newModelInfo(id, name, lim))
}
