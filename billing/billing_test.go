package billing_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"
	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
)

func dec(t testing.TB, s string) apd.Decimal {
	t.Helper()
	var d apd.Decimal
	if _, _, err := d.SetString(s); err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return d
}

func TestPrices_Cost(t *testing.T) {
	p := billing.DefaultPrices()
	tests := []struct {
		name string
		t    llm.RequestType
		tier llm.Tier
		u    llm.Usage
		want string
	}{
		{"no usage is free", llm.TypePro, llm.TierMedium, llm.Usage{}, "0.000000"},
		{"one cached token costs a micro-dollar", llm.TypeFlash, llm.TierLow,
			llm.Usage{InputTokens: 1, CachedInputTokens: 1}, "0.000001"}, // 0.01 µ$: apd's ceiling quantize said 0
		{"nine hundredths of a micro-dollar are one", llm.TypeFlash, llm.TierLow,
			llm.Usage{InputTokens: 9, CachedInputTokens: 9}, "0.000001"}, // 0.09 µ$
		{"flash low input and output", llm.TypeFlash, llm.TierLow,
			llm.Usage{InputTokens: 1000, OutputTokens: 500}, "0.000300"}, // 1000×0.10 + 500×0.40 = 300 µ$
		{"a million input tokens cost the input rate", llm.TypeFlash, llm.TierLow,
			llm.Usage{InputTokens: 1_000_000}, "0.100000"},
		{"reason high", llm.TypeReason, llm.TierHigh,
			llm.Usage{InputTokens: 2_000_000, OutputTokens: 1_000_000, ReasoningTokens: 800_000}, "16.000000"}, // 2×2 + 1×12
		{"every kind of token", llm.TypePro, llm.TierMedium, llm.Usage{
			InputTokens:           10000,
			CachedInputTokens:     4000, // × 0.125
			CacheCreationTokens:   2000, // 1500 × 1.5625 + 500 × 2.5
			CacheCreation1hTokens: 500,
			OutputTokens:          1000, // × 10
			ReasoningTokens:       200,  // inside output, not charged twice
		}, "0.019094"}, // 4000×1.25 + 500 + 2343.75 + 1250 + 10000 = 19093.75 µ$, rounded up
		{"one output token is never free", llm.TypeFlash, llm.TierLow, llm.Usage{OutputTokens: 1}, "0.000001"}, // 0.4 µ$
		{"one input token is never free", llm.TypeFlash, llm.TierLow, llm.Usage{InputTokens: 1}, "0.000001"},   // 0.1 µ$
		{"exact micro-dollars are not rounded", llm.TypeFlash, llm.TierLow, llm.Usage{InputTokens: 10}, "0.000001"},
		{"a fraction just above a micro-dollar rounds up", llm.TypeFlash, llm.TierLow, llm.Usage{InputTokens: 11}, "0.000002"}, // 1.1 µ$
		{"long medium", llm.TypeLong, llm.TierMedium,
			llm.Usage{InputTokens: 40000, OutputTokens: 2000}, "0.130000"}, // 40000×2.5 + 2000×15
		{"negative counts count as zero", llm.TypeFlash, llm.TierLow,
			llm.Usage{InputTokens: 1000, OutputTokens: -5, CachedInputTokens: -3, CacheCreation1hTokens: -1}, "0.000100"},
		{"1h tokens above total writes charge no 5m writes", llm.TypePro, llm.TierMedium,
			llm.Usage{InputTokens: 100, CacheCreationTokens: 100, CacheCreation1hTokens: 200}, "0.000500"}, // 200×2.5
		{"unknown type falls back to pro medium", "mystery", llm.TierMedium,
			llm.Usage{InputTokens: 1_000_000}, "1.250000"},
		{"unknown tier falls back to pro medium", llm.TypeFlash, "ultra",
			llm.Usage{InputTokens: 1_000_000}, "1.250000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got := p.Cost(tt.t, tt.tier, tt.u)
			is.Equal(billing.Format(got), tt.want)
			is.Equal(got.Exponent, int32(-billing.Scale)) // always six places
		})
	}
}

func TestPrices_Cost_saturatesInsteadOfOverflowing(t *testing.T) {
	p := billing.DefaultPrices()
	absurd := billing.NewPrice(dec(t, "1000000000000"), dec(t, "1000000000000")) // $10^12 per million tokens
	p.Set(llm.TypePro, llm.TierHigh, absurd)
	tests := []struct {
		name string
		t    llm.RequestType
		tier llm.Tier
		u    llm.Usage
		want string
	}{
		{"9e18 output tokens at a real price", llm.TypeLong, llm.TierHigh,
			llm.Usage{OutputTokens: 9_000_000_000_000_000_000}, "1000000000.000000"},
		{"every count at the int maximum", llm.TypeLong, llm.TierHigh, llm.Usage{
			InputTokens: 1<<63 - 1, OutputTokens: 1<<63 - 1, CachedInputTokens: 1<<63 - 1,
			CacheCreationTokens: 1<<63 - 1, CacheCreation1hTokens: 1<<63 - 1}, "1000000000.000000"},
		{"an absurd price", llm.TypePro, llm.TierHigh, llm.Usage{InputTokens: 1000}, "1000000000.000000"},
		{"far past the cap, where apd's quantize fails", llm.TypePro, llm.TierHigh,
			llm.Usage{InputTokens: 1 << 62, OutputTokens: 1 << 62}, "1000000000.000000"},
		{"just under the cap is charged exactly", llm.TypeFlash, llm.TierLow,
			llm.Usage{OutputTokens: 2_499_999_997_500_000}, "999999999.000000"}, // × 0.40 per million
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got := p.Cost(tt.t, tt.tier, tt.u)
			is.Equal(billing.Format(got), tt.want)
			n, err := billing.ToMicros(got)
			is.NoErr(err) // always fits the ledger's int64 micro-dollars
			is.True(n <= billing.MaxCostMicros)
		})
	}
}

