package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
)

// CopyCheck is one figure svcgw db copy compares between the SQLite
// database and its PostgreSQL copy.
type CopyCheck struct {
	Table, What  string // e.g. "generations", "SUM(cost_micros)"
	Source, Dest int64
}

// OK reports whether the copy has the source's figure.
func (c CopyCheck) OK() bool { return c.Source == c.Dest }

// CopyResult describes a copy CopyFromSQLite made.
type CopyResult struct {
	Checks []CopyCheck
	Took   time.Duration
}

// copyTable is how one table is copied: its columns (the same in both
// schemas), the source's order, and which columns are booleans (0 or 1 in
// SQLite).
type copyTable struct {
	name, order string
	cols        []string
	bools       map[string]bool
}

// copyTables are svcgw's tables in an order their references allow.
var copyTables = []copyTable{
	{name: "accounts", order: "id", cols: []string{"id", "name", "balance_micros", "total_used_micros", "daily_cap_micros", "monthly_cap_micros", "rpm_limit", "tpm_limit", "created_at"}},
	{name: "api_keys", order: "rowid", cols: []string{"id", "account_id", "name", "secret_sha256", "daily_cap_micros", "monthly_cap_micros", "rpm_limit", "tpm_limit", "created_at", "revoked_at", "expires_at"}},
	{name: "credit_transactions", order: "id", cols: []string{"id", "account_id", "amount_micros", "note", "created_at",
		"reference", "actor", "balance_after_micros", "idempotency_key", "request_sha256"}},
	{name: "generations", order: "rowid", bools: map[string]bool{"streamed": true}, cols: []string{
		"id", "account_id", "key_id", "application", "surface", "model", "request_type", "tier",
		"streamed", "finish_reason", "prompt_tokens", "completion_tokens",
		"cached_prompt_tokens", "cache_creation_tokens", "reasoning_tokens",
		"cost_micros", "latency_ms", "generation_time_ms", "created_at"}},
	{name: "spend_daily", order: "account_id, key_id, day", cols: []string{"account_id", "key_id", "day", "requests", "cost_micros"}},
	{name: "usage_daily", order: "account_id, day, key_id, application, request_type", cols: []string{
		"account_id", "day", "key_id", "application", "request_type", "requests", "input_tokens", "output_tokens",
		"cached_input_tokens", "cache_write_tokens", "reasoning_tokens", "cost_micros"}},
	{name: "usage_periods", order: "account_id, axis, span, first_day, bucket", cols: []string{
		"account_id", "axis", "span", "first_day", "bucket", "requests", "input_tokens", "output_tokens",
		"cached_input_tokens", "cache_write_tokens", "reasoning_tokens", "cost_micros"}},
	{name: "feedback", order: "id", cols: []string{"id", "account_id", "generation_id", "end_user", "rating", "comment", "labels", "created_at", "updated_at"}},
	{name: "seal_keys", order: "id", cols: []string{"id", "secret", "created_at"}},
	{name: "output_items", order: "account_id, id", cols: []string{"account_id", "id", "generation_id", "data"}},
	{name: "admin_tokens", order: "rowid", cols: []string{"id", "name", "secret_sha256", "read_only", "created_at", "revoked_at"}},
	{name: "audit_log", order: "id", cols: []string{"id", "created_at", "actor", "action", "target", "before", "after"}},
}

// copySums are the sums compared after a copy, besides every table's rows.
var copySums = []struct{ table, expr string }{
	{"accounts", "SUM(balance_micros)"},
	{"accounts", "SUM(total_used_micros)"},
	{"credit_transactions", "SUM(amount_micros)"},
	{"generations", "SUM(cost_micros)"},
	{"generations", "SUM(prompt_tokens)"},
	{"generations", "SUM(completion_tokens)"},
	{"spend_daily", "SUM(requests)"},
	{"spend_daily", "SUM(cost_micros)"},
	{"usage_daily", "SUM(requests)"},
	{"usage_daily", "SUM(cost_micros)"},
	{"usage_periods", "SUM(cost_micros)"},
	{"ledger_upkeep", "MAX(pruned_before)"},
}

