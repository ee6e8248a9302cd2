package storetest

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
	"github.com/svcgw/svcgw/store"
)

// listIDs returns the ids of a page.
func listIDs(page []store.ListedGeneration) []string {
	ids := make([]string, len(page))
	for i, l := range page {
		ids[i] = l.ID
	}
	return ids
}

func testListGenerations_NewestFirstPagedByID(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	_, k, _ := NewAccount(t, s, "acme", "10")
	_, other, _ := NewAccount(t, s, "other", "10")

	// Seven calls, three of them in the same millisecond (recorded in id
	// order), with another account's calls interleaved; ids deliberately
	// do not sort by time, as gateway ids of different surfaces don't.
	start := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	var want []string // newest first
	record := func(at time.Time, id string, key store.Key) {
		clock.Set(at)
		s.RecordGeneration(Gen(t, id, key, "0.01"))
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
		page, more, err := s.ListGenerations(ctx, k.AccountID, store.ListQuery{})
		is.NoErr(err)
		is.Equal(listIDs(page), want) // newest first, only the account's
		is.True(!more)
	})
	t.Run("pages of two follow the cursor", func(t *testing.T) {
		is := is.New(t)
		var got []string
		before := ""
		for range 10 {
			page, more, err := s.ListGenerations(ctx, k.AccountID, store.ListQuery{Limit: 2, Before: before})
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
		_, _, err := s.ListGenerations(ctx, k.AccountID, store.ListQuery{Before: "x-1"})
		is.True(errors.Is(err, store.ErrNotFound))
	})
	t.Run("another account sees only its own", func(t *testing.T) {
		is := is.New(t)
		page, _, err := s.ListGenerations(ctx, other.AccountID, store.ListQuery{})
		is.NoErr(err)
		is.Equal(listIDs(page), []string{"x-2", "x-1"})
	})
	t.Run("limits", func(t *testing.T) {
		for _, limit := range []int{-1, store.MaxListLimit + 1} {
			_, _, err := s.ListGenerations(ctx, k.AccountID, store.ListQuery{Limit: limit})
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("limit %d: err = %v, want ErrInvalid", limit, err)
			}
		}
		page, more, err := s.ListGenerations(ctx, k.AccountID, store.ListQuery{Limit: len(want)})
		is.NoErr(err)
		is.Equal(len(page), len(want))
		is.True(!more) // exactly the last row: no more
	})
}

func testListGenerations_Filters(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	_, k, _ := NewAccount(t, s, "acme", "10")
	at := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	for i, c := range []struct{ app, typ string }{
		{"alpha", "code"}, {"beta", "code"}, {"alpha", "flash"}, {"alpha", "code"}, {"beta", "vision"},
	} {
		clock.Set(at.Add(time.Duration(i) * time.Minute))
		g := Gen(t, fmt.Sprint("g", i), k, "0.01")
		g.Application, g.RequestType = c.app, c.typ
		s.RecordGeneration(g)
	}
	is.NoErr(s.Sync(ctx))
	for _, tc := range []struct {
		name string
		q    store.ListQuery
		want []string
	}{
		{"request type", store.ListQuery{RequestType: "code"}, []string{"g3", "g1", "g0"}},
		{"application", store.ListQuery{Application: "beta"}, []string{"g4", "g1"}},
		{"both", store.ListQuery{RequestType: "code", Application: "alpha"}, []string{"g3", "g0"}},
		{"both, after a cursor", store.ListQuery{RequestType: "code", Application: "alpha", Before: "g3"}, []string{"g0"}},
		{"no match", store.ListQuery{RequestType: "json"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			page, more, err := s.ListGenerations(ctx, k.AccountID, tc.q)
			is.NoErr(err)
			is.Equal(listIDs(page), tc.want)
			is.True(!more)
		})
	}
}

func testListGenerations_FeedbackSummary(t *testing.T, open Opener) {
	is := is.New(t)
	s, _ := newTestDB(t, open)
	ctx := context.Background()
	_, k, _ := NewAccount(t, s, "acme", "10")
	_, other, _ := NewAccount(t, s, "other", "10")
	s.RecordGeneration(Gen(t, "g1", k, "0.01"))
	s.RecordGeneration(Gen(t, "g2", k, "0.01"))
	s.RecordGeneration(Gen(t, "x1", other, "0.01"))
	is.NoErr(s.Sync(ctx))
	rate := func(acct int64, id, endUser, rating, comment string) {
		t.Helper()
		_, err := s.UpsertFeedback(ctx, acct, store.Feedback{ID: id, EndUser: endUser, Rating: rating, Comment: comment}, 0)
		is.NoErr(err)
	}
	rate(k.AccountID, "g1", "", "up", "")
	rate(k.AccountID, "g1", "u2", "down", "")
	rate(k.AccountID, "g1", store.ReviewEndUser, "down", "wrong answer")
	rate(other.AccountID, "x1", store.ReviewEndUser, "up", "")

	page, _, err := s.ListGenerations(ctx, k.AccountID, store.ListQuery{})
	is.NoErr(err)
	is.Equal(listIDs(page), []string{"g2", "g1"})
	is.Equal(page[0].Up+page[0].Down, 0)
	is.Equal(page[0].Review.Rating, "")
	is.Equal(page[1].Up, 1)
	is.Equal(page[1].Down, 2)
	is.Equal(page[1].Review.Rating, "down")
	is.Equal(page[1].Review.Comment, "wrong answer")
}

