package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
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

// TestListGenerations_PlanUsesTheAccountIndex pins that a page is read from
// the (account_id, created_at) index in its own order: no scan of the
// table, no sort, whatever the depth of the cursor.
func TestListGenerations_PlanUsesTheAccountIndex(t *testing.T) {
	s, _ := newTestStore(t)
	for _, filtered := range []bool{false, true} {
		args := []any{ReviewEndUser, 1, 2, 2, 3}
		if filtered {
			args = append(args, "code", "app")
		}
		plan := queryPlan(t, s, `EXPLAIN QUERY PLAN `+listSQL(true, filtered, filtered), append(args, 51)...)
		if !strings.Contains(plan, "generations_account_created (account_id=? AND created_at<?)") {
			t.Errorf("plan does not range over generations_account_created:\n%s", plan)
		}
		if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "SCAN g") || strings.Contains(plan, "SCAN f") {
			t.Errorf("plan sorts or scans a table:\n%s", plan)
		}
	}
}

func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.r.Query(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
