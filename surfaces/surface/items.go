package surface

import (
	"context"
	"net/http"

	"github.com/svcgw/svcgw/llm"
)

// Kept items.
//
// A format whose callers may name an earlier output item by id alone (the
// Responses API's item_reference) needs the item again on a later request,
// possibly at another instance. A streamed item's id goes out before its
// content exists, so the id cannot carry the item: the server keeps the
// items of each finished stream in the ledger instead (with the call's
// generation record, for the account that made it), and hands a later
// request's decoder the items it names.

// Item is one finished output item to keep: its id, and what the surface
// needs to rebuild it (opaque to the server).
type Item struct {
	ID   string
	Data []byte
}

// ItemKeeper is a Stream with output items to keep. The server asks for
// them once, at the stream's finish event, before the final frames are
// written: every item is complete by then.
type ItemKeeper interface {
	Items() []Item
}

// ItemSource finds the kept items of the calling account by id. Ids it does
// not hold (never kept, kept for another account, or older than the
// retention window) are absent from the map; an error is the store's
// (the caller answers 503 to llm.KindUnavailable).
type ItemSource func(ctx context.Context, ids []string) (map[string][]byte, error)

// ItemDecoder is a Codec whose requests may name kept items: the server
// calls DecodeRequestItems, with the calling account's items at hand, in
// place of DecodeRequest.
type ItemDecoder interface {
	DecodeRequestItems(r *http.Request, body []byte, items ItemSource) (*llm.Request, error)
}
