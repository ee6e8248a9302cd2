package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/svcgw/svcgw/store"
)

// queueItems queues the insert of a batch's items (PostgreSQL's
// CommitBatch), if it has any.
func queueItems(b *pgx.Batch, rows []store.GenRow) {
	var acct []int64
	var ids, gens []string
	var data [][]byte
	for i := range rows {
		g := &rows[i].Gen
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

// OutputItems returns the account's kept items among ids (see
// Store.OutputItems). An item another instance recorded moments ago is
// looked up once more after ItemRetry.
func (p *Store) OutputItems(ctx context.Context, accountID int64, ids []string) (map[string][]byte, error) {
	return store.LookUpItems(ctx, ids, p.Sync, store.ItemRetry, func(ctx context.Context, ids []string) (map[string][]byte, error) {
		ctx, cancel := p.ReadCtx(ctx)
		defer cancel()
		rows, err := p.r.Query(ctx, `SELECT id, data FROM output_items WHERE account_id = $1 AND id = ANY($2)`, accountID, ids)
		if err != nil {
			return nil, p.ReadErr(ctx, fmt.Errorf("output items: %w", err))
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
			return nil, p.ReadErr(ctx, fmt.Errorf("output items: %w", err))
		}
		return found, nil
	})
}
