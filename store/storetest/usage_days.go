package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

func testUsageByDay(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	a, k1, _ := NewAccount(t, s, "acme", "10")
	_, k2, err := s.CreateKey(ctx, a.ID, "second")
	is.NoErr(err)
	_, other, _ := NewAccount(t, s, "other", "10")

	day := func(d, h int) time.Time { return time.Date(2025, 3, d, h, 0, 0, 0, time.UTC) }
	n := 0
	record := func(at time.Time, k store.Key, app, typ, cost string) {
		clock.Set(at)
		n++
		g := Gen(t, fmt.Sprint("g", n), k, cost)
		g.Application, g.RequestType = app, typ
		s.RecordGeneration(g)
	}
	record(day(10, 1), k1, "alpha", "code", "0.1")
	record(day(10, 2), k1, "alpha", "code", "0.2")
	record(day(10, 23), k2, "beta", "pro", "0.3")
	record(day(11, 0), k1, "beta", "code", "0.4")
	record(day(12, 5), k2, "alpha", "vision", "0.5")
	record(day(11, 9), other, "alpha", "code", "7") // another account
	is.NoErr(s.Sync(ctx))

	got, err := s.UsageByDay(ctx, a.ID, store.UsageQuery{GroupBy: store.GroupByRequestType})
	is.NoErr(err)
	type cell struct {
		day, bucket string
		requests    int64
		cost        string
	}
	var cells []cell
	for _, b := range got {
		cells = append(cells, cell{b.Day, b.Bucket.Bucket, b.Requests, b.Cost.Text('f')})
	}
	is.Equal(cells, []cell{
		{"2025-03-10", "code", 2, "0.300000"},
		{"2025-03-10", "pro", 1, "0.300000"},
		{"2025-03-11", "code", 1, "0.400000"},
		{"2025-03-12", "vision", 1, "0.500000"},
	})

	got, err = s.UsageByDay(ctx, a.ID, store.UsageQuery{GroupBy: store.GroupByAPIKey, Start: day(11, 0), End: day(12, 0)})
	is.NoErr(err)
	is.Equal(len(got), 1) // the window is [start, end)
	is.Equal(got[0].Day, "2025-03-11")
	is.Equal(got[0].Bucket.Bucket, k1.ID)

	// Summed over either axis, the cells are the one-axis reports.
	for _, axis := range []string{store.GroupByRequestType, store.GroupByApplication, store.GroupByAPIKey} {
		cells, err := s.UsageByDay(ctx, a.ID, store.UsageQuery{GroupBy: axis})
		is.NoErr(err)
		byDay, byAxis := map[string]int64{}, map[string]int64{}
		for _, c := range cells {
			m, err := money.FromDecimal(c.Cost)
			is.NoErr(err)
			byDay[c.Day] += int64(m)
			byAxis[c.Bucket.Bucket] += int64(m)
		}
		for grouping, sums := range map[string]map[string]int64{store.GroupByDay: byDay, axis: byAxis} {
			want, err := s.Usage(ctx, a.ID, store.UsageQuery{GroupBy: grouping})
			is.NoErr(err)
			is.Equal(len(want), len(sums))
			for _, b := range want {
				m, err := money.FromDecimal(b.Cost)
				is.NoErr(err)
				if sums[b.Bucket] != int64(m) {
					t.Errorf("%s cells summed by %s: %s = %d, want %d", axis, grouping, b.Bucket, sums[b.Bucket], m)
				}
			}
		}
	}

	for _, bad := range []store.UsageQuery{{GroupBy: store.GroupByDay}, {GroupBy: "model"}, {GroupBy: store.GroupByAPIKey, Start: day(12, 0), End: day(11, 0)}} {
		_, err := s.UsageByDay(ctx, a.ID, bad)
		is.True(errors.Is(err, store.ErrInvalid)) // refused
	}
}
