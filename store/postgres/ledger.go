package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/svcgw/svcgw/store"
)

// The ledger on PostgreSQL. A batch is one implicit transaction of a few
// statements sent in one round trip (a pgx.Batch): lock the batch's
// accounts in id order, insert the generations, debit the accounts, upsert
// spend_daily and the roll-ups, and take the charges off this instance's
// leases. Every statement carries the whole batch as arrays (unnest), so
// the number of statements does not grow with the batch.
//
// Locking the accounts first, in id order, is what keeps several instances
// committing at once from deadlocking: every ledger transaction, lease
// grant and credit takes the rows of its accounts before anything else,
// and every other row a batch writes (roll-ups, spend, leases) belongs to
// one of them. Two batches that share an account take turns; batches of
// different accounts never wait for each other.

// pgInsertGenerations inserts a batch's generations, one array per column,
// in the arrays' order (seq follows it). No foreign key checks each row's
// account and key (migration 0004): the writer has checked them before
// (ledgerRefs).
const pgInsertGenerations = `INSERT INTO generations (
	id, account_id, key_id, application, surface, model, request_type, tier,
	streamed, finish_reason, prompt_tokens, completion_tokens,
	cached_prompt_tokens, cache_creation_tokens, reasoning_tokens,
	cost_micros, latency_ms, generation_time_ms, created_at)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
	$9::boolean[], $10::text[], $11::bigint[], $12::bigint[],
	$13::bigint[], $14::bigint[], $15::bigint[],
	$16::bigint[], $17::bigint[], $18::bigint[], $19::bigint[])`

// errNoReference refuses a generation whose account or key does not exist:
// a row refused as such (Store.Unstorable), as a foreign key refused it
// before migration 0004.
var errNoReference = errors.New("does not exist")

// ledgerRefs are the accounts and keys the ledger writer has seen in the
// database. It checks every generation's account and key against them
// before a commit, instead of the two foreign keys PostgreSQL checked row
// by row (a query and a row lock of their own for each reference: about a
// quarter of PostgreSQL's CPU per committed generation). svcgw never
// deletes an account or a key (a key is revoked, its row kept), so one
// seen once exists for good, and in steady state the check asks the
// database nothing: only a batch with an account or key the writer has not
// seen yet costs one query, in the round trip before the commit. Only the
// ledger writer uses it.
type ledgerRefs struct {
	accounts map[int64]struct{}
	keys     map[string]struct{}
}

// check returns an error wrapping errNoReference when a row names an
// account or key that does not exist, after asking the database about
// those it has not seen; any other error is the database's.
func (r *ledgerRefs) check(ctx context.Context, db *pgxpool.Pool, rows []store.GenRow) error {
	if r.accounts == nil {
		r.accounts, r.keys = make(map[int64]struct{}), make(map[string]struct{})
	}
	var accts []int64 // not seen yet, repeats and all
	var keys []string
	for i := range rows {
		g := &rows[i].Gen
		if _, ok := r.accounts[g.AccountID]; !ok {
			accts = append(accts, g.AccountID)
		}
		if _, ok := r.keys[g.KeyID]; g.KeyID != "" && !ok {
			keys = append(keys, g.KeyID)
		}
	}
	if len(accts) == 0 && len(keys) == 0 {
		return nil
	}
	var b pgx.Batch
	b.Queue(`SELECT id FROM accounts WHERE id = ANY($1::bigint[])`, accts).Query(func(rows pgx.Rows) error {
		id, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		for _, a := range id {
			r.accounts[a] = struct{}{}
		}
		return err
	})
	b.Queue(`SELECT id FROM api_keys WHERE id = ANY($1::text[])`, keys).Query(func(rows pgx.Rows) error {
		id, err := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, k := range id {
			r.keys[k] = struct{}{}
		}
		return err
	})
	if err := db.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("ledger: look up accounts and keys: %w", err)
	}
	for i := range rows {
		g := &rows[i].Gen
		if _, ok := r.accounts[g.AccountID]; !ok {
			return fmt.Errorf("ledger: insert generation %q: account %d %w", g.ID, g.AccountID, errNoReference)
		}
		if _, ok := r.keys[g.KeyID]; g.KeyID != "" && !ok {
			return fmt.Errorf("ledger: insert generation %q: key %q %w", g.ID, g.KeyID, errNoReference)
		}
	}
	return nil
}

