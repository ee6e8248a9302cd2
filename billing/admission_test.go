package billing

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

// fakeLedger is a Ledger held in memory: charges recorded by the test, a
// budget it may change as another process would, and counts of reads.
type fakeLedger struct {
	mu      sync.Mutex
	budget  Budget
	spend   Spend
	reads   int
	readErr error
}

var _ Ledger = (*fakeLedger)(nil)

func (f *fakeLedger) Budget(context.Context, int64) (Budget, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.budget, f.readErr
}

func (f *fakeLedger) Spend(context.Context, int64, string, time.Time) (Spend, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spend, nil
}

// charge records a settled cost, as the store does when a generation is
// recorded.
func (f *fakeLedger) charge(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spend.Total += n
	f.spend.AccountDay += n
	f.spend.AccountMonth += n
	f.spend.KeyDay += n
	f.spend.KeyMonth += n
}

func (f *fakeLedger) set(fn func(*fakeLedger)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// fakeClock is a hand-moved clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var noon = time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)

func claim(amount int64) Claim {
	return Claim{AccountID: 1, KeyID: "key_1", KeyDailyCap: NoCap, KeyMonthlyCap: NoCap, Amount: amount, Now: noon}
}

func kindOf(err error) llm.Kind {
	var e *llm.Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

func TestAdmission_ReservesAndReleases(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	l := &fakeLedger{budget: Budget{Credits: 100, DailyCap: NoCap, MonthlyCap: NoCap}}
	a := NewAdmission(l, AdmissionOptions{})

	r1, err := a.Admit(ctx, claim(60))
	is.NoErr(err) // 60 of 100
	_, err = a.Admit(ctx, claim(50))
	is.Equal(kindOf(err), llm.KindPaymentRequired) // 60 held + 50 > 100
	is.True(strings.Contains(err.Error(), "0.000060 USD is held by calls in progress"))

	// Settle r1 at less than its ceiling: charge first, then release.
	l.charge(30)
	r1.Release()
	r1.Release() // idempotent
	r2, err := a.Admit(ctx, claim(70))
	is.NoErr(err) // 100 - 30 = 70 left
	_, err = a.Admit(ctx, claim(1))
	is.Equal(kindOf(err), llm.KindPaymentRequired) // nothing left
	r2.Release()

	var nilRes *Reservation
	nilRes.Release() // safe on nil
}

func TestAdmission_EmptyBalanceIsRefusedWithoutRetryAfter(t *testing.T) {
	is := is.New(t)
	l := &fakeLedger{budget: Budget{Credits: 10, DailyCap: NoCap, MonthlyCap: NoCap}}
	l.charge(10)
	a := NewAdmission(l, AdmissionOptions{})
	_, err := a.Admit(context.Background(), claim(0))
	is.Equal(kindOf(err), llm.KindPaymentRequired) // a zero balance admits nothing, not even a free call
	var e *llm.Error
	is.True(errors.As(err, &e))
	is.Equal(e.RetryAfter, time.Duration(0)) // adding credits helps, waiting does not
	is.True(strings.Contains(e.Message, "balance is 0.000000 USD"))
	is.True(strings.Contains(e.Message, "add credits"))
}

func TestAdmission_Caps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  Budget
		keyCaps [2]int64 // daily, monthly
		want    string
		retry   time.Duration
	}{
		{"account daily", Budget{Credits: 1e9, DailyCap: 100, MonthlyCap: NoCap}, [2]int64{NoCap, NoCap},
			"the account's daily cap is 0.000100 USD", 12 * time.Hour},
		{"account monthly", Budget{Credits: 1e9, DailyCap: NoCap, MonthlyCap: 100}, [2]int64{NoCap, NoCap},
			"the account's monthly cap is 0.000100 USD", 12 * time.Hour},
		{"key daily", Budget{Credits: 1e9, DailyCap: NoCap, MonthlyCap: NoCap}, [2]int64{100, NoCap},
			"this key's daily cap is 0.000100 USD", 12 * time.Hour},
		{"key monthly", Budget{Credits: 1e9, DailyCap: NoCap, MonthlyCap: NoCap}, [2]int64{NoCap, 100},
			"this key's monthly cap is 0.000100 USD", 12 * time.Hour},
		{"both: the month is reported", Budget{Credits: 1e9, DailyCap: 100, MonthlyCap: 100}, [2]int64{NoCap, NoCap},
			"monthly cap", 12 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			l := &fakeLedger{budget: tc.budget}
			a := NewAdmission(l, AdmissionOptions{})
			c := claim(60)
			c.KeyDailyCap, c.KeyMonthlyCap = tc.keyCaps[0], tc.keyCaps[1]
			r, err := a.Admit(ctx, c)
			is.NoErr(err) // 60 of 100
			_, err = a.Admit(ctx, c)
			is.Equal(kindOf(err), llm.KindPaymentRequired) // 60 held + 60 > 100
			var e *llm.Error
			is.True(errors.As(err, &e))
			is.True(strings.Contains(e.Message, tc.want)) // names the cap
			is.True(strings.Contains(e.Message, "resets at 2026-02-01T00:00:00Z"))
			is.Equal(e.RetryAfter, tc.retry) // until midnight (also the 1st)
			r.Release()
			_, err = a.Admit(ctx, c)
			is.NoErr(err) // released: fits again
		})
	}
}

