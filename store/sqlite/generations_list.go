package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/svcgw/svcgw/store"
)

// ListGenerations returns a page of the account's generations, newest
// first (by created_at, then by insertion order among equal times), and
// whether older ones follow. Only the account's own rows are read: the scan
// walks an index backwards from the cursor, so a page costs the same at any
// depth of history. Unfiltered, the index is (account_id, created_at);
// filtered, it is the filter's own, (account_id, application or
// request_type, created_at) (migration 0005), so a page of a rare or absent
// value costs what any page does. With both filters the index of the rarer
// value is read and the other tested on its rows (rarerIndex): such a
// page's walk is bounded by that value's generations, not the account's,
// and is long only when both values are common and the pair is rare.
//
// It reads what is committed: call Sync first to see generations recorded
// just before.
func (s *Store) ListGenerations(ctx context.Context, accountID int64, q store.ListQuery) ([]store.ListedGeneration, bool, error) {
	limit, err := q.PageLimit()
	if err != nil {
		return nil, false, err
	}
	// One read transaction, so the cursor and the page come from one
	// snapshot.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, false, fmt.Errorf("list generations: begin: %w", err)
	}
	defer tx.Rollback()

	args := []any{store.ReviewEndUser, accountID}
	if q.Before != "" {
		var created, rowid int64
		err := tx.QueryRowContext(ctx,
			`SELECT created_at, rowid FROM generations WHERE id = ? AND account_id = ?`,
			q.Before, accountID).Scan(&created, &rowid)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, fmt.Errorf("list generations: cursor %q: %w", q.Before, store.ErrNotFound)
		}
		if err != nil {
			return nil, false, fmt.Errorf("list generations: cursor: %w", err)
		}
		args = append(args, created, created, rowid)
	}
	if q.RequestType != "" {
		args = append(args, q.RequestType)
	}
	if q.Application != "" {
		args = append(args, q.Application)
	}
	args = append(args, limit+1)
	index := listIndexFor(q)
	if q.RequestType != "" && q.Application != "" {
		if index, err = rarerIndex(ctx, tx, accountID, q); err != nil {
			return nil, false, err
		}
	}
	rows, err := tx.QueryContext(ctx, listSQL(q.Before != "", q.RequestType != "", q.Application != "", index), args...)
	if err != nil {
		return nil, false, fmt.Errorf("list generations: %w", err)
	}
	defer rows.Close()
	return store.ScanListed(rows, limit)
}

// The indexes a listing reads (see listSQL).
const (
	indexByAccount     = "generations_account_created"
	indexByApplication = "generations_account_application"
	indexByRequestType = "generations_account_request_type"
)

// listIndexFor is the index a listing of q reads when it has at most one
// filter.
func listIndexFor(q store.ListQuery) string {
	switch {
	case q.Application != "":
		return indexByApplication
	case q.RequestType != "":
		return indexByRequestType
	}
	return indexByAccount
}

// rareProbe bounds rarerIndex's counts: counting this many entries of an
// index (which a count reads alone, not the table) takes about a
// millisecond.
const rareProbe = 10_000

// rarerIndex picks, for a listing filtered by both application and request
// type, the index of the value with fewer generations in the account, so
// that the walk tests the other filter on as few rows as may be: the
// application's when neither has fewer than rareProbe. SQLite keeps no
// statistics of its own here to choose by (PostgreSQL's planner does).
func rarerIndex(ctx context.Context, tx *sql.Tx, accountID int64, q store.ListQuery) (string, error) {
	count := func(index, column, value string) (int, error) {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM generations INDEXED BY `+index+`
			WHERE account_id = ? AND `+column+` = ? LIMIT ?)`, accountID, value, rareProbe).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("list generations: count %s: %w", column, err)
		}
		return n, nil
	}
	apps, err := count(indexByApplication, "application", q.Application)
	if err != nil {
		return "", err
	}
	types, err := count(indexByRequestType, "request_type", q.RequestType)
	if err != nil {
		return "", err
	}
	if types < apps {
		return indexByRequestType, nil
	}
	return indexByApplication, nil
}

// listSQL is the text of a ListGenerations page. Its placeholders are, in
// order: the review's end user, the account, then, with a cursor, its
// created_at twice and its rowid, then the request type and the
// application when filtered, and the limit.
//
// The page is read from index, named (INDEXED BY): the account's
// unfiltered, the filter's with one filter, and with both the one
// rarerIndex picks, which SQLite, with no statistics, would not.
func listSQL(cursor, requestType, application bool, index string) string {
	from := `generations g INDEXED BY ` + index
	where := `g.account_id = ?`
	if cursor {
		// The range on created_at is what the index serves; the rowid test
		// only orders the rows sharing the cursor's millisecond.
		where += ` AND g.created_at <= ? AND (g.created_at < ? OR g.rowid < ?)`
	}
	if requestType {
		where += ` AND g.request_type = ?`
	}
	if application {
		where += ` AND g.application = ?`
	}
	return `SELECT ` + store.ListColumns + `
	 FROM ` + from + `
	 LEFT JOIN feedback r ON r.account_id = g.account_id AND r.generation_id = g.id AND r.end_user = ?
	 WHERE ` + where + `
	 ORDER BY g.created_at DESC, g.rowid DESC
	 LIMIT ?`
}
