package account

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
)

// Feedback serves POST /svc/v1/feedback: a rating of one of the account's
// responses, by id, per end user. Resubmitting for the same (id, end_user)
// replaces the earlier rating; at most store.MaxFeedbackEndUsers end users
// may rate one response (409 beyond). Feedback is free and is not usage.
//
// Body: {"id": string (required), "rating": "up"|"down" (required),
// "comment": string, "labels": {flat object of strings, numbers and
// booleans}, "end_user": string}. Unknown fields are ignored; JSON null
// is the same as an absent field.
func (h *Handler) Feedback(w http.ResponseWriter, r *http.Request, caller store.Key) {
	r, end, ok := h.begin(w, r, caller)
	if !ok {
		return
	}
	defer end()
	var body struct {
		ID      *string         `json:"id"`
		Rating  *string         `json:"rating"`
		Comment *string         `json:"comment"`
		Labels  json.RawMessage `json:"labels"`
		EndUser *string         `json:"end_user"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		h.writeErr(w, r, err)
		return
	}
	if body.ID == nil || *body.ID == "" {
		h.writeErr(w, r, llm.InvalidParam("id", "id is required."))
		return
	}
	if body.Rating == nil {
		h.writeErr(w, r, llm.InvalidParam("rating", "rating is required."))
		return
	}
	if *body.Rating != "up" && *body.Rating != "down" {
		h.writeErr(w, r, llm.InvalidParam("rating", `rating must be "up" or "down".`))
		return
	}
	labels, err := flatLabels(body.Labels)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	f := store.Feedback{ID: *body.ID, Rating: *body.Rating, Labels: labels}
	if body.Comment != nil {
		f.Comment = *body.Comment
	}
	if body.EndUser != nil {
		f.EndUser = *body.EndUser
	}

	ctx := r.Context()
	_, err = h.st.UpsertFeedback(ctx, caller.AccountID, f, FeedbackMaxAge)
	switch {
	case errors.Is(err, store.ErrNotFound):
		h.writeNotFound(w, r, f.ID, err, true)
		return
	case errors.Is(err, store.ErrLimit):
		h.writeErr(w, r, &llm.Error{
			Kind:  llm.KindConflict,
			Param: "end_user",
			Message: fmt.Sprintf("This response already has ratings from %d end users, the most one response takes; "+
				"an end user who rated it may still change its rating.", store.MaxFeedbackEndUsers),
			Err: err,
		})
		return
	case errors.Is(err, store.ErrConflict):
		h.writeErr(w, r, &llm.Error{
			Kind:    llm.KindConflict,
			Param:   "id",
			Message: feedbackTooOld,
			Err:     err,
		})
		return
	case err != nil:
		h.internal(w, r, fmt.Errorf("feedback: %w", err))
		return
	}

	// 200 whether the rating was new or replaced one: the caller cannot
	// tell a first submission from a retry, and need not.
	h.writeJSON(w, r, http.StatusOK, struct {
		Object   string  `json:"object"`
		ID       string  `json:"id"`
		Rating   string  `json:"rating"`
		Recorded bool    `json:"recorded"`
		EndUser  *string `json:"end_user"`
	}{"feedback", f.ID, f.Rating, true, body.EndUser})
}

// decodeBody decodes exactly one JSON object from the request body, read
// with a limit, into v. Failures are invalid_request (400) naming the field
// when there is one, or too_large (413).
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxFeedbackBody))
	err := dec.Decode(v)
	if err == nil {
		// Anything after the object is an error, not a second request.
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON object")
		}
	}
	if err == nil {
		return nil
	}
	var (
		tooLarge *http.MaxBytesError
		typeErr  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return &llm.Error{Kind: llm.KindTooLarge, Message: "The request body is too large.", Err: err}
	case errors.As(err, &typeErr) && typeErr.Field != "":
		// Every typed field of the body is a string (labels is raw JSON,
		// checked by flatLabels).
		return &llm.Error{
			Kind:    llm.KindInvalidRequest,
			Param:   typeErr.Field,
			Message: fmt.Sprintf("%s must be a %s.", typeErr.Field, typeErr.Type.Kind()),
			Err:     err,
		}
	}
	return &llm.Error{Kind: llm.KindInvalidRequest, Message: "The request body must be one JSON object.", Err: err}
}

// flatLabels checks that raw is absent, null, or a flat JSON object whose
// values are strings, numbers or booleans, and returns it compacted with
// sorted keys (nil when absent).
func flatLabels(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, llm.InvalidParam("labels", "labels must be an object.")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Param: "labels", Message: "labels must be an object.", Err: err}
	}
	for k, v := range m {
		switch c := v[0]; {
		case c == '"', c == 't', c == 'f', c == '-', c >= '0' && c <= '9':
		default: // object, array or null
			return nil, llm.InvalidParam("labels",
				"labels must be a flat object: the value of %q must be a string, number or boolean.", k)
		}
	}
	b, err := json.Marshal(m) // sorted keys, compacted values
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Param: "labels", Message: "labels must be an object.", Err: err}
	}
	return b, nil
}
