package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// usageSnapshot is every grouping's report of every account over the
// ranges of usageRanges.
func usageSnapshot(t *testing.T, s *Store, accounts []store.Account) map[string][]store.Bucket {
	t.Helper()
	r := rand.New(rand.NewPCG(9, 9))
	snap := map[string][]store.Bucket{}
	for _, a := range accounts {
		for _, groupBy := range []string{store.GroupByDay, store.GroupByRequestType, store.GroupByApplication, store.GroupByAPIKey} {
			for _, rg := range storetest.UsageRanges(r, time.Date(2024, 11, 20, 0, 0, 0, 0, time.UTC), time.Date(2025, 3, 20, 0, 0, 0, 0, time.UTC), 5) {
				if !rg[0].IsZero() && !rg[1].IsZero() && rg[0].After(rg[1]) {
					continue
				}
				got, err := s.Usage(context.Background(), a.ID, store.UsageQuery{GroupBy: groupBy, Start: rg[0], End: rg[1]})
				if err != nil {
					t.Fatal(err)
				}
				snap[fmt.Sprint(a.ID, groupBy, rg)] = got
			}
		}
	}
	return snap
}

func sameSnapshots(t *testing.T, got, want map[string][]store.Bucket) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d reports, want %d", len(got), len(want))
	}
	for k, w := range want {
		if err := storetest.SameBuckets(got[k], w); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
}

// balances returns each account's balance and total used, in micros.
func balances(t *testing.T, s *Store) map[int64][2]int64 {
	t.Helper()
	rows, err := s.r.Query(`SELECT id, balance_micros, total_used_micros FROM accounts`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[int64][2]int64{}
	for rows.Next() {
		var id, b, u int64
		if err := rows.Scan(&id, &b, &u); err != nil {
			t.Fatal(err)
		}
		m[id] = [2]int64{b, u}
	}
	return m
}

func count(t *testing.T, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.r.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func TestRetention_DeletesDetailOnly(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, clock := newTestStore(t)
	r := rand.New(rand.NewPCG(5, 6))
	accounts := storetest.RandomWorkload(t, s, clock, r, 1200)
	// Feedback on generations of every age.
	for _, id := range []string{"gen-000001", "gen-000300", "gen-000600", "gen-001199"} {
		var acct int64
		is.NoErr(s.r.QueryRow(`SELECT account_id FROM generations WHERE id = ?`, id).Scan(&acct))
		_, err := s.UpsertFeedback(ctx, acct, store.Feedback{ID: id, Rating: "up", Comment: "ok"}, 0)
		is.NoErr(err) // feedback
	}
	before := usageSnapshot(t, s, accounts)
	money := balances(t, s)
	spend := count(t, s, `SELECT COUNT(*) FROM spend_daily`)

	now := time.Date(2025, 3, 20, 6, 0, 0, 0, time.UTC)
	clock.Set(now)
	retention := 60 * 24 * time.Hour
	cutoff := store.Millis(now.Add(-retention))
	old := count(t, s, `SELECT COUNT(*) FROM generations WHERE created_at < ?`, cutoff)
	kept := count(t, s, `SELECT COUNT(*) FROM generations WHERE created_at >= ?`, cutoff)
	oldFeedback := count(t, s, `SELECT COUNT(*) FROM feedback f JOIN generations g ON g.id = f.generation_id WHERE g.created_at < ?`, cutoff)
	is.True(old > 400 && kept > 400 && oldFeedback > 0) // the workload straddles the cutoff

	p := &store.Pacer{Target: time.Millisecond, Size: 100} // many small transactions
	is.NoErr(store.PrunePass(ctx, s, s.Now, retention, p, s.Logger()))

	is.Equal(count(t, s, `SELECT COUNT(*) FROM generations WHERE created_at < ?`, cutoff), 0) // old detail gone
	is.Equal(count(t, s, `SELECT COUNT(*) FROM generations`), kept)                           // the rest kept
	is.Equal(count(t, s, `SELECT COUNT(*) FROM feedback`), 4-oldFeedback)                     // feedback went with its generation
	is.Equal(count(t, s, `SELECT COUNT(*) FROM feedback f LEFT JOIN generations g ON g.id = f.generation_id WHERE g.id IS NULL`), 0)
	sameSnapshots(t, usageSnapshot(t, s, accounts), before)          // usage never changes
	is.Equal(balances(t, s), money)                                  // nor balances and totals
	is.Equal(count(t, s, `SELECT COUNT(*) FROM spend_daily`), spend) // nor spend
	pruned, err := s.PrunedBefore(ctx)
	is.NoErr(err)
	is.Equal(store.Millis(pruned), cutoff) // the mark the lookups read

	// A later pass with a shorter window only moves the mark forward; a
	// longer one does not move it back.
	is.NoErr(store.PrunePass(ctx, s, s.Now, 90*24*time.Hour, p, s.Logger()))
	pruned, err = s.PrunedBefore(ctx)
	is.NoErr(err)
	is.Equal(store.Millis(pruned), cutoff)

	_, err = s.Generation(ctx, accounts[0].ID, "gen-000001")
	is.True(errors.Is(err, store.ErrNotFound)) // a pruned generation is not found
}

func TestPrunedBefore_ZeroUntilRetentionRuns(t *testing.T) {
	is := is.New(t)
	s, _ := newTestStore(t)
	got, err := s.PrunedBefore(context.Background())
	is.NoErr(err)
	is.True(got.IsZero())
}

// TestUpkeep_BackfillThenRetention upgrades a database of the previous
// schema with retention on: the upkeep must roll the old generations up
// before it deletes any, so that no usage is lost.
func TestUpkeep_BackfillThenRetention(t *testing.T) {
	is := is.New(t)
	r := rand.New(rand.NewPCG(7, 8))
	src, clock := newTestStore(t)
	accounts := storetest.RandomWorkload(t, src, clock, r, 1000)
	before := usageSnapshot(t, src, accounts)
	money := balances(t, src)
	is.NoErr(src.Close())
	legacy := filepath.Join(t.TempDir(), "legacy.db")
	legacyCopy(t, src.path, legacy)

	clock.Set(time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC))
	s := openTestStore(t, legacy, store.Options{Now: clock.Now})
	is.True(!s.RollupsComplete())
	is.NoErr(s.StartUpkeep(store.UpkeepOptions{Retention: 30 * 24 * time.Hour, ChunkTime: time.Millisecond, Interval: time.Millisecond}))
	is.True(s.StartUpkeep(store.UpkeepOptions{}) != nil) // only once
	cutoff := store.Millis(clock.Now().Add(-30 * 24 * time.Hour))
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if count(t, s, `SELECT COUNT(*) FROM generations WHERE created_at < ?`, cutoff) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	is.Equal(count(t, s, `SELECT COUNT(*) FROM generations WHERE created_at < ?`, cutoff), 0) // pruned
	is.True(s.RollupsComplete())                                                              // after the backfill
	sameSnapshots(t, usageSnapshot(t, s, accounts), before)                                   // with every generation counted
	is.Equal(balances(t, s), money)
	is.NoErr(s.Close()) // Close stops the upkeep
	is.True(errors.Is(s.StartUpkeep(store.UpkeepOptions{}), store.ErrClosed))
}