const pgLockAccounts = `SELECT id FROM accounts WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`

const pgDebit = `UPDATE accounts a SET balance_micros = a.balance_micros - d.cost, total_used_micros = a.total_used_micros + d.cost
FROM unnest($1::bigint[], $2::bigint[]) AS d(id, cost) WHERE a.id = d.id`

const pgSpend = `INSERT INTO spend_daily (account_id, key_id, day, requests, cost_micros)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::bigint[], $5::bigint[])
ON CONFLICT (account_id, key_id, day) DO UPDATE SET
	requests = spend_daily.requests + excluded.requests,
	cost_micros = spend_daily.cost_micros + excluded.cost_micros`

// pgUpsertSums builds the roll-up upsert of table, whose key columns are
// keyCols with their array types.
func pgUpsertSums(table string, keyCols, keyTypes []string) string {
	sums := []string{"requests", "input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens", "reasoning_tokens", "cost_micros"}
	var params, set []string
	for i, t := range keyTypes {
		params = append(params, fmt.Sprintf("$%d::%s[]", i+1, t))
	}
	for i, c := range sums {
		params = append(params, fmt.Sprintf("$%d::bigint[]", len(keyTypes)+i+1))
		set = append(set, fmt.Sprintf("%s = %s.%s + excluded.%s", c, table, c, c))
	}
	return `INSERT INTO ` + table + ` (` + strings.Join(keyCols, ", ") + `, ` + strings.Join(sums, ", ") + `)
SELECT * FROM unnest(` + strings.Join(params, ", ") + `)
ON CONFLICT (` + strings.Join(keyCols, ", ") + `) DO UPDATE SET ` + strings.Join(set, ", ")
}

var (
	pgUpsertDaily = pgUpsertSums("usage_daily",
		[]string{"account_id", "day", "key_id", "application", "request_type"},
		[]string{"bigint", "integer", "text", "text", "text"})
	pgUpsertPeriods = pgUpsertSums("usage_periods",
		[]string{"account_id", "axis", "span", "first_day", "bucket"},
		[]string{"bigint", "text", "text", "integer", "text"})
)

// sumColumns are the seven sums of the roll-up rows, as arrays.
type sumColumns struct {
	requests, input, output, cached, cacheWrite, reasoning, cost []int64
}

func (c *sumColumns) add(v store.UsageSums) {
	c.requests = append(c.requests, v.Requests)
	c.input = append(c.input, v.Input)
	c.output = append(c.output, v.Output)
	c.cached = append(c.cached, v.Cached)
	c.cacheWrite = append(c.cacheWrite, v.CacheWrite)
	c.reasoning = append(c.reasoning, v.Reasoning)
	c.cost = append(c.cost, v.Cost)
}

func (c *sumColumns) args() []any {
	return []any{c.requests, c.input, c.output, c.cached, c.cacheWrite, c.reasoning, c.cost}
}

