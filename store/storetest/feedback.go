package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
)

const month = 30 * 24 * time.Hour

func testUpsertFeedback(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	a, k, _ := NewAccount(t, s, "acme", "10")
	b, kb, _ := NewAccount(t, s, "beta", "10")
	s.RecordGeneration(Gen(t, "chatcmpl-a", k, "1"))
	s.RecordGeneration(Gen(t, "chatcmpl-b", kb, "1"))
	is.NoErr(s.Sync(ctx)) // sync

	usageBefore, err := s.Usage(ctx, a.ID, store.UsageQuery{GroupBy: store.GroupByDay})
	is.NoErr(err) // usage before

	type row struct {
		rating, comment string
		labels          *string
	}
	stored := func(endUser string) (rows []row) {
		Query(t, s, `SELECT rating, comment, labels FROM feedback WHERE account_id = ? AND generation_id = ? AND end_user = ?`,
			[]any{a.ID, "chatcmpl-a", endUser}, func(r store.Scanner) error {
				var x row
				err := r.Scan(&x.rating, &x.comment, &x.labels)
				rows = append(rows, x)
				return err
			})
		return rows
	}

	created, err := s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-a", Rating: "up", Comment: "nice",
		Labels: json.RawMessage(`{"topic":"billing","score":3}`)}, month)
	is.NoErr(err)    // first rating
	is.True(created) // inserted
	got := stored("")
	is.Equal(len(got), 1)                                     // one row
	is.Equal(*got[0].labels, `{"topic":"billing","score":3}`) // labels stored as text

	clock.Advance(time.Hour)
	created, err = s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-a", Rating: "down"}, month)
	is.NoErr(err)     // second rating, same end user
	is.True(!created) // updated
	got = stored("")
	is.Equal(len(got), 1)           // no duplicate
	is.Equal(got[0].rating, "down") // rating replaced
	is.Equal(got[0].comment, "")    // comment replaced
	is.True(got[0].labels == nil)   // labels cleared

	created, err = s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-a", EndUser: "u-42", Rating: "up"}, month)
	is.NoErr(err)                    // another end user
	is.True(created)                 // a separate rating
	is.Equal(len(stored("u-42")), 1) // stored under its end user

	_, err = s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-zzz", Rating: "up"}, month)
	is.True(errors.Is(err, store.ErrNotFound)) // unknown generation
	_, err = s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-b", Rating: "up"}, month)
	is.True(errors.Is(err, store.ErrNotFound)) // another account's generation
	_, err = s.UpsertFeedback(ctx, b.ID, store.Feedback{ID: "chatcmpl-a", Rating: "up"}, month)
	is.True(errors.Is(err, store.ErrNotFound)) // and the other way round
	_, err = s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-a", Rating: "meh"}, month)
	is.True(errors.Is(err, store.ErrInvalid)) // bad rating
	_, err = s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-a", Rating: "up", Labels: json.RawMessage(`{`)}, month)
	is.True(errors.Is(err, store.ErrInvalid)) // labels not JSON

	usageAfter, err := s.Usage(ctx, a.ID, store.UsageQuery{GroupBy: store.GroupByDay})
	is.NoErr(err)                     // usage after
	is.Equal(usageAfter, usageBefore) // feedback is not usage
	acct, err := s.AccountByID(ctx, a.ID)
	is.NoErr(err)                               // account
	is.Equal(acct.Balance.String(), "9.000000") // feedback is free
	CheckLedger(t, s)
}

func testUpsertFeedback_EndUsersPerGenerationAreBounded(t *testing.T, open Opener) {
	is := is.New(t)
	s, _ := newTestDB(t, open)
	ctx := context.Background()
	a, k, _ := NewAccount(t, s, "acme", "10")
	s.RecordGeneration(Gen(t, "chatcmpl-a", k, "1"))
	s.RecordGeneration(Gen(t, "chatcmpl-b", k, "1"))
	is.NoErr(s.Sync(ctx)) // sync

	for i := range store.MaxFeedbackEndUsers {
		created, err := s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-a", EndUser: fmt.Sprint("user-", i), Rating: "up"}, month)
		is.NoErr(err) // within the bound
		is.True(created)
	}
	_, err := s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-a", EndUser: "one-too-many", Rating: "up"}, month)
	is.True(errors.Is(err, store.ErrLimit)) // a new end user past the bound is refused
	created, err := s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-a", EndUser: "user-7", Rating: "down"}, month)
	is.NoErr(err) // an existing end user may still change its rating
	is.True(!created)
	_, err = s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "chatcmpl-b", EndUser: "one-too-many", Rating: "up"}, month)
	is.NoErr(err) // the bound is per generation

	is.Equal(QueryInt(t, s, `SELECT COUNT(*) FROM feedback WHERE generation_id = 'chatcmpl-a'`), int64(store.MaxFeedbackEndUsers))
}

func testUpsertFeedback_MaxAge(t *testing.T, open Opener) {
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	a, k, _ := NewAccount(t, s, "acme", "10")
	start := clock.Now()
	s.RecordGeneration(Gen(t, "msg_1", k, "0"))
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		age    time.Duration
		maxAge time.Duration
		want   error
	}{
		{"fresh", time.Minute, month, nil},
		{"exactly the limit", month, month, nil},
		{"a millisecond over", month + time.Millisecond, month, store.ErrConflict},
		{"a year old", 365 * 24 * time.Hour, month, store.ErrConflict},
		{"no limit", 365 * 24 * time.Hour, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			clock.Set(start.Add(tt.age))
			_, err := s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "msg_1", Rating: "up"}, tt.maxAge)
			if tt.want == nil {
				is.NoErr(err) // accepted
				return
			}
			is.True(errors.Is(err, tt.want)) // refused
		})
	}
}
