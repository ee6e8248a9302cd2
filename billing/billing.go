// Package billing owns what a call costs the caller: the price table (USD per
// million tokens for each request type and effort tier), the cost arithmetic,
// the parsing and rendering of USD amounts, and the limits a call is
// admitted under: its account's prepaid balance and spend caps (Admission)
// and its key's requests and tokens per minute (RateLimiter).
//
// Admission reserves a call's cost ceiling before it runs (Prices.Ceiling:
// the estimated input, uncached or at the dearest cache-write rate the
// request asks for, and min(max_tokens or the model's limit,
// ReserveOutputTokens = 4096) output tokens) and releases it when the call
// is settled, after its actual cost has been recorded. Inside it works in
// int64 micro-dollars, which is what the ledger stores; apd decimals are the
// boundary. See Admission for the admission rule, the refresh of budgets
// changed by other processes, and the overdraft bound.
//
// Money is apd.Decimal from end to end, never float64. Arithmetic runs in a
// 34-digit context, so sums of token counts times prices are exact, and a cost
// is rounded exactly once, at the end of Cost, to six decimal places (the
// precision every amount is stored and rendered with), rounding up: see Cost.
// A call's cost and ceiling are computed in integers (CostMicros, Ceiling),
// which the tests hold to the decimal code for any price and usage.
//
// billing imports only llm and apd. It never imports net/http, does no I/O and
// never logs; the price table it holds is the caller's charge only, never an
// upstream's cost.
package billing

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
)

// Scale is the number of decimal places of every amount svcgw stores and
// renders: one micro-dollar.
const Scale = 6

// arith is the context of all cost arithmetic. 34 digits (IEEE 754 decimal128)
// hold any realistic token count times any price without rounding, so the only
// rounding is the final one. Contexts are safe for concurrent use.
var arith = apd.Context{
	Precision:   34,
	MaxExponent: apd.MaxExponent,
	MinExponent: apd.MinExponent,
	Traps:       apd.DefaultTraps,
	Rounding:    apd.RoundHalfUp,
}

// chargeRounding is the one rounding of a cost: toward +infinity, so a call
// that used any tokens is never free. It overcharges by under one
// micro-dollar at most, and only when the exact cost has more than six
// decimal places.
var chargeRounding = func() apd.Context { c := arith; c.Rounding = apd.RoundCeiling; return c }()

// Price is what a million tokens of each kind cost, in USD.
type Price struct {
	Input        apd.Decimal // uncached input
	Output       apd.Decimal // output, reasoning included
	CachedInput  apd.Decimal // input read from the prompt cache
	CacheWrite   apd.Decimal // input written to the cache with the default (5 minute) lifetime
	CacheWrite1h apd.Decimal // input written to the cache with a one-hour lifetime
}

// clone returns a deep copy of p, so a caller that mutates the decimals it
// got never changes the table.
func (p *Price) clone() Price {
	var c Price
	c.Input.Set(&p.Input)
	c.Output.Set(&p.Output)
	c.CachedInput.Set(&p.CachedInput)
	c.CacheWrite.Set(&p.CacheWrite)
	c.CacheWrite1h.Set(&p.CacheWrite1h)
	return c
}

// route is a key of the price table.
type route struct {
	t    llm.RequestType
	tier llm.Tier
}

// Prices is the price table: one Price per request type and tier. The zero
// value is an empty table; DefaultPrices returns a complete one. Prices is not
// safe for concurrent use while Set is being called: build it, then share it.
type Prices struct {
	m map[route]*entry
}

// entry is a table's price with its rates as integers, for CostMicros.
type entry struct {
	Price
	scaled [5]uint64 // Input, CachedInput, CacheWrite, CacheWrite1h, Output × 10^rateScale
	exact  bool      // every rate is a non-negative multiple of 10^-rateScale that fits
}

// rateScale is how many decimal places of a rate (USD per million tokens,
// which is micro-dollars per token) CostMicros works in: a rate of
// 0.075 is 75,000,000 units of 10^-9 micro-dollars per token. A table
// rate with more places is priced by the decimal code.
const rateScale = 9