func TestPrices_Cost_cacheRates(t *testing.T) {
	p := billing.DefaultPrices()
	for _, typ := range llm.RequestTypes {
		for _, tier := range llm.Tiers {
			t.Run(string(typ)+" "+string(tier), func(t *testing.T) {
				is := is.New(t)
				const n = 100_000
				uncached := p.Cost(typ, tier, llm.Usage{InputTokens: n})
				cached := p.Cost(typ, tier, llm.Usage{InputTokens: n, CachedInputTokens: n})
				write5m := p.Cost(typ, tier, llm.Usage{InputTokens: n, CacheCreationTokens: n})
				write1h := p.Cost(typ, tier, llm.Usage{InputTokens: n, CacheCreationTokens: n, CacheCreation1hTokens: n})
				is.True(cached.Cmp(&uncached) < 0)  // a cache read is cheaper than fresh input
				is.True(uncached.Cmp(&write5m) < 0) // a cache write costs more than fresh input
				is.True(write5m.Cmp(&write1h) < 0)  // a 1h write costs more than a 5m write
			})
		}
	}
}

func TestDefaultPrices(t *testing.T) {
	p := billing.DefaultPrices()
	for _, typ := range llm.RequestTypes {
		for _, tier := range llm.Tiers {
			t.Run(string(typ)+" "+string(tier), func(t *testing.T) {
				is := is.New(t)
				pr := p.Lookup(typ, tier)
				is.True(pr.Input.Sign() > 0) // input priced
				// output priced, but for embeddings, which have none
				is.Equal(pr.Output.Sign() > 0, typ != llm.TypeEmbedding)
				want := billing.NewPrice(pr.Input, pr.Output)
				is.Equal(billing.Format(pr.CachedInput), billing.Format(want.CachedInput))
				is.Equal(billing.Format(pr.CacheWrite), billing.Format(want.CacheWrite))
				is.Equal(billing.Format(pr.CacheWrite1h), billing.Format(want.CacheWrite1h))
			})
		}
	}
	t.Run("spot prices", func(t *testing.T) {
		is := is.New(t)
		flash := p.Lookup(llm.TypeFlash, llm.TierLow)
		is.Equal(flash.Input.String(), "0.10")
		is.Equal(flash.Output.String(), "0.40")
		is.Equal(billing.Format(flash.CachedInput), "0.010000")
		is.Equal(billing.Format(flash.CacheWrite), "0.125000")
		is.Equal(billing.Format(flash.CacheWrite1h), "0.200000")
		pro := p.Lookup(llm.TypePro, llm.TierMedium)
		is.Equal(pro.Input.String(), "1.25")
		is.Equal(pro.Output.String(), "10.00")
		reason := p.Lookup(llm.TypeReason, llm.TierHigh)
		is.Equal(reason.Input.String(), "2.00")
		is.Equal(reason.Output.String(), "12.00")
	})
	t.Run("embeddings: per million input tokens, reserved on their input alone", func(t *testing.T) {
		is := is.New(t)
		e := p.Lookup(llm.TypeEmbedding, llm.TierMedium)
		is.Equal(e.Input.String(), "0.10")
		is.Equal(e.Output.String(), "0")
		is.Equal(p.CostMicros(llm.TypeEmbedding, llm.TierMedium, llm.Usage{InputTokens: 1_000_000}), money.Micros(100_000))
		is.Equal(p.CostMicros(llm.TypeEmbedding, llm.TierLow, llm.Usage{InputTokens: 1234}), money.Micros(25)) // 24.68, up
		is.Equal(p.Ceiling(llm.TypeEmbedding, llm.TierLow, nil, 1234, 0), int64(25))
	})
}

