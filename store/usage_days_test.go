package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestUsageByDay(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, clock := newTestDB(t, open)
		ctx := context.Background()
		a, k1, _ := newAccount(t, s, "acme", "10")
		_, k2, err := s.CreateKey(ctx, a.ID, "second")
		is.NoErr(err)
		_, other, _ := newAccount(t, s, "other", "10")

		day := func(d, h int) time.Time { return time.Date(2025, 3, d, h, 0, 0, 0, time.UTC) }
		n := 0
		record := func(at time.Time, k Key, app, typ, cost string) {
			clock.Set(at)
			n++
			g := gen(t, fmt.Sprint("g", n), k, cost)
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

		got, err := s.UsageByDay(ctx, a.ID, UsageQuery{GroupBy: GroupByRequestType})
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

		got, err = s.UsageByDay(ctx, a.ID, UsageQuery{GroupBy: GroupByAPIKey, Start: day(11, 0), End: day(12, 0)})
		is.NoErr(err)
		is.Equal(len(got), 1) // the window is [start, end)
		is.Equal(got[0].Day, "2025-03-11")
		is.Equal(got[0].Bucket.Bucket, k1.ID)

		// Summed over either axis, the cells are the one-axis reports.
		for _, axis := range []string{GroupByRequestType, GroupByApplication, GroupByAPIKey} {
			cells, err := s.UsageByDay(ctx, a.ID, UsageQuery{GroupBy: axis})
			is.NoErr(err)
			byDay, byAxis := map[string]int64{}, map[string]int64{}
			for _, c := range cells {
				m, err := toMicros(c.Cost)
				is.NoErr(err)
				byDay[c.Day] += m
				byAxis[c.Bucket.Bucket] += m
			}
			for grouping, sums := range map[string]map[string]int64{GroupByDay: byDay, axis: byAxis} {
				want, err := s.Usage(ctx, a.ID, UsageQuery{GroupBy: grouping})
				is.NoErr(err)
				is.Equal(len(want), len(sums))
				for _, b := range want {
					m, err := toMicros(b.Cost)
					is.NoErr(err)
					if sums[b.Bucket] != m {
						t.Errorf("%s cells summed by %s: %s = %d, want %d", axis, grouping, b.Bucket, sums[b.Bucket], m)
					}
				}
			}
		}

		for _, bad := range []UsageQuery{{GroupBy: GroupByDay}, {GroupBy: "model"}, {GroupBy: GroupByAPIKey, Start: day(12, 0), End: day(11, 0)}} {
			_, err := s.UsageByDay(ctx, a.ID, bad)
			is.True(errors.Is(err, ErrInvalid)) // refused
		}
	})
}