// newEntry scales pr's rates to integers.
func newEntry(pr Price) *entry {
	e := &entry{Price: pr.clone(), exact: true}
	for i, r := range [...]*apd.Decimal{&e.Input, &e.CachedInput, &e.CacheWrite, &e.CacheWrite1h, &e.Output} {
		if r.Form != apd.Finite || r.Negative {
			e.exact = false
			continue
		}
		var d apd.Decimal
		d.Set(r)
		d.Exponent += rateScale
		n, err := d.Int64() // fails with a fractional part, and past an int64
		if err != nil {
			e.exact = false
			continue
		}
		e.scaled[i] = uint64(n)
	}
	return e
}

// fallback is the route whose price an unknown type or tier is charged at.
// Classification never produces one, but a price of zero would make a
// programming error free, so it falls back to a real price instead.
var fallback = route{llm.TypePro, llm.TierMedium}

// DefaultPrices returns the built-in price table, in USD per million tokens:
//
//	type                                        low           medium         high
//	flash                                       0.10 / 0.40   0.30 / 2.50    1.25 / 10.00
//	pro, reason, code, json, vision, document   0.30 / 2.50   1.25 / 10.00   2.00 / 12.00
//	long                                        0.60 / 3.75   2.50 / 15.00   4.00 / 18.00
//
// (input / output). Flash is one class cheaper than the baseline; long
// charges twice the input and one and a half times the output of the
// baseline, as vendors do past their long-context threshold. Every price
// derives its cache rates from its input rate: a cache read costs 10%, a
// 5-minute cache write 125% and a one-hour cache write 200%.
func DefaultPrices() *Prices {
	type io struct{ in, out string }
	type rates map[llm.Tier]io
	baseline := rates{
		llm.TierLow: {"0.30", "2.50"}, llm.TierMedium: {"1.25", "10.00"}, llm.TierHigh: {"2.00", "12.00"},
	}
	table := map[llm.RequestType]rates{
		llm.TypeFlash: {llm.TierLow: {"0.10", "0.40"}, llm.TierMedium: {"0.30", "2.50"}, llm.TierHigh: {"1.25", "10.00"}},
		llm.TypeLong:  {llm.TierLow: {"0.60", "3.75"}, llm.TierMedium: {"2.50", "15.00"}, llm.TierHigh: {"4.00", "18.00"}},
	}
	p := &Prices{m: make(map[route]*entry, len(llm.RequestTypes)*len(llm.Tiers))}
	for _, t := range llm.RequestTypes {
		r, ok := table[t]
		if !ok {
			r = baseline
		}
		for _, tier := range llm.Tiers {
			p.Set(t, tier, NewPrice(mustParse(r[tier].in), mustParse(r[tier].out)))
		}
	}
	return p
}

// NewPrice returns a price with the given input and output rates and cache
// rates derived from the input rate the way DefaultPrices does: a cache read
// at 10%, a 5-minute write at 125% and a one-hour write at 200% of input.
func NewPrice(input, output apd.Decimal) Price {
	p := Price{}
	p.Input.Set(&input)
	p.Output.Set(&output)
	mulInto(&p.CachedInput, &input, apd.New(1, -1))  // 0.1
	mulInto(&p.CacheWrite, &input, apd.New(125, -2)) // 1.25
	mulInto(&p.CacheWrite1h, &input, apd.New(2, 0))  // 2
	return p
}

// mulInto sets d to x×y. It runs when a price table is built, never on a
// request path; the operands are prices and small constants, so the product
// is exact and the context cannot trap.
func mulInto(d, x, y *apd.Decimal) {
	if _, err := arith.Mul(d, x, y); err != nil {
		panic("billing: derive cache price: " + err.Error())
	}
}

// mustParse parses a literal of the built-in table.
func mustParse(s string) apd.Decimal {
	var d apd.Decimal
	if _, _, err := d.SetString(s); err != nil {
		panic(fmt.Sprintf("billing: bad built-in price %q: %v", s, err))
	}
	return d
}

