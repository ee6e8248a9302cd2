package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// TestListGenerations_PlanReadsTheFilterIndexOnPostgres is the same on
// PostgreSQL, on a ledger of skewed applications and request types whose
// statistics are fresh. The planner would rightly read a table of a few
// hundred rows whole and sort it, so sequential scans and sorts are made
// to cost more than anything (not forbidden: a plan that needs one still
// shows it, and fails).
func TestListGenerations_PlanReadsTheFilterIndexOnPostgres(t *testing.T) {
	p := openTestPostgres(t, pgtest.DSN(t), store.Options{})
	_, k, _ := storetest.NewAccount(t, p, "acme", "10")
	for i := range 400 {
		g := storetest.Gen(t, fmt.Sprint("g", i), k, "0.01")
		g.Application = fmt.Sprintf("app-%d", i%40) // each 2.5%
		g.RequestType = []string{"pro", "pro", "pro", "code"}[i%4]
		p.RecordGeneration(g)
	}
	ctx := context.Background()
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.w.Exec(ctx, `ANALYZE generations`); err != nil {
		t.Fatal(err)
	}
	for _, c := range storetest.ListCases() {
		args := c.Args()
		for i, a := range args {
			switch a {
			case 1:
				args[i] = k.AccountID
			case 2: // the cursor: after every row, so that all are estimated
				args[i] = int64(1) << 62
			case "app":
				args[i] = "app-7" // a value the statistics know, rarer than the type
			}
		}
		plan := pgPlan(t, p, pgListSQL(c.Cursor, c.RequestType, c.Application), args...)
		var want string
		switch {
		case c.Application:
			want = "Index Scan Backward using generations_account_application on generations g"
		case c.RequestType:
			want = "Index Scan Backward using generations_account_request_type on generations g"
		default:
			want = "Index Scan Backward using generations_account_created on generations g"
		}
		if !strings.Contains(plan, want) {
			t.Errorf("%v: plan is not an %s:\n%s", c, want, plan)
		}
		if strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%v: plan sorts or scans a table:\n%s", c, plan)
		}
	}
}

// pgPlan is PostgreSQL's EXPLAIN of query, with sequential scans and sorts
// disabled (see TestListGenerations_PlanReadsTheFilterIndexOnPostgres).
func pgPlan(t *testing.T, p *Store, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := p.r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, set := range []string{`SET LOCAL enable_seqscan = off`, `SET LOCAL enable_sort = off`} {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(ctx, `EXPLAIN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
