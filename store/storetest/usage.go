package storetest

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
)

func testUsage(t *testing.T, open Opener) {
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	a, k1, _ := NewAccount(t, s, "acme", "10")
	_, k2, err := s.CreateKey(ctx, a.ID, "second")
	if err != nil {
		t.Fatal(err)
	}
	_, other, _ := NewAccount(t, s, "other", "10")

	day := func(d, h, m, sec, msec int) time.Time {
		return time.Date(2025, 3, d, h, m, sec, msec*int(time.Millisecond), time.UTC)
	}
	record := func(at time.Time, id string, k store.Key, app, typ, cost string) {
		clock.Set(at)
		g := Gen(t, id, k, cost)
		g.Application, g.RequestType = app, typ
		g.CacheCreationTokens = 10
		s.RecordGeneration(g) // stamped with the clock's time
	}
	record(day(10, 12, 0, 0, 0), "g1", k1, "alpha", "code", "0.1")
	record(day(10, 23, 59, 59, 999), "g2", k2, "beta", "pro", "0.2")
	record(day(11, 0, 0, 0, 0), "g3", k1, "alpha", "vision", "0.3")
	record(day(12, 8, 0, 0, 0), "g4", k2, "beta", "code", "0.4")
	record(day(11, 9, 0, 0, 0), "x1", other, "alpha", "code", "5") // another account
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	keyOrder := []string{k1.ID, k2.ID}
	sort.Strings(keyOrder)
	keyCost := map[string]string{k1.ID: "0.400000", k2.ID: "0.600000"}

	type want struct {
		bucket   string
		requests int64
		cost     string
	}
	tests := []struct {
		name string
		q    store.UsageQuery
		want []want
	}{
		{"day unbounded", store.UsageQuery{GroupBy: store.GroupByDay},
			[]want{{"2025-03-10", 2, "0.300000"}, {"2025-03-11", 1, "0.300000"}, {"2025-03-12", 1, "0.400000"}}},
		{"day from start inclusive", store.UsageQuery{GroupBy: store.GroupByDay, Start: day(11, 0, 0, 0, 0)},
			[]want{{"2025-03-11", 1, "0.300000"}, {"2025-03-12", 1, "0.400000"}}},
		{"day to end exclusive", store.UsageQuery{GroupBy: store.GroupByDay, End: day(11, 0, 0, 0, 0)},
			[]want{{"2025-03-10", 2, "0.300000"}}},
		{"one day, the last millisecond of it included", store.UsageQuery{GroupBy: store.GroupByDay, Start: day(10, 0, 0, 0, 0), End: day(11, 0, 0, 0, 0)},
			[]want{{"2025-03-10", 2, "0.300000"}}},
		{"a midnight in another zone", store.UsageQuery{GroupBy: store.GroupByDay, Start: day(11, 0, 0, 0, 0).In(time.FixedZone("CET", 3600))},
			[]want{{"2025-03-11", 1, "0.300000"}, {"2025-03-12", 1, "0.400000"}}},
		{"an end on the last day RFC 3339 can write", store.UsageQuery{GroupBy: store.GroupByDay, End: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
			[]want{{"2025-03-10", 2, "0.300000"}, {"2025-03-11", 1, "0.300000"}, {"2025-03-12", 1, "0.400000"}}},
		{"request type", store.UsageQuery{GroupBy: store.GroupByRequestType},
			[]want{{"code", 2, "0.500000"}, {"pro", 1, "0.200000"}, {"vision", 1, "0.300000"}}},
		{"request type bounded", store.UsageQuery{GroupBy: store.GroupByRequestType, Start: day(11, 0, 0, 0, 0), End: day(12, 0, 0, 0, 0)},
			[]want{{"vision", 1, "0.300000"}}},
		{"application", store.UsageQuery{GroupBy: store.GroupByApplication},
			[]want{{"alpha", 2, "0.400000"}, {"beta", 2, "0.600000"}}},
		{"application bounded", store.UsageQuery{GroupBy: store.GroupByApplication, End: day(11, 0, 0, 0, 0)},
			[]want{{"alpha", 1, "0.100000"}, {"beta", 1, "0.200000"}}},
		{"api key", store.UsageQuery{GroupBy: store.GroupByAPIKey},
			[]want{{keyOrder[0], 2, keyCost[keyOrder[0]]}, {keyOrder[1], 2, keyCost[keyOrder[1]]}}},
		{"api key bounded", store.UsageQuery{GroupBy: store.GroupByAPIKey, Start: day(12, 0, 0, 0, 0)},
			[]want{{k2.ID, 1, "0.400000"}}},
		{"empty window", store.UsageQuery{GroupBy: store.GroupByDay, Start: day(11, 0, 0, 0, 0), End: day(11, 0, 0, 0, 0)},
			[]want{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got, err := s.Usage(ctx, a.ID, tt.q)
			is.NoErr(err)                    // usage
			is.True(got != nil)              // never nil
			is.Equal(len(got), len(tt.want)) // bucket count
			for i, w := range tt.want {
				b := got[i]
				is.Equal(b.Bucket, w.bucket)                 // bucket key
				is.Equal(b.Requests, w.requests)             // requests
				is.Equal(b.Cost.String(), w.cost)            // cost
				is.Equal(b.InputTokens, 100*w.requests)      // input tokens
				is.Equal(b.OutputTokens, 20*w.requests)      // output tokens
				is.Equal(b.TotalTokens, 120*w.requests)      // total tokens
				is.Equal(b.CachedInputTokens, 40*w.requests) // cached input tokens
				is.Equal(b.CacheWriteTokens, 10*w.requests)  // cache write tokens
				is.Equal(b.ReasoningTokens, 5*w.requests)    // reasoning tokens
			}
		})
	}

	t.Run("invalid queries", func(t *testing.T) {
		is := is.New(t)
		for _, q := range []store.UsageQuery{
			{GroupBy: ""},
			{GroupBy: "model"},
			{GroupBy: "day; DROP TABLE generations"},
			{GroupBy: store.GroupByDay, Start: day(12, 0, 0, 0, 0), End: day(11, 0, 0, 0, 0)},
			{GroupBy: store.GroupByDay, Start: day(10, 23, 59, 59, 999)},                    // not a UTC midnight
			{GroupBy: store.GroupByAPIKey, End: day(11, 0, 0, 0, 0).Add(-time.Microsecond)}, // nor this
			{GroupBy: store.GroupByDay, Start: time.Date(2025, 3, 11, 0, 0, 0, 0, time.FixedZone("CET", 3600))},
		} {
			_, err := s.Usage(ctx, a.ID, q)
			is.True(errors.Is(err, store.ErrInvalid)) // rejected
		}
	})
}
