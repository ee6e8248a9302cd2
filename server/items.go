package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// Kept output items (surface.ItemKeeper, surface.ItemDecoder): a stream's
// finished items go into the ledger with its generation record, for the
// caller's account, and a later request of the account that names them
// finds them there, on any instance of the database.

// decode decodes a request body; a surface whose requests may name kept
// items gets the caller's account's at hand.
func (s *Server) decode(r *http.Request, sf surface.Codec, caller *store.Key, body []byte) (*llm.Request, error) {
	d, ok := sf.(surface.ItemDecoder)
	if !ok {
		return sf.DecodeRequest(r, body)
	}
	return d.DecodeRequestItems(r, body, func(ctx context.Context, ids []string) (map[string][]byte, error) {
		items, err := s.store.OutputItems(ctx, caller.AccountID, ids)
		switch {
		case err == nil:
			return items, nil
		case errors.Is(err, store.ErrUnavailable):
			s.log.Warn("output items: the database did not answer", "request_id", RequestID(ctx), "err", err)
			return nil, databaseUnavailable(err)
		case ctx.Err() != nil:
			return nil, &llm.Error{Kind: llm.KindInvalidRequest, Message: "the request was canceled", Err: err}
		}
		s.log.Error("output items", "request_id", RequestID(ctx), "err", err)
		return nil, &llm.Error{Kind: llm.KindInternal, Message: "internal error", Err: err}
	})
}

// keptItems are the output items a stream's encoder hands over to keep, in
// the store's terms; none for a surface that keeps none.
func keptItems(enc surface.Stream) []store.Item {
	k, ok := enc.(surface.ItemKeeper)
	if !ok {
		return nil
	}
	items := k.Items()
	if len(items) == 0 {
		return nil
	}
	kept := make([]store.Item, len(items))
	for i, it := range items {
		kept[i] = store.Item{ID: it.ID, Data: it.Data}
	}
	return kept
}
