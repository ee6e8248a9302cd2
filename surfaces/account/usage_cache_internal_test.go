package account

import (
	"context"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
)

// fakeFeed is a ledger of usage_daily rows that tells its commits as the
// store does, for the cache's own cases the gateway cannot easily bring
// about: a commit of unknown outcome, a log outgrown.
type fakeFeed struct {
	seq  uint64
	rows map[store.UsageDelta]int64 // the key fields → requests
	fn   func(store.UsageCommit)
}

func (f *fakeFeed) FollowUsage(fn func(store.UsageCommit)) func() { f.fn = fn; return func() {} }

func (f *fakeFeed) ReadUsage(read func() error) (uint64, bool, error) { return f.seq, true, read() }

// commit adds n requests of key on day and tells the commit (lost: as of
// unknown outcome, though it took effect).
func (f *fakeFeed) commit(day int32, key string, n int64, lost bool) {
	d := store.UsageDelta{AccountID: 1, Day: day, KeyID: key}
	f.rows[d] += n
	f.seq++
	u := store.UsageCommit{Seq: f.seq, Lost: lost}
	if !lost {
		d.Requests, d.CostMicros = n, 10*n
		u.Deltas = []store.UsageDelta{d}
	}
	f.fn(u)
}

// load is the query of the api_key grouping over all time.
func (f *fakeFeed) load() (*usageView, error) {
	sums := map[string]int64{}
	for d, n := range f.rows {
		sums[d.KeyID] += n
	}
	var cells []store.DayBucket
	for _, k := range []string{"a", "b", "c", "d"} { // in order
		if n, ok := sums[k]; ok {
			cells = append(cells, store.DayBucket{Bucket: store.Bucket{Bucket: k, Requests: n, Cost: *apd.New(10*n, -6)}})
		}
	}
	return newUsageView(1, store.GroupByAPIKey, false, store.UsageQuery{GroupBy: store.GroupByAPIKey}, cells)
}

func TestUsageCache_LostCommitsAndAnOutgrownLogRecompute(t *testing.T) {
	is := is.New(t)
	f := &fakeFeed{rows: map[store.UsageDelta]int64{}}
	c := &usageCache{feed: f}
	f.FollowUsage(c.told)
	ctx := context.Background()
	k := usageKey{account: 1, groupBy: store.GroupByAPIKey}
	check := func() {
		t.Helper()
		got, err := c.get(ctx, k, f.load)
		is.NoErr(err)
		want, err := f.load()
		is.NoErr(err)
		is.Equal(string(got), string(want.render()))
	}

	f.commit(20000, "b", 1, false)
	check()
	is.Equal(c.queries, 1)
	f.commit(20000, "d", 2, false) // a new bucket, after
	f.commit(20001, "a", 3, false) // and before
	f.commit(20001, "b", 4, false)
	check()
	is.Equal(c.queries, 1) // folded in

	// A commit whose outcome is unknown drops what is kept.
	f.commit(20001, "c", 5, true)
	check()
	is.Equal(c.queries, 2)

	// An answer older than the log is computed again.
	for range usageLogMax + 1 {
		f.commit(20002, "a", 1, false)
	}
	check()
	is.Equal(c.queries, 3)
	f.commit(20002, "c", 1, false)
	check()
	is.Equal(c.queries, 3)

	// The least recently read answers make room for new ones.
	for i := range usageCacheMax + 10 {
		_, err := c.get(ctx, usageKey{account: 1, groupBy: store.GroupByAPIKey, start: int64(i+1) * 86400}, f.load)
		is.NoErr(err)
	}
	is.Equal(len(c.entries), usageCacheMax)
	is.True(c.entries[k] == nil) // the first, read least recently
}