// ListCase is one combination of ListGenerations' cursor and filters, as
// listSQL and pgListSQL take them.
type ListCase struct{ Cursor, RequestType, Application bool }

func (c ListCase) String() string {
	return fmt.Sprintf("cursor=%v request_type=%v application=%v", c.Cursor, c.RequestType, c.Application)
}

// ListCases are every combination of a cursor and the two filters.
func ListCases() []ListCase {
	var cs []ListCase
	for i := range 8 {
		cs = append(cs, ListCase{i&1 != 0, i&2 != 0, i&4 != 0})
	}
	return cs
}

// listArgs are placeholder values of a page query of c, in the order
// listSQL and pgListSQL take them.
func (c ListCase) Args() []any {
	args := []any{store.ReviewEndUser, 1}
	if c.Cursor {
		args = append(args, 2, 3) // created_at, seq (pgListSQL)
	}
	if c.RequestType {
		args = append(args, "code")
	}
	if c.Application {
		args = append(args, "app")
	}
	return append(args, 51)
}

// testListGenerations_FiltersMatchBruteForce pages through every
// combination of filter values, common, rare and absent ones, across
// generations that share their millisecond, and checks each listing
// against a filter of all the rows recorded.
func testListGenerations_FiltersMatchBruteForce(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	_, k, _ := NewAccount(t, s, "acme", "10")
	_, other, _ := NewAccount(t, s, "other", "10")

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
		g := Gen(t, fmt.Sprintf("g%03d", i), k, "0.01")
		g.Application = pick("busy.example", "quiet.example", "rare.example")
		g.RequestType = pick("flash", "code", "document")
		s.RecordGeneration(g)
		rows = append(rows, row{g.ID, g.Application, g.RequestType})
		if i%5 == 0 { // another account's calls, of the same values
			x := Gen(t, fmt.Sprintf("x%03d", i), other, "0.01")
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
					store.ListQuery{Limit: 7, Before: before, RequestType: typ, Application: app})
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
}

// A new database is migrated in silence: there is nothing slow to warn of.
func testOpen_NewDatabaseSaysNothingOfMigrating(t *testing.T, open Opener) {
	is := is.New(t)
	var logged bytes.Buffer
	open(t, store.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	is.True(!strings.Contains(logged.String(), "migrat")) // no generations: nothing to announce
}

// testOpen_AnnouncesTheFilterIndexes upgrades a ledger from before the
// filter indexes: opening it builds them, after a line that says so and on
// how many generations, and another when done.
func testOpen_AnnouncesTheFilterIndexes(t *testing.T, open Opener) {
	is := is.New(t)
	s, _ := newTestDB(t, open)
	_, k, _ := NewAccount(t, s, "acme", "10")
	for i := range 3 {
		s.RecordGeneration(Gen(t, fmt.Sprint("g", i), k, "0.01"))
	}
	is.NoErr(s.Sync(context.Background()))
	version, name := 5, "0005_generations_filter_indexes"
	if engine(t, s).Dialect().Name == "postgres" {
		version, name = 2, "0002_generations_filter_indexes"
	}
	Exec(t, s, `DROP INDEX generations_account_application`)
	Exec(t, s, `DROP INDEX generations_account_request_type`)
	Exec(t, s, `DELETE FROM schema_migrations WHERE version = ?`, version)
	is.NoErr(s.Close())

	var logged bytes.Buffer
	s = open(t, store.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	log := logged.String()
	is.True(strings.Contains(log, `msg="store: migrating the ledger before serving; this holds its writer until done" migration=`+name+` builds="the generations' indexes by application and by request type" generations=3`))
	is.True(strings.Contains(log, `msg="store: migrated the ledger" migration=`+name+` took=`))
	indexes := QueryInt(t, s, EngineSQL(t, s,
		`SELECT COUNT(*) FROM sqlite_schema WHERE type = 'index' AND name IN ('generations_account_application', 'generations_account_request_type')`,
		`SELECT COUNT(*) FROM pg_indexes WHERE indexname IN ('generations_account_application', 'generations_account_request_type')`))
	is.Equal(indexes, int64(2)) // built again

	logged.Reset()
	is.NoErr(s.Close())
	s = open(t, store.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	is.True(!strings.Contains(logged.String(), "migrat")) // nothing to say when nothing is migrated
}
