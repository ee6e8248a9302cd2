package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/pgtest"
)

// listIDs returns the ids of a page.
func listIDs(page []ListedGeneration) []string {
	ids := make([]string, len(page))
	for i, l := range page {
		ids[i] = l.ID
	}
	return ids
}

func TestListGenerations_NewestFirstPagedByID(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, clock := newTestDB(t, open)
		ctx := context.Background()
		_, k, _ := newAccount(t, s, "acme", "10")
		_, other, _ := newAccount(t, s, "other", "10")

		// Seven calls, three of them in the same millisecond (recorded in id
		// order), with another account's calls interleaved; ids deliberately
		// do not sort by time, as gateway ids of different surfaces don't.
		start := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
		var want []string // newest first
		record := func(at time.Time, id string, key Key) {
			clock.Set(at)
			s.RecordGeneration(gen(t, id, key, "0.01"))
			if key.ID == k.ID {
				want = append([]string{id}, want...)
			}
		}
		record(start, "msg_1", k)
		record(start.Add(time.Second), "chatcmpl-2", k)
		record(start.Add(time.Second), "x-1", other)
		record(start.Add(2*time.Second), "resp_3", k)
		record(start.Add(2*time.Second), "gw4", k)
		record(start.Add(2*time.Second), "chatcmpl-5", k)
		record(start.Add(3*time.Second), "x-2", other)
		record(start.Add(4*time.Second), "msg_6", k)
		record(start.Add(5*time.Second), "a7", k)
		is.NoErr(s.Sync(ctx))

		t.Run("one page", func(t *testing.T) {
			is := is.New(t)
			page, more, err := s.ListGenerations(ctx, k.AccountID, ListQuery{})
			is.NoErr(err)
			is.Equal(listIDs(page), want) // newest first, only the account's
			is.True(!more)
		})
		t.Run("pages of two follow the cursor", func(t *testing.T) {
			is := is.New(t)
			var got []string
			before := ""
			for range 10 {
				page, more, err := s.ListGenerations(ctx, k.AccountID, ListQuery{Limit: 2, Before: before})
				is.NoErr(err)
				is.True(len(page) <= 2)
				got = append(got, listIDs(page)...)
				if !more {
					break
				}
				before = page[len(page)-1].ID
			}
			is.Equal(got, want) // every row once, in order, across equal times
		})
		t.Run("another account's id is not a cursor", func(t *testing.T) {
			is := is.New(t)
			_, _, err := s.ListGenerations(ctx, k.AccountID, ListQuery{Before: "x-1"})
			is.True(errors.Is(err, ErrNotFound))
		})
		t.Run("another account sees only its own", func(t *testing.T) {
			is := is.New(t)
			page, _, err := s.ListGenerations(ctx, other.AccountID, ListQuery{})
			is.NoErr(err)
			is.Equal(listIDs(page), []string{"x-2", "x-1"})
		})
		t.Run("limits", func(t *testing.T) {
			for _, limit := range []int{-1, MaxListLimit + 1} {
				_, _, err := s.ListGenerations(ctx, k.AccountID, ListQuery{Limit: limit})
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("limit %d: err = %v, want ErrInvalid", limit, err)
				}
			}
			page, more, err := s.ListGenerations(ctx, k.AccountID, ListQuery{Limit: len(want)})
			is.NoErr(err)
			is.Equal(len(page), len(want))
			is.True(!more) // exactly the last row: no more
		})
	})
}

func TestListGenerations_Filters(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, clock := newTestDB(t, open)
		ctx := context.Background()
		_, k, _ := newAccount(t, s, "acme", "10")
		at := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
		for i, c := range []struct{ app, typ string }{
			{"alpha", "code"}, {"beta", "code"}, {"alpha", "flash"}, {"alpha", "code"}, {"beta", "vision"},
		} {
			clock.Set(at.Add(time.Duration(i) * time.Minute))
			g := gen(t, fmt.Sprint("g", i), k, "0.01")
			g.Application, g.RequestType = c.app, c.typ
			s.RecordGeneration(g)
		}
		is.NoErr(s.Sync(ctx))
		for _, tc := range []struct {
			name string
			q    ListQuery
			want []string
		}{
			{"request type", ListQuery{RequestType: "code"}, []string{"g3", "g1", "g0"}},
			{"application", ListQuery{Application: "beta"}, []string{"g4", "g1"}},
			{"both", ListQuery{RequestType: "code", Application: "alpha"}, []string{"g3", "g0"}},
			{"both, after a cursor", ListQuery{RequestType: "code", Application: "alpha", Before: "g3"}, []string{"g0"}},
			{"no match", ListQuery{RequestType: "json"}, []string{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				is := is.New(t)
				page, more, err := s.ListGenerations(ctx, k.AccountID, tc.q)
				is.NoErr(err)
				is.Equal(listIDs(page), tc.want)
				is.True(!more)
			})
		}
	})
}