// CommitBatch commits rows in one implicit transaction (see above). A
// failure before the batch is sent, or one the server reports, means
// nothing was written; a failure of the connection after it was sent may
// hide a commit that took effect, and wraps ErrUncertain.
func (p *Store) CommitBatch(ctx context.Context, rows []store.GenRow, agg *store.BatchSums) error {
	agg.Sum(rows)
	n := len(rows)
	gid := make([]string, 0, n)
	acct := make([]int64, 0, n)
	key := make([]*string, 0, n) // NULL for none
	streamed := make([]bool, 0, n)
	appl, surf, model := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	typ, tier, fin := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	prompt, completion, cached := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	cacheWrite, reasoning, cost := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	latency, genTime, created := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	leases := make(map[int64]int64)
	for i := range rows {
		r := &rows[i]
		g := &r.Gen
		gid = append(gid, g.ID)
		acct = append(acct, g.AccountID)
		if g.KeyID != "" {
			key = append(key, &g.KeyID)
		} else {
			key = append(key, nil)
		}
		appl = append(appl, g.Application)
		surf = append(surf, g.Surface)
		model = append(model, g.Model)
		typ = append(typ, g.RequestType)
		tier = append(tier, g.Tier)
		streamed = append(streamed, g.Streamed)
		fin = append(fin, g.FinishReason)
		prompt = append(prompt, int64(g.PromptTokens))
		completion = append(completion, int64(g.CompletionTokens))
		cached = append(cached, int64(g.CachedPromptTokens))
		cacheWrite = append(cacheWrite, int64(g.CacheCreationTokens))
		reasoning = append(reasoning, int64(g.ReasoningTokens))
		cost = append(cost, r.CostMicros)
		latency = append(latency, g.LatencyMS)
		genTime = append(genTime, g.GenerationTimeMS)
		created = append(created, r.CreatedMS)
		if r.Lease != 0 {
			leases[r.Lease] += r.CostMicros
		}
		if r.KeyLease != 0 {
			leases[r.KeyLease] += r.CostMicros
		}
	}

	accounts := make([]int64, 0, len(agg.Debits))
	for a := range agg.Debits {
		accounts = append(accounts, a)
	}
	slices.Sort(accounts)
	debits := make([]int64, len(accounts))
	for i, a := range accounts {
		debits[i] = agg.Debits[a]
	}

	sk := make([]store.SpendDay, 0, len(agg.Spend))
	for k := range agg.Spend {
		sk = append(sk, k)
	}
	slices.SortFunc(sk, func(a, b store.SpendDay) int {
		return cmp.Or(cmp.Compare(a.Account, b.Account), strings.Compare(a.Key, b.Key), cmp.Compare(a.Day, b.Day))
	})
	var (
		spAcct, spReq, spCost []int64
		spKey                 []string
		spDay                 []int32
	)
	for _, k := range sk {
		v := agg.Spend[k]
		spAcct, spKey, spDay = append(spAcct, k.Account), append(spKey, k.Key), append(spDay, k.Day)
		spReq, spCost = append(spReq, v.Requests), append(spCost, v.Cost)
	}

	var b pgx.Batch
	b.Queue(pgLockAccounts, accounts)
	b.Queue(pgInsertGenerations, gid, acct, key, appl, surf, model, typ, tier,
		streamed, fin, prompt, completion, cached, cacheWrite, reasoning, cost, latency, genTime, created)
	queueItems(&b, rows)
	b.Queue(pgDebit, accounts, debits)
	b.Queue(pgSpend, spAcct, spKey, spDay, spReq, spCost)
	queueRollups(&b, &agg.Rollup)
	if len(leases) > 0 {
		queueLeaseCharges(&b, leases)
	}

	if err := p.CommitHook(); err != nil {
		return fmt.Errorf("ledger: commit: %w", err)
	}
	if err := p.refs.check(ctx, p.w, rows); err != nil {
		return err
	}
	conn, err := p.w.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("ledger: connect: %w", err)
	}
	defer conn.Release()
	br := conn.SendBatch(ctx, &b)
	var first error
	for i := 0; i < b.Len(); i++ {
		if _, err := br.Exec(); err != nil && first == nil {
			first = err
		}
	}
	if err := br.Close(); err != nil && first == nil {
		first = err
	}
	if first == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(first, &pe) {
		if n == 1 {
			return fmt.Errorf("ledger: insert generation %q: %w", rows[0].Gen.ID, first)
		}
		return fmt.Errorf("ledger: commit %d generations: %w", n, first)
	}
	// The connection failed with the batch sent: the server may have
	// committed it.
	return fmt.Errorf("ledger: commit: %w: %w", store.ErrUncertain, first)
}