func TestAdmission_CapResetsWithThePeriod(t *testing.T) {
	is := is.New(t)
	l := &fakeLedger{budget: Budget{Credits: 1e9, DailyCap: NoCap, MonthlyCap: 100}}
	a := NewAdmission(l, AdmissionOptions{})
	c := claim(60)
	c.Now = time.Date(2026, 3, 15, 6, 0, 0, 0, time.UTC)
	l.charge(60)
	_, err := a.Admit(context.Background(), c)
	var e *llm.Error
	is.True(errors.As(err, &e))                          // refused
	is.Equal(e.RetryAfter, 16*24*time.Hour+18*time.Hour) // to April 1st, 00:00 UTC
}

func TestAdmission_RereadsBeforeRefusing(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clock := &fakeClock{t: noon}
	l := &fakeLedger{budget: Budget{Credits: 0, DailyCap: NoCap, MonthlyCap: NoCap}}
	a := NewAdmission(l, AdmissionOptions{Refresh: time.Hour, Clock: clock.Now})

	_, err := a.Admit(ctx, claim(10))
	is.Equal(kindOf(err), llm.KindPaymentRequired) // broke
	reads := l.reads

	// Credits added elsewhere (the CLI): the cached budget is stale, but
	// the call that would be refused reads it again.
	l.set(func(f *fakeLedger) { f.budget.Credits = 100 })
	r, err := a.Admit(ctx, claim(10))
	is.NoErr(err)              // admitted on the fresh read
	is.Equal(l.reads, reads+1) // one more read
	_, err = a.Admit(ctx, claim(10))
	is.NoErr(err)              // admitted on the cached budget
	is.Equal(l.reads, reads+1) // no read for a call that fits
	r.Release()

	// A lowered cap is seen once the cache expires.
	l.set(func(f *fakeLedger) { f.budget.DailyCap = 5 })
	_, err = a.Admit(ctx, claim(10))
	is.NoErr(err) // within the refresh interval: the old (no) cap
	clock.Advance(time.Hour + time.Millisecond)
	_, err = a.Admit(ctx, claim(10))
	is.Equal(kindOf(err), llm.KindPaymentRequired) // refreshed: capped
}

func TestAdmission_ReadFailureIsNotARefusal(t *testing.T) {
	is := is.New(t)
	l := &fakeLedger{readErr: errors.New("disk on fire")}
	a := NewAdmission(l, AdmissionOptions{})
	_, err := a.Admit(context.Background(), claim(10))
	is.True(err != nil)        // fails
	is.True(kindOf(err) == "") // but not as a 402: the caller gets a 500
}

// TestAdmission_ConcurrentNeverOverReserves admits many calls at once while
// others settle, and checks that what is charged plus what is held never
// exceeds the credits.
func TestAdmission_ConcurrentNeverOverReserves(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	const credits, amount = 10_000, 70
	l := &fakeLedger{budget: Budget{Credits: credits, DailyCap: NoCap, MonthlyCap: NoCap}}
	a := NewAdmission(l, AdmissionOptions{})

	var (
		mu       sync.Mutex
		held     int64
		admitted int
		wg       sync.WaitGroup
	)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				r, err := a.Admit(ctx, claim(amount))
				if err != nil {
					continue
				}
				mu.Lock()
				held += amount
				admitted++
				l.mu.Lock()
				total := l.spend.Total
				l.mu.Unlock()
				if total+held > credits {
					t.Errorf("charged %d + held %d > credits %d", total, held, credits)
				}
				// Stop counting it as held before it is charged, so the
				// test's own count never holds it twice.
				held -= amount
				mu.Unlock()
				l.charge(amount / 2) // actual cost below the ceiling
				r.Release()
			}
		}()
	}
	wg.Wait()
	is.True(l.spend.Total <= credits)       // never overdrawn
	is.True(l.spend.Total > credits-amount) // and used up to the last ceiling
	is.Equal(int64(admitted)*amount/2, l.spend.Total)
}