func TestListGenerations_FeedbackSummary(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, _ := newTestDB(t, open)
		ctx := context.Background()
		_, k, _ := newAccount(t, s, "acme", "10")
		_, other, _ := newAccount(t, s, "other", "10")
		s.RecordGeneration(gen(t, "g1", k, "0.01"))
		s.RecordGeneration(gen(t, "g2", k, "0.01"))
		s.RecordGeneration(gen(t, "x1", other, "0.01"))
		is.NoErr(s.Sync(ctx))
		rate := func(acct int64, id, endUser, rating, comment string) {
			t.Helper()
			_, err := s.UpsertFeedback(ctx, acct, Feedback{ID: id, EndUser: endUser, Rating: rating, Comment: comment}, 0)
			is.NoErr(err)
		}
		rate(k.AccountID, "g1", "", "up", "")
		rate(k.AccountID, "g1", "u2", "down", "")
		rate(k.AccountID, "g1", ReviewEndUser, "down", "wrong answer")
		rate(other.AccountID, "x1", ReviewEndUser, "up", "")

		page, _, err := s.ListGenerations(ctx, k.AccountID, ListQuery{})
		is.NoErr(err)
		is.Equal(listIDs(page), []string{"g2", "g1"})
		is.Equal(page[0].Up+page[0].Down, 0)
		is.Equal(page[0].Review.Rating, "")
		is.Equal(page[1].Up, 1)
		is.Equal(page[1].Down, 2)
		is.Equal(page[1].Review.Rating, "down")
		is.Equal(page[1].Review.Comment, "wrong answer")
	})
}

// listCase is one combination of ListGenerations' cursor and filters, as
// listSQL and pgListSQL take them.
type listCase struct{ cursor, requestType, application bool }

func (c listCase) String() string {
	return fmt.Sprintf("cursor=%v request_type=%v application=%v", c.cursor, c.requestType, c.application)
}

// listCases are every combination of a cursor and the two filters.
func listCases() []listCase {
	var cs []listCase
	for i := range 8 {
		cs = append(cs, listCase{i&1 != 0, i&2 != 0, i&4 != 0})
	}
	return cs
}

// listArgs are placeholder values of a page query of c, in the order
// listSQL and pgListSQL take them.
func (c listCase) args() []any {
	args := []any{ReviewEndUser, 1}
	if c.cursor {
		args = append(args, 2, 3) // created_at, seq (pgListSQL)
	}
	if c.requestType {
		args = append(args, "code")
	}
	if c.application {
		args = append(args, "app")
	}
	return append(args, 51)
}

// TestListGenerations_PlanReadsTheFilterIndex pins that a page is read
// from an index in its own order, no scan of the table and no sort,
// whatever the depth of the cursor: (account_id, created_at) unfiltered,
// and the index of the filter when filtered (with both, either, as
// rarerIndex picks), so that a rare or absent value costs what any page
// does.
func TestListGenerations_PlanReadsTheFilterIndex(t *testing.T) {
	s, _ := newTestStore(t)
	for _, c := range listCases() {
		args := c.args()
		if c.cursor { // listSQL takes the cursor's created_at twice, then its rowid
			args = append(args[:2:2], append([]any{2, 2, 3}, args[4:]...)...)
		}
		indexes := []string{listIndexFor(ListQuery{})}
		switch {
		case c.application && c.requestType:
			indexes = []string{indexByApplication, indexByRequestType}
		case c.application:
			indexes = []string{indexByApplication}
		case c.requestType:
			indexes = []string{indexByRequestType}
		}
		for _, index := range indexes {
			plan := queryPlan(t, s, `EXPLAIN QUERY PLAN `+listSQL(c.cursor, c.requestType, c.application, index), args...)
			want := map[string]string{
				indexByAccount:     "generations_account_created (account_id=?",
				indexByApplication: "generations_account_application (account_id=? AND application=?",
				indexByRequestType: "generations_account_request_type (account_id=? AND request_type=?",
			}[index]
			if c.cursor {
				want += " AND created_at<?)"
			} else {
				want += ")"
			}
			if !strings.Contains(plan, "SEARCH g USING INDEX "+want) {
				t.Errorf("%v, %s: plan does not search %s:\n%s", c, index, want, plan)
			}
			if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "SCAN g") || strings.Contains(plan, "SCAN f") {
				t.Errorf("%v, %s: plan sorts or scans a table:\n%s", c, index, plan)
			}
		}
	}
}