// CopyFromSQLite copies the SQLite database at from, every row of every
// table (accounts, keys, credits, generations, spend, roll-ups, feedback,
// sealing keys, kept output items, retention's mark), into the PostgreSQL database dsn names,
// in one transaction, and then compares every table's rows and the sums of
// its money and tokens between the two. The PostgreSQL database must hold
// no svcgw data yet (its schema is created if needed); the SQLite one must
// not be served meanwhile (its serve lock is held during the copy), and is
// brought up to date first as svcgw serve would, its usage roll-ups
// backfilled if an older version made it. A copy that does not verify is
// an error (the figures are in the result all the same).
func CopyFromSQLite(ctx context.Context, from, dsn string, log *slog.Logger) (CopyResult, error) {
	start := time.Now()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lock, err := sqlite.LockServe(from)
	if err != nil {
		return CopyResult{}, fmt.Errorf("%s: %w; stop svcgw serve on it before copying", from, err)
	}
	defer lock.Release()
	src, err := sqlite.Open(ctx, from, store.Options{Existing: true, Logger: log})
	if err != nil {
		return CopyResult{}, err
	}
	defer src.Close()
	if err := src.CompleteBackfill(ctx, log); err != nil {
		return CopyResult{}, fmt.Errorf("roll up the generations of %s: %w", from, err)
	}
	dst, err := Open(ctx, dsn, store.Options{Logger: log})
	if err != nil {
		return CopyResult{}, err
	}
	defer dst.Close()

	err = pgx.BeginFunc(ctx, dst.w, func(tx pgx.Tx) error {
		var n int64
		if err := tx.QueryRow(ctx, `SELECT (SELECT COUNT(*) FROM accounts) + (SELECT COUNT(*) FROM generations) + (SELECT COUNT(*) FROM seal_keys)`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%s already holds svcgw data: copy into an empty database: %w", dst.dsn, store.ErrConflict)
		}
		for _, t := range copyTables {
			if err := copyRows(ctx, src, tx, t); err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
		}
		var pruned int64
		if err := src.Readers().QueryRow(ctx, `SELECT pruned_before FROM ledger_upkeep WHERE id = 1`).Scan(&pruned); err != nil {
			return fmt.Errorf("copy ledger_upkeep: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE ledger_upkeep SET pruned_before = $1 WHERE id = 1`, pruned); err != nil {
			return fmt.Errorf("copy ledger_upkeep: %w", err)
		}
		// The identities go on after the copied ids.
		for _, t := range []string{"accounts", "credit_transactions", "feedback", "audit_log"} {
			if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('`+t+`', 'id'), COALESCE((SELECT MAX(id) FROM `+t+`), 0) + 1, false)`); err != nil {
				return fmt.Errorf("copy %s: identity: %w", t, err)
			}
		}
		return nil
	})
	if err != nil {
		return CopyResult{}, fmt.Errorf("copy %s to %s: %w", from, dst.dsn, err)
	}

	res := CopyResult{}
	figure := func(table, expr string) error {
		c := CopyCheck{Table: table, What: expr}
		q := `SELECT COALESCE(` + expr + `, 0) FROM ` + table
		if err := src.Readers().QueryRow(ctx, q).Scan(&c.Source); err != nil {
			return fmt.Errorf("verify %s %s in %s: %w", table, expr, from, err)
		}
		if err := dst.r.QueryRow(ctx, q).Scan(&c.Dest); err != nil {
			return fmt.Errorf("verify %s %s in %s: %w", table, expr, dst.dsn, err)
		}
		res.Checks = append(res.Checks, c)
		return nil
	}
	for _, t := range copyTables {
		if err := figure(t.name, "COUNT(*)"); err != nil {
			return res, err
		}
	}
	for _, s := range copySums {
		if err := figure(s.table, s.expr); err != nil {
			return res, err
		}
	}
	res.Took = time.Since(start)
	var bad []string
	for _, c := range res.Checks {
		if !c.OK() {
			bad = append(bad, fmt.Sprintf("%s %s: %d in the source, %d in the copy", c.Table, c.What, c.Source, c.Dest))
		}
	}
	if len(bad) > 0 {
		return res, fmt.Errorf("the copy does not match its source: %s", strings.Join(bad, "; "))
	}
	return res, nil
}

// copyRows streams table t from src into tx with COPY.
func copyRows(ctx context.Context, src *sqlite.Store, tx pgx.Tx, t copyTable) error {
	rows, err := src.Readers().Query(ctx, `SELECT `+strings.Join(t.cols, ", ")+` FROM `+t.name+` ORDER BY `+t.order)
	if err != nil {
		return err
	}
	defer rows.Close()
	vals := make([]any, len(t.cols))
	ptrs := make([]any, len(t.cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromFunc(func() ([]any, error) {
		if !rows.Next() {
			return nil, rows.Err()
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]any, len(vals))
		for i, v := range vals {
			if t.bools[t.cols[i]] {
				n, ok := v.(int64)
				if !ok {
					return nil, fmt.Errorf("column %s: %v is not 0 or 1", t.cols[i], v)
				}
				v = n != 0
			}
			row[i] = v
		}
		return row, nil
	}))
	return err
}