// Set sets the price of a request type and tier.
func (p *Prices) Set(t llm.RequestType, tier llm.Tier, pr Price) {
	if p.m == nil {
		p.m = make(map[route]*entry)
	}
	p.m[route{t, tier}] = newEntry(pr)
}

// Lookup returns the price of a request type and tier. A pair that was never
// set is charged at pro/medium if that is set, and at zero only when the
// table does not even hold that.
func (p *Prices) Lookup(t llm.RequestType, tier llm.Tier) Price {
	return p.lookup(t, tier).clone()
}

// zeroPrice is what an empty table charges.
var zeroPrice = newEntry(Price{})

// lookup returns the table's own entry, not a copy; callers must not modify it.
func (p *Prices) lookup(t llm.RequestType, tier llm.Tier) *entry {
	if e, ok := p.m[route{t, tier}]; ok {
		return e
	}
	if e, ok := p.m[fallback]; ok {
		return e
	}
	return zeroPrice
}

// Cost returns what a call with usage u costs at the price of type t and tier
// tier, in USD:
//
//	( uncached input            × Input
//	+ cached input              × CachedInput
//	+ 5-minute cache writes     × CacheWrite      (CacheCreationTokens − CacheCreation1hTokens)
//	+ one-hour cache writes     × CacheWrite1h    (CacheCreation1hTokens)
//	+ output                    × Output ) / 1,000,000
//
// Uncached input is u.UncachedInputTokens(); reasoning is part of output.
// Negative counts are treated as zero. The exact sum is rounded once to six
// decimal places, toward +infinity (apd.RoundCeiling): any call that used
// tokens costs at least 0.000001, so tiny calls are never free and the
// ledger never undercharges; the error is below one micro-dollar per call.
//
// A cost above MaxCost is charged MaxCost: it saturates rather than
// overflowing the ledger's int64 micro-dollars, which would lose the
// record and make the call free. Usage is bounded by the model's limits
// before it is priced (see the upstream package), so only an absurd price
// can reach the cap.
func (p *Prices) Cost(t llm.RequestType, tier llm.Tier, u llm.Usage) apd.Decimal {
	return p.lookup(t, tier).cost(u)
}

// tokens returns the counts Cost prices, in the order of entry.scaled.
func tokens(u llm.Usage) [5]int {
	u = llm.Usage{
		InputTokens:           max(u.InputTokens, 0),
		OutputTokens:          max(u.OutputTokens, 0),
		CachedInputTokens:     max(u.CachedInputTokens, 0),
		CacheCreationTokens:   max(u.CacheCreationTokens, 0),
		CacheCreation1hTokens: max(u.CacheCreation1hTokens, 0),
	}
	return [5]int{
		u.UncachedInputTokens(),
		u.CachedInputTokens,
		max(u.CacheCreationTokens-u.CacheCreation1hTokens, 0),
		u.CacheCreation1hTokens,
		u.OutputTokens,
	}
}

// cost is Cost in decimals.
func (e *entry) cost(u llm.Usage) apd.Decimal {
	pr := &e.Price
	n5 := tokens(u)
	terms := [...]struct {
		tokens int
		rate   *apd.Decimal
	}{
		{n5[0], &pr.Input},
		{n5[1], &pr.CachedInput},
		{n5[2], &pr.CacheWrite},
		{n5[3], &pr.CacheWrite1h},
		{n5[4], &pr.Output},
	}
	// The operations below cannot fail: a count that fits an int times a
	// price of a few significant digits is far inside the 34-digit context
	// and its exponent range, and these contexts trap nothing else. Cost
	// runs on the metering path, so it must not panic over a condition that
	// cannot occur; the conditions are ignored.
	var sum, term, n apd.Decimal
	for _, x := range terms {
		if x.tokens == 0 {
			continue
		}
		n.SetInt64(int64(x.tokens))
		_, _ = arith.Mul(&term, &n, x.rate)
		_, _ = arith.Add(&sum, &sum, &term)
	}
	// Dividing by 10^6 is exact: shift the exponent.
	sum.Exponent -= 6
	var cost apd.Decimal
	if sum.Cmp(&maxCost) > 0 {
		// Before quantizing: past 10^28 dollars the quantized value would
		// need more than 34 digits, and apd answers NaN.
		cost.Set(&maxCost)
		return cost
	}
	_, _ = chargeRounding.Quantize(&cost, &sum, -Scale)
	if cost.IsZero() && !sum.IsZero() {
		// apd rounds a value below a tenth of the quantum to zero in every
		// mode, toward +infinity too (0.000000075 quantizes to 0.000000):
		// a call that used tokens still costs one micro-dollar.
		cost.SetFinite(1, -Scale)
	}
	return cost
}