// TestListGenerations_BothFiltersReadTheRarerIndex checks rarerIndex's
// pick: the index of whichever value has fewer generations, the
// application's on a tie or when both pass the probe's bound.
func TestListGenerations_BothFiltersReadTheRarerIndex(t *testing.T) {
	s, _ := newTestStore(t)
	_, k, _ := newAccount(t, s, "acme", "10")
	for i := range 30 {
		g := gen(t, fmt.Sprint("g", i), k, "0.01")
		g.Application = []string{"busy", "busy", "quiet"}[i%3] // 20, 10
		g.RequestType = "flash"                                // 30
		if i%10 == 0 {
			g.RequestType = "document" // 3
		}
		s.RecordGeneration(g)
	}
	ctx := context.Background()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ app, typ, want string }{
		{"busy", "document", indexByRequestType},
		{"quiet", "flash", indexByApplication},
		{"absent", "flash", indexByApplication},
		{"busy", "absent", indexByRequestType},
		{"absent", "absent", indexByApplication},
	} {
		tx, err := s.r.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rarerIndex(ctx, tx, k.AccountID, ListQuery{Application: tc.app, RequestType: tc.typ})
		tx.Rollback()
		if err != nil || got != tc.want {
			t.Errorf("application %q, request type %q: %s, %v; want %s", tc.app, tc.typ, got, err, tc.want)
		}
	}
}

