package messages

import (
	"net/http"

	"github.com/svcgw/svcgw/surfaces/surface"
)

// CountTokens serves POST /v1/messages/count_tokens: {"input_tokens": N}, an
// estimate from the same decoder as /v1/messages (max_tokens not required).
// It never reaches a backend. Errors use the native envelope.
func (Codec) CountTokens(w http.ResponseWriter, _ *http.Request, body []byte) {
	req, err := decodeRequest(body, true)
	if err != nil {
		Codec{}.WriteError(w, err)
		return
	}
	_ = surface.WriteJSON(w, http.StatusOK, struct {
		InputTokens int `json:"input_tokens"`
	}{req.InputTokens()})
}
