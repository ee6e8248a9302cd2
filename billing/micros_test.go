package billing_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
)

// rates are prices in USD per million tokens: the built-in ones, prices
// with up to nine places (priced in integers), with more (priced by the
// decimal code), at the edges of an int64 of 10^-9 micro-dollars, and
// absurd ones.
var rates = []string{
	"0", "0.10", "0.40", "0.30", "2.50", "1.25", "10.00", "0.075", "0.0375", "3", "15", "0.015",
	"0.000000001", "0.123456789", "7.777777777", "0.0000000001", "1.0000000001", "0.33333333333333",
	"999999.999999999", "9223372036.854775807", "9223372036.854775808", "1000000000000", "123456789012345678",
}

// counts are token counts: small, typical, huge, negative.
var counts = []int{0, 1, 2, 7, 999, 1000, 4096, 12_345, 1_000_000, 123_456_789, math.MaxInt32,
	1 << 40, 2_499_999_997_500_000, 9_000_000_000_000_000_000, math.MaxInt64, -1, math.MinInt64}

func decimal(t testing.TB, s string) apd.Decimal {
	t.Helper()
	d, _, err := apd.NewFromString(s)
	if err != nil {
		t.Fatal(err)
	}
	return *d
}

// checkCost holds CostMicros to the decimal code: ToMicros(Cost).
func checkCost(t *testing.T, p *billing.Prices, u llm.Usage) {
	t.Helper()
	c := p.Cost(llm.TypePro, llm.TierMedium, u)
	want, err := billing.ToMicros(c)
	if err != nil {
		pr := p.Lookup(llm.TypePro, llm.TierMedium)
		t.Fatalf("usage %+v at input %s output %s cached %s write %s write1h %s: %v", u, &pr.Input, &pr.Output, &pr.CachedInput, &pr.CacheWrite, &pr.CacheWrite1h, err)
	}
	if got := p.CostMicros(llm.TypePro, llm.TierMedium, u); got != want {
		pr := p.Lookup(llm.TypePro, llm.TierMedium)
		t.Fatalf("usage %+v at input %s output %s cached %s write %s write1h %s: CostMicros %d, Cost %d µ$",
			u, &pr.Input, &pr.Output, &pr.CachedInput, &pr.CacheWrite, &pr.CacheWrite1h, got, want)
	}
}

func TestCostMicros_SameAsCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2026))
	pick := func() int {
		if rng.IntN(3) == 0 {
			return counts[rng.IntN(len(counts))]
		}
		return rng.IntN(2_000_000)
	}
	p := billing.DefaultPrices()
	n := 0
	for _, in := range rates {
		for _, out := range rates {
			// Derived cache rates (×0.1, ×1.25, ×2), as the config builds them…
			prices := []billing.Price{billing.NewPrice(decimal(t, in), decimal(t, out))}
			// …and five rates chosen apart.
			var own billing.Price
			for _, r := range []*apd.Decimal{&own.Input, &own.Output, &own.CachedInput, &own.CacheWrite, &own.CacheWrite1h} {
				*r = decimal(t, rates[rng.IntN(len(rates))])
			}
			prices = append(prices, own)
			for _, pr := range prices {
				p.Set(llm.TypePro, llm.TierMedium, pr)
				for _, c := range counts {
					checkCost(t, p, llm.Usage{InputTokens: c, OutputTokens: c})
					checkCost(t, p, llm.Usage{InputTokens: c, CachedInputTokens: c / 2, CacheCreationTokens: c / 3, CacheCreation1hTokens: c / 5, OutputTokens: c / 7})
				}
				for range 200 {
					checkCost(t, p, llm.Usage{InputTokens: pick(), OutputTokens: pick(), CachedInputTokens: pick(),
						CacheCreationTokens: pick(), CacheCreation1hTokens: pick(), ReasoningTokens: pick()})
					n++
				}
			}
		}
	}
	// A negative rate (a configuration error) is priced by the decimal code.
	p.Set(llm.TypePro, llm.TierMedium, billing.NewPrice(decimal(t, "-1.5"), decimal(t, "2")))
	checkCost(t, p, llm.Usage{InputTokens: 1001, OutputTokens: 3})
	// An empty table charges nothing.
	checkCost(t, &billing.Prices{}, llm.Usage{InputTokens: 1001, OutputTokens: 3})
	t.Logf("%d random usages", n)
}