// TestListGenerations_PlanReadsTheFilterIndexOnPostgres is the same on
// PostgreSQL, on a ledger of skewed applications and request types whose
// statistics are fresh. The planner would rightly read a table of a few
// hundred rows whole and sort it, so sequential scans and sorts are made
// to cost more than anything (not forbidden: a plan that needs one still
// shows it, and fails).
func TestListGenerations_PlanReadsTheFilterIndexOnPostgres(t *testing.T) {
	p := openTestPostgres(t, pgtest.DSN(t), Options{})
	_, k, _ := newAccount(t, p, "acme", "10")
	for i := range 400 {
		g := gen(t, fmt.Sprint("g", i), k, "0.01")
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
	for _, c := range listCases() {
		args := c.args()
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
		plan := pgPlan(t, p, pgListSQL(c.cursor, c.requestType, c.application), args...)
		var want string
		switch {
		case c.application:
			want = "Index Scan Backward using generations_account_application on generations g"
		case c.requestType:
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
func pgPlan(t *testing.T, p *Postgres, query string, args ...any) string {
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

// TestListGenerations_FiltersMatchBruteForce pages through every
// combination of filter values, common, rare and absent ones, across
// generations that share their millisecond, and checks each listing
// against a filter of all the rows recorded.
func TestListGenerations_FiltersMatchBruteForce(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, clock := newTestDB(t, open)
		ctx := context.Background()
		_, k, _ := newAccount(t, s, "acme", "10")
		_, other, _ := newAccount(t, s, "other", "10")

		type row struct{ id, app, typ string }
		var rows []row // the account's, oldest first
		r := rand.New(rand.NewPCG(17, 17))
		pick := func(common, mid, rare string) string {
			switch n := r.IntN(100); {
			case n < 2:
				return rare
			case n < 30:
				return mid
			default:
				return common
			}
		}
		at := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
		for i := range 300 {
			if r.IntN(3) == 0 { // else the same millisecond as the last
				at = at.Add(time.Millisecond)
			}
			clock.Set(at)
			g := gen(t, fmt.Sprintf("g%03d", i), k, "0.01")
			g.Application = pick("busy.example", "quiet.example", "rare.example")
			g.RequestType = pick("flash", "code", "document")
			s.RecordGeneration(g)
			rows = append(rows, row{g.ID, g.Application, g.RequestType})
			if i%5 == 0 { // another account's calls, of the same values
				x := gen(t, fmt.Sprintf("x%03d", i), other, "0.01")
				x.Application, x.RequestType = g.Application, "json"
				s.RecordGeneration(x)
			}
		}
		is.NoErr(s.Sync(ctx))

		for _, typ := range []string{"", "flash", "code", "document", "json", "absent"} {
			for _, app := range []string{"", "busy.example", "quiet.example", "rare.example", "absent.example"} {
				var want []string
				for i := len(rows) - 1; i >= 0; i-- {
					if (typ == "" || rows[i].typ == typ) && (app == "" || rows[i].app == app) {
						want = append(want, rows[i].id)
					}
				}
				var got []string
				before := ""
				for pages := 0; ; pages++ {
					if pages > len(rows) {
						t.Fatalf("type %q app %q: pages do not end", typ, app)
					}
					page, more, err := s.ListGenerations(ctx, k.AccountID,
						ListQuery{Limit: 7, Before: before, RequestType: typ, Application: app})
					is.NoErr(err)
					got = append(got, listIDs(page)...)
					if !more {
						break
					}
					is.Equal(len(page), 7) // a page is full when more follow
					before = page[len(page)-1].ID
				}
				if want == nil {
					want = []string{}
				}
				if got == nil {
					got = []string{}
				}
				if !slices.Equal(got, want) {
					t.Errorf("type %q app %q:\n got %v\nwant %v", typ, app, got, want)
				}
			}
		}
	})
}

func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	var plan []string
	query(t, s, q, args, func(r rowScanner) error {
		var id, parent, unused int
		var detail string
		if err := r.Scan(&id, &parent, &unused, &detail); err != nil {
			return err
		}
		plan = append(plan, detail)
		return nil
	})
	return strings.Join(plan, "\n")
}

// A new database is migrated in silence: there is nothing slow to warn of.
func TestOpen_NewDatabaseSaysNothingOfMigrating(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		var logged bytes.Buffer
		open(t, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		is.True(!strings.Contains(logged.String(), "migrat")) // no generations: nothing to announce
	})
}

// TestOpen_AnnouncesTheFilterIndexes upgrades a ledger from before the
// filter indexes: opening it builds them, after a line that says so and on
// how many generations, and another when done.
func TestOpen_AnnouncesTheFilterIndexes(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, _ := newTestDB(t, open)
		_, k, _ := newAccount(t, s, "acme", "10")
		for i := range 3 {
			s.RecordGeneration(gen(t, fmt.Sprint("g", i), k, "0.01"))
		}
		is.NoErr(s.Sync(context.Background()))
		version, name := 5, "0005_generations_filter_indexes"
		if _, ok := s.(*Postgres); ok {
			version, name = 2, "0002_generations_filter_indexes"
		}
		execSQL(t, s, `DROP INDEX generations_account_application`)
		execSQL(t, s, `DROP INDEX generations_account_request_type`)
		execSQL(t, s, `DELETE FROM schema_migrations WHERE version = ?`, version)
		is.NoErr(s.Close())

		var logged bytes.Buffer
		s = open(t, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		log := logged.String()
		is.True(strings.Contains(log, `msg="store: migrating the ledger before serving; this holds its writer until done" migration=`+name+` builds="the generations' indexes by application and by request type" generations=3`))
		is.True(strings.Contains(log, `msg="store: migrated the ledger" migration=`+name+` took=`))
		indexes := queryInt(t, s, engineSQL(s,
			`SELECT COUNT(*) FROM sqlite_schema WHERE type = 'index' AND name IN ('generations_account_application', 'generations_account_request_type')`,
			`SELECT COUNT(*) FROM pg_indexes WHERE indexname IN ('generations_account_application', 'generations_account_request_type')`))
		is.Equal(indexes, int64(2)) // built again

		logged.Reset()
		is.NoErr(s.Close())
		s = open(t, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		is.True(!strings.Contains(logged.String(), "migrat")) // nothing to say when nothing is migrated
	})
}