// CostMicros is Cost in micro-dollars: ToMicros(Cost(t, tier, u)), which
// it equals for every usage and price. It runs on every call, so it
// multiplies integers: each rate times 10^9 (rateScale), 128-bit
// products and sum, one division rounding up. A price with a rate of
// more than nine decimal places (or a negative one) is priced by Cost.
func (p *Prices) CostMicros(t llm.RequestType, tier llm.Tier, u llm.Usage) money.Micros {
	return p.lookup(t, tier).costMicros(u)
}

func (e *entry) costMicros(u llm.Usage) money.Micros {
	if !e.exact {
		c := e.cost(u)
		n, _ := ToMicros(c) // at most MaxCostMicros: cannot fail
		return n
	}
	var hi, lo uint64
	for i, n := range tokens(u) {
		h, l := bits.Mul64(uint64(n), e.scaled[i])
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi, c = bits.Add64(hi, h, c)
		if c != 0 {
			return MaxCostMicros // past 2^128: far past the cap
		}
	}
	const unit = 1_000_000_000 // 10^rateScale: one micro-dollar
	if hi >= unit {
		return MaxCostMicros // a quotient of 2^64 or more
	}
	q, r := bits.Div64(hi, lo, unit)
	if r != 0 {
		q++ // round up, as Cost does; q < 2^64-1 here, since hi < unit
	}
	return money.Micros(min(q, MaxCostMicros))
}

// MaxCostMicros is the most one call is ever charged, in micro-dollars:
// one billion dollars. It leaves the ledger's int64 sums (balances, totals,
// daily spend) room for over nine thousand such charges before they could
// overflow.
const MaxCostMicros = 1_000_000_000 * 1_000_000

var maxCost = money.Micros(MaxCostMicros).Decimal()

// Format renders an amount with exactly six decimal places, as every USD
// amount appears in the API, the CLI and the store: "0.000123",
// "10.000000", "-2.500000". An amount with more places is rounded half up.
// NaN and infinities render as apd spells them.
func Format(d apd.Decimal) string {
	if d.Form != apd.Finite {
		return d.String()
	}
	var q apd.Decimal
	if _, err := arith.Quantize(&q, &d, -Scale); err != nil {
		// Only an amount with over 28 integer digits can fail here.
		return d.Text('f')
	}
	return q.Text('f')
}

// ToMicros returns an amount as a whole number of micro-dollars
// (millionths of a dollar): 1.5 is 1500000. An amount with more than six
// decimal places is rounded half up first, as Format does (where an amount
// must be exact, money.FromDecimal refuses it instead). It fails for NaN,
// infinities and amounts beyond an int64.
func ToMicros(d apd.Decimal) (money.Micros, error) {
	if d.Form != apd.Finite {
		return 0, fmt.Errorf("micro-dollars of %s: not a finite amount", &d)
	}
	var q apd.Decimal
	if _, err := arith.Quantize(&q, &d, -Scale); err != nil {
		return 0, fmt.Errorf("micro-dollars of %s: %w", &d, err)
	}
	q.Exponent = 0 // q is now coefficient × 10^-6: drop the scale
	n, err := q.Int64()
	if err != nil {
		return 0, fmt.Errorf("micro-dollars of %s: %w", &d, err)
	}
	return money.Micros(n), nil
}

