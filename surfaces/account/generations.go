package account

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
)

// ListedGeneration is one item of GET /svc/v1/generations: the generation
// record of GET /svc/v1/generation, the surface it came in on, the public
// id of the key that made it, and a summary of its feedback.
type ListedGeneration struct {
	GenerationRecord
	Surface  string         `json:"surface"` // chat | responses | messages | gencontent
	APIKey   string         `json:"api_key"` // public key id; "" if none
	Feedback FeedbackCounts `json:"feedback"`
}

// FeedbackCounts summarises a generation's ratings.
type FeedbackCounts struct {
	Up   int `json:"up"`
	Down int `json:"down"`
	// Review is the rating given from the dashboard (recorded under the end
	// user store.ReviewEndUser), or null.
	Review *Review `json:"review"`
}

// Review is a rating and its comment.
type Review struct {
	Rating  string `json:"rating"`
	Comment string `json:"comment"`
}

// GenerationList is the body of GET /svc/v1/generations.
type GenerationList struct {
	Object  string             `json:"object"` // "list"
	Data    []ListedGeneration `json:"data"`
	FirstID *string            `json:"first_id"`
	LastID  *string            `json:"last_id"` // the next page's before=
	HasMore bool               `json:"has_more"`
}

// Generations serves GET /svc/v1/generations?limit=&before=&request_type=&application=:
// the caller's account's generations, newest first, limit of them (default
// 50, at most 200). before= is the last id of the previous page (last_id);
// has_more says whether another page follows. request_type and application
// keep only the generations with that request type or application label.
func (h *Handler) Generations(w http.ResponseWriter, r *http.Request, caller store.Key) {
	r, end, ok := h.begin(w, r, caller)
	if !ok {
		return
	}
	defer end()
	lq, err := ParseListQuery(r.URL.Query())
	if err != nil {
		h.writeErr(w, r, err)
		return
	}

	ctx := r.Context()
	page, more, err := h.st.ListGenerations(ctx, caller.AccountID, lq)
	if errors.Is(err, store.ErrNotFound) {
		h.writeErr(w, r, &llm.Error{Kind: llm.KindInvalidRequest, Param: "before", Err: err,
			Message: "before must be the id of one of this account's generations: the last_id of the previous page."})
		return
	}
	if err != nil {
		h.internal(w, r, fmt.Errorf("generations: %w", err))
		return
	}
	h.writeJSON(w, r, http.StatusOK, NewGenerationList(page, more))
}

// ParseListQuery validates the parameters of GET /svc/v1/generations
// (limit, before, request_type, application). Errors are invalid_request
// *llm.Error values naming the parameter.
func ParseListQuery(q url.Values) (store.ListQuery, error) {
	lq := store.ListQuery{
		Before:      q.Get("before"),
		RequestType: q.Get("request_type"),
		Application: q.Get("application"),
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxListLimit {
			return store.ListQuery{}, llm.InvalidParam("limit", "limit must be an integer from 1 to %d.", store.MaxListLimit)
		}
		lq.Limit = n
	}
	if lq.RequestType != "" && !llm.RequestType(lq.RequestType).Valid() {
		names := make([]string, len(llm.RequestTypes))
		for i, t := range llm.RequestTypes {
			names[i] = string(t)
		}
		return store.ListQuery{}, llm.InvalidParam("request_type", "request_type must be one of %s.", strings.Join(names, ", "))
	}
	return lq, nil
}

// NewGenerationList renders a page of generations as the body of GET
// /svc/v1/generations.
func NewGenerationList(page []store.ListedGeneration, more bool) GenerationList {
	list := GenerationList{Object: "list", Data: make([]ListedGeneration, len(page)), HasMore: more}
	for i, l := range page {
		item := ListedGeneration{
			GenerationRecord: NewGenerationRecord(l.Generation),
			Surface:          l.Surface,
			APIKey:           l.KeyID,
			Feedback:         FeedbackCounts{Up: l.Up, Down: l.Down},
		}
		if l.Review.Rating != "" {
			item.Feedback.Review = &Review{Rating: l.Review.Rating, Comment: l.Review.Comment}
		}
		list.Data[i] = item
	}
	if n := len(page); n > 0 {
		list.FirstID, list.LastID = &page[0].ID, &page[n-1].ID
	}
	return list
}