func TestReservedOutputTokens(t *testing.T) {
	is := is.New(t)
	is.Equal(ReservedOutputTokens(16, 32000, ReserveOutputTokens), 16)       // max_tokens
	is.Equal(ReservedOutputTokens(0, 32000, ReserveOutputTokens), 4096)      // capped
	is.Equal(ReservedOutputTokens(0, 1000, ReserveOutputTokens), 1000)       // the model's limit
	is.Equal(ReservedOutputTokens(100000, 32000, ReserveOutputTokens), 4096) // capped
	is.Equal(ReservedOutputTokens(0, 0, ReserveOutputTokens), 4096)          // unknown limit
}

func TestPrices_Ceiling(t *testing.T) {
	is := is.New(t)
	p := DefaultPrices()
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}}
	// pro/medium: 1.25 in, 10.00 out per million.
	got := p.Ceiling(llm.TypePro, llm.TierMedium, req, 1000, 100)
	is.Equal(got, int64(1250+1000)) // 1000×1.25 + 100×10 micro-dollars

	// Any usage within the counts costs at most the ceiling.
	for _, u := range []llm.Usage{
		{InputTokens: 1000, OutputTokens: 100},
		{InputTokens: 1000, OutputTokens: 100, CachedInputTokens: 1000},
		{InputTokens: 999, OutputTokens: 99},
	} {
		c, err := ToMicros(p.Cost(llm.TypePro, llm.TierMedium, u))
		is.NoErr(err)
		is.True(int64(c) <= got) // within the ceiling
	}

	// Cache breakpoints price input as cache writes, the dearest kind.
	req.Messages[0].Parts[0].CacheControl = &llm.CacheControl{}
	five := p.Ceiling(llm.TypePro, llm.TierMedium, req, 1000, 100)
	is.Equal(five, int64(1563+1000)) // 1000×1.5625, rounded up, + output
	req.Messages[0].Parts[0].CacheControl = &llm.CacheControl{TTL: "1h"}
	hour := p.Ceiling(llm.TypePro, llm.TierMedium, req, 1000, 100)
	is.Equal(hour, int64(2500+1000)) // 1000×2.5 + output
	c, err := ToMicros(p.Cost(llm.TypePro, llm.TierMedium, llm.Usage{InputTokens: 1000, OutputTokens: 100, CacheCreationTokens: 1000, CacheCreation1hTokens: 1000}))
	is.NoErr(err)
	is.True(int64(c) <= hour) // a full one-hour write fits
}

