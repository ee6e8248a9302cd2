package store

import (
	"context"
	"time"
)

// Output items (SQLite migration 0008_output_items, PostgreSQL 0006_output_items).
//
// A streamed call's output items are kept so that a later call of the same
// account may name one by id alone (the Responses API's item_reference: a
// streamed item's id is sent before its content exists, so it cannot carry
// the item). They travel with the call's Generation and are inserted in the
// same transaction (SQLite) or batch (PostgreSQL) as its record, so an item
// exists exactly when its call is recorded, on every instance sharing the
// database; retention deletes them with the record (pruneItems).

// Item is one output item of a call: its id, unique within the account,
// and the surface's encoding of what rebuilds it (opaque to the store).
type Item struct {
	ID   string
	Data []byte
}

// maxItemLookup bounds the ids one OutputItems call looks up: a request
// names at most one per input item, and the server bounds those.
const maxItemLookup = 4096

// ItemRetry is how long OutputItems waits before looking up once more the
// ids it did not find, on PostgreSQL: an item of a call that another
// instance answered moments ago may still be in that instance's ledger
// queue (Options.BatchInterval, 20 ms by default, then the commit).
const ItemRetry = 100 * time.Millisecond

// LookUpItems runs query for ids, then, for those it did not find, commits
// this instance's pending records (sync) and asks again, and on a store
// shared with other instances (retry > 0) once more after retry.
func LookUpItems(ctx context.Context, ids []string, sync func(context.Context) error, retry time.Duration,
	query func(context.Context, []string) (map[string][]byte, error)) (map[string][]byte, error) {
	if len(ids) == 0 {
		return map[string][]byte{}, nil
	}
	if len(ids) > maxItemLookup {
		ids = ids[:maxItemLookup]
	}
	found, err := query(ctx, ids)
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 2 && len(found) < len(ids); attempt++ {
		if attempt == 0 {
			if err := sync(ctx); err != nil {
				return nil, err
			}
		} else {
			if retry == 0 {
				break
			}
			t := time.NewTimer(retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		var missing []string
		for _, id := range ids {
			if _, ok := found[id]; !ok {
				missing = append(missing, id)
			}
		}
		more, err := query(ctx, missing)
		if err != nil {
			return nil, err
		}
		for id, data := range more {
			found[id] = data
		}
	}
	return found, nil
}
