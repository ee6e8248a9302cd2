package billing

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

// leaseLedger is a LeasingLedger held in memory: of an account's balance,
// this instance may spend its lease, which a LeaseBudget grows to what
// the calls in progress hold plus what is asked, within the balance; it
// comes back Short when the balance cannot cover that.
type leaseLedger struct {
	mu      sync.Mutex
	balance int64 // credits
	granted int64 // the lease: credits this instance may spend
	grants  int
}

var _ LeasingLedger = (*leaseLedger)(nil)

func (f *leaseLedger) Budget(ctx context.Context, id int64) (Budget, error) {
	return f.LeaseBudget(ctx, id, 0, 0)
}

func (f *leaseLedger) LeaseBudget(_ context.Context, _ int64, reserved, need int64) (Budget, error) {
	time.Sleep(2 * time.Millisecond) // a round trip: the burst's calls overlap it
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grants++
	want := reserved + need
	f.granted = max(f.granted, min(want, f.balance))
	return Budget{Credits: f.balance, DailyCap: NoCap, MonthlyCap: NoCap, Leased: true, Short: want > f.balance}, nil
}

// Spend presents the lease as the store does: credits less the lease are
// the "charges" (nothing is charged in this test).
func (f *leaseLedger) Spend(context.Context, int64, string, time.Time) (Spend, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Spend{Total: f.balance - f.granted}, nil
}

// A burst of calls refused by the instance's lease is admitted as far as
// the balance goes: each refused call waits for a read that asks for it
// (the burst's calls share reads), and only a Short read refuses.
func TestAdmission_ALeasedBurstIsRefusedOnlyWhenTheBalanceIsShort(t *testing.T) {
	is := is.New(t)
	f := &leaseLedger{balance: 3000}
	a := NewAdmission(f, AdmissionOptions{Refresh: time.Hour})
	var (
		admitted, refused atomic.Int64
		wg                sync.WaitGroup
	)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := a.Admit(context.Background(), claim(100)) // reservations held to the end
			switch {
			case err == nil && res != nil:
				admitted.Add(1)
			case kindOf(err) == llm.KindPaymentRequired:
				refused.Add(1)
			default:
				t.Errorf("admit: %v", err)
			}
		}()
	}
	wg.Wait()
	t.Logf("admitted %d, refused %d, in %d grants", admitted.Load(), refused.Load(), f.grants)
	is.Equal(admitted.Load(), int64(30)) // all the balance covers
	is.Equal(refused.Load(), int64(20))  // and no more
	is.True(f.grants < 50)               // the refused calls shared reads
}