func BenchmarkAdmission_Admit(b *testing.B) {
	l := &fakeLedger{budget: Budget{Credits: 1 << 60, DailyCap: 1 << 60, MonthlyCap: 1 << 60}}
	a := NewAdmission(l, AdmissionOptions{})
	ctx := context.Background()
	c := claim(1000)
	b.ReportAllocs()
	for b.Loop() {
		r, err := a.Admit(ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

func BenchmarkPrices_Ceiling(b *testing.B) {
	p := DefaultPrices()
	req := &llm.Request{MaxTokens: 16, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Ceiling(llm.TypePro, llm.TierMedium, req, 1000, 4096)
	}
}

// TestAdmission_ExactlyOnTheLimit pins each limit's boundary: a call whose
// spend, reservations in flight and ceiling add up exactly to the limit is
// admitted, and one micro-dollar more is refused.
func TestAdmission_ExactlyOnTheLimit(t *testing.T) {
	const spent, held = 30, 25 // charged, and reserved by a call in flight
	for _, tc := range []struct {
		name    string
		budget  Budget
		keyCaps [2]int64 // daily, monthly
		want    string
	}{
		{"balance", Budget{Credits: 100, DailyCap: NoCap, MonthlyCap: NoCap}, [2]int64{NoCap, NoCap}, "insufficient credits: the account balance is 0.000070 USD"},
		// A lease is this instance's part of the balance: the refusal does
		// not call it the account's balance.
		{"leased balance", Budget{Credits: 100, DailyCap: NoCap, MonthlyCap: NoCap, Leased: true}, [2]int64{NoCap, NoCap}, "insufficient credits: 0.000070 USD of the account balance is available to this call now"},
		{"account daily cap", Budget{Credits: 1e9, DailyCap: 100, MonthlyCap: NoCap}, [2]int64{NoCap, NoCap}, "the account's daily cap"},
		{"account monthly cap", Budget{Credits: 1e9, DailyCap: NoCap, MonthlyCap: 100}, [2]int64{NoCap, NoCap}, "the account's monthly cap"},
		{"key daily cap", Budget{Credits: 1e9, DailyCap: NoCap, MonthlyCap: NoCap}, [2]int64{100, NoCap}, "this key's daily cap"},
		{"key monthly cap", Budget{Credits: 1e9, DailyCap: NoCap, MonthlyCap: NoCap}, [2]int64{NoCap, 100}, "this key's monthly cap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			for _, amount := range []int64{100 - spent - held, 100 - spent - held + 1} {
				is := is.New(t)
				l := &fakeLedger{budget: tc.budget}
				l.charge(spent)
				a := NewAdmission(l, AdmissionOptions{})
				c := claim(held)
				c.KeyDailyCap, c.KeyMonthlyCap = tc.keyCaps[0], tc.keyCaps[1]
				inFlight, err := a.Admit(ctx, c)
				is.NoErr(err) // the call in flight
				c.Amount = amount
				r, err := a.Admit(ctx, c)
				if amount == 100-spent-held {
					is.NoErr(err) // exactly on the limit
					r.Release()
				} else {
					is.Equal(kindOf(err), llm.KindPaymentRequired) // one micro-dollar over
					is.True(strings.Contains(err.Error(), tc.want))
				}
				inFlight.Release()
			}
		})
	}
}

// Each cap is held to its own spend: the account's caps to the account's
// day and month (and everything held in it), the key's to the key's own.
// The four spends (and the account's and key's holds) all differ, so a cap
// compared with any other spend than its own admits a call it must refuse
// or refuses one it must admit.
func TestAdmission_EachCapCountsItsOwnSpend(t *testing.T) {
	spend := Spend{Total: 70, AccountDay: 50, AccountMonth: 70, KeyDay: 10, KeyMonth: 30}
	const (
		amount = 20
		held   = 5 // by another key of the account
	)
	for _, tc := range []struct {
		name string
		// used is what the cap counts: its spend (and holds) plus amount.
		used int64
		set  func(b *Budget, c *Claim, limit int64)
	}{
		{"account daily", spend.AccountDay + held + amount, func(b *Budget, _ *Claim, n int64) { b.DailyCap = n }},
		{"account monthly", spend.AccountMonth + held + amount, func(b *Budget, _ *Claim, n int64) { b.MonthlyCap = n }},
		{"key daily", spend.KeyDay + amount, func(_ *Budget, c *Claim, n int64) { c.KeyDailyCap = n }},
		{"key monthly", spend.KeyMonth + amount, func(_ *Budget, c *Claim, n int64) { c.KeyMonthlyCap = n }},
	} {
		for _, fits := range []bool{true, false} {
			name := tc.name + ", exactly on the cap"
			limit := tc.used
			if !fits {
				name, limit = tc.name+", a micro-dollar over", tc.used-1
			}
			t.Run(name, func(t *testing.T) {
				is := is.New(t)
				ctx := context.Background()
				b := Budget{Credits: 1e9, DailyCap: NoCap, MonthlyCap: NoCap}
				c := claim(amount)
				tc.set(&b, &c, limit)
				a := NewAdmission(&fakeLedger{budget: b, spend: spend}, AdmissionOptions{})
				other := claim(held)
				other.KeyID = "key_2"
				_, err := a.Admit(ctx, other)
				is.NoErr(err) // another key's hold
				_, err = a.Admit(ctx, c)
				if fits {
					is.NoErr(err) // on the cap: admitted
				} else {
					is.Equal(kindOf(err), llm.KindPaymentRequired) // over it: refused
				}
			})
		}
	}
}