func TestPrices_Set(t *testing.T) {
	is := is.New(t)
	p := billing.DefaultPrices()
	in, out := dec(t, "3"), dec(t, "15")
	pr := billing.NewPrice(in, out)
	p.Set(llm.TypeCode, llm.TierHigh, pr)
	pr.Input.SetInt64(999) // the table keeps its own copy
	got := p.Cost(llm.TypeCode, llm.TierHigh, llm.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000})
	is.Equal(billing.Format(got), "18.000000")

	looked := p.Lookup(llm.TypeCode, llm.TierHigh)
	looked.Output.SetInt64(0) // Lookup returns a copy
	got = p.Cost(llm.TypeCode, llm.TierHigh, llm.Usage{OutputTokens: 1_000_000})
	is.Equal(billing.Format(got), "15.000000")

	var empty billing.Prices
	zero := empty.Cost(llm.TypePro, llm.TierMedium, llm.Usage{InputTokens: 5})
	is.Equal(billing.Format(zero), "0.000000") // an empty table charges nothing
	empty.Set(llm.TypePro, llm.TierMedium, billing.NewPrice(in, out))
	fell := empty.Cost(llm.TypeFlash, llm.TierLow, llm.Usage{InputTokens: 1_000_000})
	is.Equal(billing.Format(fell), "3.000000") // missing pairs fall back to pro medium
}

func TestFormat(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0", "0.000000"},
		{"0.000123", "0.000123"},
		{"10", "10.000000"},
		{"1.5", "1.500000"},
		{"-2.5", "-2.500000"},
		{"12345678.123456", "12345678.123456"},
		{"0.0000005", "0.000001"}, // half up
		{"0.0000004", "0.000000"},
		{"1E+3", "1000.000000"},
		{"1.25E-4", "0.000125"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			is := is.New(t)
			is.Equal(billing.Format(dec(t, tt.in)), tt.want)
		})
	}
}

func TestToMicros(t *testing.T) {
	tests := []struct {
		in   string
		want money.Micros
	}{
		{"0", 0},
		{"1.5", 1_500_000},
		{"0.000001", 1},
		{"0.0000015", 2}, // half up
		{"-2.25", -2_250_000},
		{"999999999999.999999", 999_999_999_999_999_999},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			is := is.New(t)
			got, err := billing.ToMicros(dec(t, tt.in))
			is.NoErr(err)
			is.Equal(got, tt.want)
			back := got.Decimal()
			is.Equal(billing.Format(back), billing.Format(dec(t, tt.in))) // round trip at six places
		})
	}
	t.Run("out of range", func(t *testing.T) {
		is := is.New(t)
		_, err := billing.ToMicros(dec(t, "99999999999999"))
		is.True(err != nil) // over an int64 of micro-dollars
		_, err = billing.ToMicros(dec(t, "NaN"))
		is.True(err != nil)
	})
	t.Run("costs convert exactly", func(t *testing.T) {
		is := is.New(t)
		c := billing.DefaultPrices().Cost(llm.TypeFlash, llm.TierLow, llm.Usage{InputTokens: 1000, OutputTokens: 500})
		n, err := billing.ToMicros(c)
		is.NoErr(err)
		is.Equal(n, money.Micros(300))
	})
}

func TestParseAmount(t *testing.T) {
	tests := []struct {
		in      string
		want    string // Format of the result; empty when an error is expected
		errHint string // a word the error message must contain
	}{
		{"10", "10.000000", ""},
		{"2.5", "2.500000", ""},
		{"2.50", "2.500000", ""},
		{"0.000001", "0.000001", ""},
		{" 7 ", "7.000000", ""},
		{".5", "0.500000", ""},
		{"0010", "10.000000", ""},
		{"999999999999.999999", "999999999999.999999", ""},
		{"", "", "empty"},
		{"   ", "", "empty"},
		{"-1", "", "negative"},
		{"-0.5", "", "negative"},
		{"+1", "", "sign"},
		{"0", "", "zero"},
		{"0.000000", "", "zero"},
		{"NaN", "", "finite"},
		{"inf", "", "finite"},
		{"-Infinity", "", "finite"},
		{"1e3", "", "exponent"},
		{"2.5E-4", "", "exponent"},
		{"0.0000001", "", "decimal places"},
		{"1.1234567", "", "decimal places"},
		{"5.", "", "decimal point"},
		{"abc", "", "not a number"},
		{"1,000", "", "not a number"},
		{"1.2.3", "", "not a number"},
		{"$5", "", "not a number"},
		{"0x10", "", "not a number"},
		{".", "", "not a number"},
		{"1000000000000", "", "too large"},
	}
	for _, tt := range tests {
		t.Run("amount "+tt.in, func(t *testing.T) {
			is := is.New(t)
			got, err := billing.ParseAmount(tt.in)
			if tt.errHint == "" {
				is.NoErr(err)
				is.Equal(billing.Format(got), tt.want)
				return
			}
			var e *llm.Error
			is.True(errors.As(err, &e)) // an *llm.Error
			is.Equal(e.Kind, llm.KindInvalidRequest)
			is.Equal(e.Param, "amount")
			is.True(strings.Contains(e.Message, tt.errHint)) // the message says which rule failed
		})
	}
}

func BenchmarkCost(b *testing.B) {
	p := billing.DefaultPrices()
	u := llm.Usage{
		InputTokens: 12000, CachedInputTokens: 8000, CacheCreationTokens: 2000,
		CacheCreation1hTokens: 1000, OutputTokens: 900, ReasoningTokens: 300,
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Cost(llm.TypeCode, llm.TierMedium, u)
	}
}