// FuzzCostMicros holds CostMicros to Cost for any counts at a price
// chosen by the fuzzer from the list, or one of its own of nine places.
func FuzzCostMicros(f *testing.F) {
	f.Add(1000, 100, 10, 5, 1, uint8(0), uint8(1), int64(0))
	f.Add(math.MaxInt64, math.MaxInt64, 0, 0, 0, uint8(19), uint8(20), int64(123456789))
	f.Fuzz(func(t *testing.T, in, out, cached, write, write1h int, ri, ro uint8, own int64) {
		p := billing.DefaultPrices()
		pr := billing.NewPrice(decimal(t, rates[int(ri)%len(rates)]), decimal(t, rates[int(ro)%len(rates)]))
		if own > 0 {
			pr.CacheWrite1h = *apd.New(own, -9)
		}
		p.Set(llm.TypePro, llm.TierMedium, pr)
		checkCost(t, p, llm.Usage{InputTokens: in, OutputTokens: out, CachedInputTokens: cached,
			CacheCreationTokens: write, CacheCreation1hTokens: write1h})
	})
}

// TestCeiling_SameAsDecimal holds Ceiling to the decimal code it replaced:
// the dearest of the three costs, in micro-dollars.
func TestCeiling_SameAsDecimal(t *testing.T) {
	hour := &llm.Request{CacheControl: &llm.CacheControl{TTL: "1h"}}
	five := &llm.Request{CacheControl: &llm.CacheControl{}}
	for _, in := range rates {
		for _, out := range rates[:8] {
			p := billing.DefaultPrices()
			p.Set(llm.TypePro, llm.TierMedium, billing.NewPrice(decimal(t, in), decimal(t, out)))
			for _, n := range counts {
				for _, req := range []*llm.Request{{}, five, hour} {
					u := llm.Usage{InputTokens: n, OutputTokens: 4096}
					want, _ := billing.ToMicros(p.Cost(llm.TypePro, llm.TierMedium, u))
					if req.CacheControl != nil {
						u.CacheCreationTokens = n
						w, _ := billing.ToMicros(p.Cost(llm.TypePro, llm.TierMedium, u))
						want = max(want, w)
						if req.CacheControl.TTL == "1h" {
							u.CacheCreation1hTokens = n
							w, _ := billing.ToMicros(p.Cost(llm.TypePro, llm.TierMedium, u))
							want = max(want, w)
						}
					}
					if got := p.Ceiling(llm.TypePro, llm.TierMedium, req, n, 4096); got != int64(want) {
						t.Fatalf("input %s output %s, %d tokens, %+v: Ceiling %d, decimal %d", in, out, n, req.CacheControl, got, want)
					}
				}
			}
		}
	}
}

// TestMicros_StringIsFormat holds money.Micros's integer rendering to
// Format's decimal one, for every size of amount.
func TestMicros_StringIsFormat(t *testing.T) {
	ns := []money.Micros{0, 1, -1, 9, 10, 999_999, 1_000_000, -1_000_000, 1_500_000, -2_500_000, 123_456_789,
		billing.MaxCostMicros, billing.MaxCreditsMicros, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	rng := rand.New(rand.NewPCG(6, 19))
	for range 10_000 {
		ns = append(ns, money.Micros(rng.Int64()>>rng.IntN(64)), money.Micros(-rng.Int64()>>rng.IntN(64)))
	}
	for _, n := range ns {
		if got, want := n.String(), billing.Format(n.Decimal()); got != want {
			t.Fatalf("Micros(%d).String() = %q, Format = %q", int64(n), got, want)
		}
	}
}

func BenchmarkCostMicros(b *testing.B) {
	p := billing.DefaultPrices()
	u := llm.Usage{
		InputTokens: 12000, CachedInputTokens: 8000, CacheCreationTokens: 2000,
		CacheCreation1hTokens: 1000, OutputTokens: 900, ReasoningTokens: 300,
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.CostMicros(llm.TypeCode, llm.TierMedium, u)
	}
}
