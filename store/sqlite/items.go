package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/svcgw/svcgw/store"
)

// insertItemSQL keeps one item; a batch committed again after an uncertain
// commit finds its items there already.
const insertItemSQL = `INSERT INTO output_items (account_id, id, generation_id, data) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`

// insertItems inserts the items of a batch's generations in tx (SQLite's
// CommitBatch). The statement is not prepared: a prepare on the writer
// would wait for the connection tx holds, and a batch has few items (only
// streamed Responses calls keep any).
func (s *Store) insertItems(ctx context.Context, tx *sql.Tx, rows []store.GenRow) error {
	for i := range rows {
		g := &rows[i].Gen
		for _, it := range g.Items {
			if _, err := tx.ExecContext(ctx, insertItemSQL, g.AccountID, it.ID, g.ID, it.Data); err != nil {
				return fmt.Errorf("ledger: insert item %q of generation %q: %w", it.ID, g.ID, err)
			}
		}
	}
	return nil
}

// OutputItems returns the account's kept items among ids, by id; ids it does
// not hold (never kept, another account's, or pruned by retention) are
// absent. An item of a call this instance answered is found even if the
// ledger had not committed it yet.
func (s *Store) OutputItems(ctx context.Context, accountID int64, ids []string) (map[string][]byte, error) {
	return store.LookUpItems(ctx, ids, s.Sync, 0, func(ctx context.Context, ids []string) (map[string][]byte, error) {
		ctx, cancel := s.ReadCtx(ctx)
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