// maxAmountDigits bounds the integer digits of a parsed amount so its value
// in micro-dollars always fits an int64 (the store's representation).
const maxAmountDigits = 12

// MaxCreditsMicros is money.MaxCreditsMicros: the most credit
// an account may hold in all (balance plus total used).
const MaxCreditsMicros = money.MaxCreditsMicros

// CheckCredits refuses to add amount to an account that holds credits in
// all (balance plus total used) when the sum would pass MaxCreditsMicros,
// with a message that says so. Errors are invalid_request *llm.Error
// values with Param "amount".
func CheckCredits(credits, amount apd.Decimal) error {
	var sum, limit apd.Decimal
	if _, err := arith.Add(&sum, &credits, &amount); err != nil {
		return llm.InvalidParam("amount", "amount %s cannot be added: %v", Format(amount), err)
	}
	limit = money.Micros(MaxCreditsMicros).Decimal()
	if sum.Cmp(&limit) > 0 {
		return llm.InvalidParam("amount",
			"adding %s USD would bring the account's credits (balance plus total used, now %s USD) past the maximum of %s USD",
			Format(amount), Format(credits), Format(limit))
	}
	return nil
}

// ParseAmount parses a positive USD amount as an operator types it for
// `svcgw credits add`: plain decimal digits with an optional fraction of at
// most six places ("10", "2.5", "0.000001"), surrounding spaces allowed. It
// rejects an empty value, signs, zero, NaN and infinities, exponents,
// thousands separators, more than six decimal places, and amounts of a
// trillion dollars or more, with a message that says which rule failed.
// Errors are invalid_request *llm.Error values with Param "amount".
func ParseAmount(s string) (apd.Decimal, error) {
	s = strings.TrimSpace(s)
	fail := func(format string, args ...any) (apd.Decimal, error) {
		return apd.Decimal{}, llm.InvalidParam("amount", format, args...)
	}
	if s == "" {
		return fail("amount is empty: give a positive number of dollars, such as 10 or 2.50")
	}
	shown := s
	if len(shown) > 40 {
		shown = shown[:40] + "..."
	}
	lower := strings.ToLower(s)
	if strings.Contains(lower, "nan") || strings.Contains(lower, "inf") {
		return fail("amount %q is not a finite number", shown)
	}
	switch s[0] {
	case '-':
		return fail("amount %q is negative: it must be greater than zero", shown)
	case '+':
		return fail("amount %q has a sign: write the number alone, such as 10", shown)
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if !allDigits(intPart) || (hasDot && !allDigits(frac)) || intPart == "" && frac == "" {
		if isExponent(lower) {
			return fail("amount %q uses an exponent: write it out in plain digits, such as 1500 or 0.0015", shown)
		}
		return fail("amount %q is not a number: use plain digits with an optional decimal point, such as 10 or 2.50", shown)
	}
	if hasDot && frac == "" {
		return fail("amount %q ends with a decimal point: write %s or %s.00", shown, intPart, intPart)
	}
	if len(frac) > Scale {
		return fail("amount %q has more than %d decimal places", shown, Scale)
	}
	if len(strings.TrimLeft(intPart, "0")) > maxAmountDigits {
		return fail("amount %q is too large: it must be under 1000000000000", shown)
	}
	var d apd.Decimal
	if _, _, err := d.SetString(s); err != nil {
		return fail("amount %q is not a number", shown)
	}
	if d.Sign() <= 0 {
		return fail("amount %q is zero: it must be greater than zero", shown)
	}
	return d, nil
}

// isExponent reports whether s looks like a number in scientific notation
// ("1e3", "2.5E-4"), so the error can say what is wrong with it.
func isExponent(lower string) bool {
	mant, exp, ok := strings.Cut(lower, "e")
	if !ok || mant == "" || exp == "" {
		return false
	}
	exp = strings.TrimLeft(exp, "+-")
	m1, m2, _ := strings.Cut(mant, ".")
	return exp != "" && allDigits(exp) && allDigits(m1) && allDigits(m2) && m1+m2 != ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