// queueRollups queues the upserts of rs's roll-up rows, in primary-key
// order (see RollupSums.write).
func queueRollups(b *pgx.Batch, rs *store.RollupSums) {
	dks := make([]store.DailyKey, 0, len(rs.Daily))
	for k := range rs.Daily {
		dks = append(dks, k)
	}
	slices.SortFunc(dks, store.CompareDaily)
	var (
		acct      []int64
		day       []int32
		key, app  []string
		typ       []string
		dailySums sumColumns
	)
	for _, k := range dks {
		acct, day, key, app, typ = append(acct, k.Account), append(day, k.Day), append(key, k.Key), append(app, k.App), append(typ, k.Type)
		dailySums.add(rs.Daily[k])
	}
	if len(dks) > 0 {
		b.Queue(pgUpsertDaily, append([]any{acct, day, key, app, typ}, dailySums.args()...)...)
	}

	pks := make([]store.PeriodKey, 0, len(rs.Periods))
	for k := range rs.Periods {
		pks = append(pks, k)
	}
	slices.SortFunc(pks, store.ComparePeriod)
	var (
		pAcct              []int64
		axis, span, bucket []string
		first              []int32
		periodSums         sumColumns
	)
	for _, k := range pks {
		pAcct, axis, span, first, bucket = append(pAcct, k.Account), append(axis, k.Axis), append(span, k.Span), append(first, k.First), append(bucket, k.Bucket)
		periodSums.add(rs.Periods[k])
	}
	if len(pks) > 0 {
		b.Queue(pgUpsertPeriods, append([]any{pAcct, axis, span, first, bucket}, periodSums.args()...)...)
	}
}

// StoredRow reads the account, cost and creation time of the stored
// generation id.
func (p *Store) StoredRow(ctx context.Context, id string) (acct, cost, created int64, err error) {
	err = p.w.QueryRow(ctx, `SELECT account_id, cost_micros, created_at FROM generations WHERE id = $1`, id).
		Scan(&acct, &cost, &created)
	return acct, cost, created, err
}

// ListGenerations returns a page of the account's generations, newest
// first (see Store.ListGenerations). Among generations of the same
// millisecond, the one inserted last comes first.
func (p *Store) ListGenerations(ctx context.Context, accountID int64, q store.ListQuery) ([]store.ListedGeneration, bool, error) {
	limit, err := q.PageLimit()
	if err != nil {
		return nil, false, err
	}
	args := []any{store.ReviewEndUser, accountID}
	if q.Before != "" {
		// A row never changes once written, so the cursor read and the
		// page need not share a snapshot.
		var created, seq int64
		err := p.r.QueryRow(ctx, `SELECT created_at, seq FROM generations WHERE id = $1 AND account_id = $2`,
			q.Before, accountID).Scan(&created, &seq)
		if noRows(err) {
			return nil, false, fmt.Errorf("list generations: cursor %q: %w", q.Before, store.ErrNotFound)
		}
		if err != nil {
			return nil, false, fmt.Errorf("list generations: cursor: %w", err)
		}
		args = append(args, created, seq)
	}
	if q.RequestType != "" {
		args = append(args, q.RequestType)
	}
	if q.Application != "" {
		args = append(args, q.Application)
	}
	args = append(args, limit+1)
	rows, err := p.r.Query(ctx, pgListSQL(q.Before != "", q.RequestType != "", q.Application != ""), args...)
	if err != nil {
		return nil, false, fmt.Errorf("list generations: %w", err)
	}
	defer rows.Close()
	return store.ScanListed(rows, limit)
}

// pgListSQL is the text of a Store.ListGenerations page, with the
// placeholders of listSQL: the review's end user, the account, then, with
// a cursor, its created_at and seq, then the request type and the
// application when filtered, and the limit. A filtered page is read from
// the index of its filter (migration 0002), (account_id, application or
// request_type, created_at, seq), backwards from the cursor; with both
// filters the planner picks the one its statistics say is rarer.
func pgListSQL(cursor, requestType, application bool) string {
	n := 2
	next := func() string { n++; return fmt.Sprint("$", n) }
	where := `g.account_id = $2`
	if cursor {
		where += ` AND (g.created_at, g.seq) < (` + next() + `, ` + next() + `)`
	}
	if requestType {
		where += ` AND g.request_type = ` + next()
	}
	if application {
		where += ` AND g.application = ` + next()
	}
	return `SELECT ` + store.ListColumns + `
	 FROM generations g
	 LEFT JOIN feedback r ON r.account_id = g.account_id AND r.generation_id = g.id AND r.end_user = $1
	 WHERE ` + where + `
	 ORDER BY g.created_at DESC, g.seq DESC
	 LIMIT ` + next()
}
