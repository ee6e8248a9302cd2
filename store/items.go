package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Output items (migrations 0008_output_items, pgmigrations 0005).
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

// itemRetry is how long OutputItems waits before looking up once more the
// ids it did not find, on PostgreSQL: an item of a call that another
// instance answered moments ago may still be in that instance's ledger
// queue (Options.BatchInterval, 20 ms by default, then the commit).
const itemRetry = 100 * time.Millisecond

// insertItemSQL keeps one item; a batch committed again after an uncertain
// commit finds its items there already.
const insertItemSQL = `INSERT INTO output_items (account_id, id, generation_id, data) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`

// insertItems inserts the items of a batch's generations in tx (SQLite's
// commitBatch). The statement is not prepared: a prepare on the writer
// would wait for the connection tx holds, and a batch has few items (only
// streamed Responses calls keep any).
func (s *Store) insertItems(ctx context.Context, tx *sql.Tx, rows []genRow) error {
	for i := range rows {
		g := &rows[i].g
		for _, it := range g.Items {
			if _, err := tx.ExecContext(ctx, insertItemSQL, g.AccountID, it.ID, g.ID, it.Data); err != nil {
				return fmt.Errorf("ledger: insert item %q of generation %q: %w", it.ID, g.ID, err)
			}
		}
	}
	return nil
}

// queueItems queues the insert of a batch's items (PostgreSQL's
// commitBatch), if it has any.
func queueItems(b *pgx.Batch, rows []genRow) {
	var acct []int64
	var ids, gens []string
	var data [][]byte
	for i := range rows {
		g := &rows[i].g
		for _, it := range g.Items {
			acct, ids, gens, data = append(acct, g.AccountID), append(ids, it.ID), append(gens, g.ID), append(data, it.Data)
		}
	}
	if len(ids) == 0 {
		return
	}
	b.Queue(`INSERT INTO output_items (account_id, id, generation_id, data)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[])
		ON CONFLICT DO NOTHING`, acct, ids, gens, data)
}

// OutputItems returns the account's kept items among ids, by id; ids it does
// not hold (never kept, another account's, or pruned by retention) are
// absent. An item of a call this instance answered is found even if the
// ledger had not committed it yet.
func (s *Store) OutputItems(ctx context.Context, accountID int64, ids []string) (map[string][]byte, error) {
	return lookUpItems(ctx, ids, s.Sync, 0, func(ctx context.Context, ids []string) (map[string][]byte, error) {
		ctx, cancel := s.readCtx(ctx)
		defer cancel()
		args := make([]any, 0, len(ids)+1)
		args = append(args, accountID)
		for _, id := range ids {
			args = append(args, id)
		}
		rows, err := s.r.QueryContext(ctx, `SELECT id, data FROM output_items WHERE account_id = ? AND id IN (?`+
			strings.Repeat(", ?", len(ids)-1)+`)`, args...)
		if err != nil {
			return nil, readErr(ctx, fmt.Errorf("output items: %w", err))
		}
		defer rows.Close()
		found := make(map[string][]byte, len(ids))
		for rows.Next() {
			var id string
			var data []byte
			if err := rows.Scan(&id, &data); err != nil {
				return nil, readErr(ctx, fmt.Errorf("output items: %w", err))
			}
			found[id] = data
		}
		return found, readErr(ctx, rows.Err())
	})
}

// OutputItems returns the account's kept items among ids (see
// Store.OutputItems). An item another instance recorded moments ago is
// looked up once more after itemRetry.
func (p *Postgres) OutputItems(ctx context.Context, accountID int64, ids []string) (map[string][]byte, error) {
	return lookUpItems(ctx, ids, p.Sync, itemRetry, func(ctx context.Context, ids []string) (map[string][]byte, error) {
		ctx, cancel := p.readCtx(ctx)
		defer cancel()
		rows, err := p.r.Query(ctx, `SELECT id, data FROM output_items WHERE account_id = $1 AND id = ANY($2)`, accountID, ids)
		if err != nil {
			return nil, p.readErr(ctx, fmt.Errorf("output items: %w", err))
		}
		found := make(map[string][]byte, len(ids))
		var id string
		var data []byte
		_, err = pgx.ForEachRow(rows, []any{&id, &data}, func() error {
			found[id] = data
			data = nil // the next row scans into a slice of its own
			return nil
		})
		if err != nil {
			return nil, p.readErr(ctx, fmt.Errorf("output items: %w", err))
		}
		return found, nil
	})
}

// lookUpItems runs query for ids, then, for those it did not find, commits
// this instance's pending records (sync) and asks again, and on a store
// shared with other instances (retry > 0) once more after retry.
func lookUpItems(ctx context.Context, ids []string, sync func(context.Context) error, retry time.Duration,
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
