package sqlite

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

func TestSpend_CountsQueuedChargesAtOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	// Nothing commits until Sync: the charges are only queued.
	s := openTestStore(t, path, store.Options{Now: clock.Now, BatchSize: 1 << 20, BatchInterval: time.Hour})
	a, k, _ := storetest.NewAccount(t, s, "acme", "10")

	sp, err := s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)               // spend
	is.Equal(sp, store.Spend{}) // nothing yet
	for i := range 3 {
		s.RecordGeneration(storetest.Gen(t, "g"+strconv.Itoa(i), k, "0.25"))
	}
	sp, err = s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(sp, store.Spend{Total: 750000, AccountDay: 750000, AccountMonth: 750000, KeyDay: 750000, KeyMonth: 750000}) // queued, counted

	is.NoErr(s.Sync(ctx)) // commit
	sp2, err := s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(sp2, sp) // committing changes nothing: never counted twice
	db, err := s.PeriodSpend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(db, sp) // the database agrees once committed
	storetest.CheckLedger(t, s)
	storetest.CheckSpendDaily(t, s)
}

func TestSpend_DroppedChargesAreTakenBack(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, clock := newTestStore(t)
	a, k, _ := storetest.NewAccount(t, s, "acme", "10")
	s.RecordGeneration(storetest.Gen(t, "dup", k, "1"))
	s.RecordGeneration(storetest.Gen(t, "dup", k, "2")) // duplicate id: dropped at commit
	bad := storetest.Gen(t, "bad-key", k, "4")
	bad.KeyID = "key_nope" // unknown key: dropped at commit
	s.RecordGeneration(bad)
	is.NoErr(s.Sync(ctx))

	sp, err := s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(sp.Total, int64(1e6))  // only the committed charge
	is.Equal(sp.KeyDay, int64(1e6)) // for the key too
	ghost, err := s.Spend(ctx, a.ID, "key_nope", clock.Now())
	is.NoErr(err)
	is.Equal(ghost.KeyDay, int64(0)) // the unknown key's charge was taken back
	storetest.CheckLedger(t, s)
	storetest.CheckSpendDaily(t, s)
}

// TestSpend_ConcurrentWithLedger records from many goroutines while others
// read Spend; at the end, memory, spend_daily and generations all agree.
func TestSpend_ConcurrentWithLedger(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, clock := newTestStore(t)
	a, k, _ := storetest.NewAccount(t, s, "acme", "1000")
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				s.RecordGeneration(storetest.Gen(t, "w"+strconv.Itoa(w)+"-"+strconv.Itoa(i), k, "0.001"))
				if i%10 == 0 {
					if _, err := s.Spend(ctx, a.ID, k.ID, clock.Now()); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	sp, err := s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(sp.Total, int64(1600*1000)) // every charge once
	is.NoErr(s.Sync(ctx))
	db, err := s.PeriodSpend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(db, sp) // and the database agrees
	storetest.CheckLedger(t, s)
	storetest.CheckSpendDaily(t, s)
}
