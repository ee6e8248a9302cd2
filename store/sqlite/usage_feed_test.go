package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// The usage feed tells each successful commit once, in order, with its
// roll-up sums per (account, key, application, request type, day), before
// the Syncs waiting for it return; a commit rolled back (a bad row, a
// failure before its COMMIT) is told nothing; and a usage read no commit
// overlapped is exact at the last commit told.
func TestFollowUsage_TellsEachCommittedSumOnce(t *testing.T) {
	is := is.New(t)
	clock := storetest.NewClock()
	var fail atomic.Bool
	s := openTestStore(t, filepath.Join(t.TempDir(), "svcgw.db"), store.Options{
		Now: clock.Now, BatchInterval: time.Hour, RetryInterval: 10 * time.Millisecond,
		CommitHook: func() error {
			if fail.Load() {
				return errors.New("injected")
			}
			return nil
		},
	})
	ctx := context.Background()
	a, k, _ := storetest.NewAccount(t, s, "acme", "10")
	var (
		mu      sync.Mutex
		commits []store.UsageCommit
	)
	told := func() []store.UsageCommit {
		mu.Lock()
		defer mu.Unlock()
		return append([]store.UsageCommit(nil), commits...)
	}
	stop := s.FollowUsage(func(c store.UsageCommit) {
		mu.Lock()
		defer mu.Unlock()
		commits = append(commits, c)
	})

	var buckets []store.Bucket
	seq, exact, err := s.ReadUsage(func() error {
		var err error
		buckets, err = s.Usage(ctx, a.ID, store.UsageQuery{GroupBy: store.GroupByRequestType})
		return err
	})
	is.NoErr(err)
	is.True(exact)
	is.Equal(seq, uint64(0)) // no commit yet
	is.Equal(len(buckets), 0)

	// One batch: two rows of one daily roll-up row, one of another day and
	// application; a duplicate id makes the batch fail (rolled back) and be
	// committed row by row.
	g1, g2, g3 := storetest.Gen(t, "g1", k, "0.1"), storetest.Gen(t, "g2", k, "0.2"), storetest.Gen(t, "g3", k, "0.4")
	g3.Application, g3.CreatedAt = "other", clock.Now().Add(24*time.Hour)
	for _, g := range []store.Generation{g1, g2, g1, g3} {
		s.RecordGeneration(g)
	}
	is.NoErr(s.Sync(ctx))
	got := told() // told before Sync returned
	is.Equal(len(got), 3)
	want := map[store.UsageDelta]bool{}
	for _, g := range []store.Generation{g1, g2, g3} {
		at := g.CreatedAt
		if at.IsZero() {
			at = clock.Now() // stamped by RecordGeneration
		}
		want[store.UsageDelta{AccountID: a.ID, Day: store.DayNumber(at), KeyID: k.ID, Application: g.Application,
			RequestType: "pro", Requests: 1, InputTokens: 100, OutputTokens: 20, CachedInputTokens: 40, ReasoningTokens: 5,
			CostMicros: map[string]int64{"g1": 100_000, "g2": 200_000, "g3": 400_000}[g.ID]}] = true
	}
	for i, c := range got {
		is.Equal(c.Seq, uint64(i+1)) // numbered without gaps
		is.True(!c.Lost)
		is.Equal(len(c.Deltas), 1) // one row each
		is.True(want[c.Deltas[0]]) // the row's own sums
		delete(want, c.Deltas[0])
	}

	// A commit that fails before its COMMIT tells nothing; its retry, once.
	fail.Store(true)
	g4 := storetest.Gen(t, "g4", k, "0.8")
	s.RecordGeneration(g4)
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	is.True(s.Sync(sctx) != nil) // failing
	cancel()
	is.Equal(len(told()), 3)
	fail.Store(false)
	for s.Sync(ctx) != nil {
		time.Sleep(10 * time.Millisecond)
	}
	got = told()
	is.Equal(len(got), 4)
	is.Equal(got[3].Seq, uint64(4))
	is.Equal(got[3].Deltas[0].CostMicros, int64(800_000))

	// A read after them is exact at the last.
	seq, exact, err = s.ReadUsage(func() error {
		var err error
		buckets, err = s.Usage(ctx, a.ID, store.UsageQuery{GroupBy: store.GroupByRequestType})
		return err
	})
	is.NoErr(err)
	is.True(exact)
	is.Equal(seq, uint64(4))
	is.Equal(buckets[0].Requests, int64(4))

	// A read that a COMMIT overlaps is not.
	s.RecordGeneration(storetest.Gen(t, "g5", k, "0.1"))
	_, exact, err = s.ReadUsage(func() error { return s.Sync(ctx) })
	is.NoErr(err)
	is.True(!exact)

	stop()
	s.RecordGeneration(storetest.Gen(t, "g6", k, "0.1"))
	is.NoErr(s.Sync(ctx))
	is.Equal(len(told()), 5) // g5's, then none
}
