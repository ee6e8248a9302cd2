package account

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

// Usage answers kept across ledger commits.
//
// A usage answer is a sum of roll-up rows, and a ledger commit only adds to
// them (retention deletes generations, never roll-ups; nothing else writes
// them once they are complete). So rather than dropping every answer at
// every commit and running its query again (~1.3 ms of CPU on a 10M-call
// ledger, 50 times a second per question asked under a flood at 1,000
// calls/s), the cache keeps each answer as its structured sums (a
// usageView) and adds to it what each later commit added: the store tells
// every commit's sums per (account, key, application, request type, day)
// as it commits (sqlite.Store.FollowUsage), which the cache appends to a log,
// and a read folds the log's commits since the answer's state into it and
// renders again only the buckets they changed. Why this stays exact:
//
//   - The store tells a commit before any Sync waiting for it returns, and
//     a read asks for its answer after its Sync, so the answer it gets is at
//     least as new as the ledger its own query would have read.
//   - A kept answer is one whose query no COMMIT overlapped
//     (sqlite.Store.ReadUsage), so it is exactly the state after a known
//     commit, and the commits after that one are exactly those in the log.
//   - A commit is told whole, under the cache's lock, and a read folds every
//     commit up to the last told, so no reader sees half of one. A commit
//     that failed before its COMMIT is rolled back and told nothing; one
//     whose COMMIT failed (it may have taken effect) is told as lost, and
//     everything kept is dropped.
//   - While the roll-ups of an upgraded database are being backfilled the
//     store does not call a read exact, so nothing is kept.
//   - Nothing else in an answer can change: the api_key grouping shows the
//     key's public id, which never changes (not its name), and revoking a
//     key keeps its usage.
//
// Only the SQLite store tells its commits: its serve lock makes this
// process's ledger writer the only one. On PostgreSQL other instances
// commit too, unseen, so nothing is cached there and each read runs its
// query.

// usageFeed is what a store whose ledger only this process writes offers
// (sqlite.Store): each commit's roll-up sums, and which commit a read saw.
type usageFeed interface {
	FollowUsage(fn func(store.UsageCommit)) (stop func())
	ReadUsage(read func() error) (seq uint64, exact bool, err error)
}

// usageKey names one usage answer: the account and the normalized query
// (group_by as the body echoes it, the bounds as parsed).
type usageKey struct {
	account    int64
	groupBy    string
	start, end int64 // Unix seconds: each bound is a UTC midnight, or the zero time
}

// The bounds of what the cache keeps: answers (usageCacheMax of them, and
// about usageCacheBytes of memory: an answer of a thousand keys is a few
// hundred kB), and the deltas of the commits not yet folded into every
// answer (usageLogMax, about 120 bytes each: at 1,000 calls/s of 1,000 keys
// about 16 s of commits). The least recently read answers go first; an
// answer older than the log is computed again when next read.
const (
	usageCacheMax   = 1024
	usageCacheBytes = 64 << 20
	usageLogMax     = 16384
)

// usageCache holds the usage answers kept, and the commits told since the
// oldest of them.
type usageCache struct {
	feed usageFeed // nil: no cache (PostgreSQL, where other instances commit)

	mu      sync.Mutex
	seq     uint64              // the last commit told
	base    uint64              // log holds the commits after base, through seq
	log     []store.UsageCommit // never written in place: readers keep slices of it
	logLen  int                 // deltas in log
	entries map[usageKey]*usageEntry
	bytes   int    // the entries' sizes added up
	clock   uint64 // counts reads, for the entries' last use
	queries int    // answers computed (cache misses), for tests
}

// usageEntry is one kept answer. It is being computed until ready is
// closed; then view is the answer, or nil when it could not be kept: its
// query failed (err), or a commit overlapped it, and then body is the
// answer, with every commit through from in it.
type usageEntry struct {
	ready chan struct{}
	err   error
	body  []byte
	from  uint64
	mu    sync.Mutex // held while view is brought up to date and rendered
	view  *usageView
	// used and size are the cache's, under its lock: the last read, and
	// the memory the answer takes.
	used uint64
	size int
}

// follow makes c keep answers of feed, if the store has one.
func (c *usageCache) follow(st store.DB) {
	f, ok := st.(usageFeed)
	if !ok {
		return
	}
	c.feed = f
	// The handler serves as long as the store is open: the calls end with
	// it, and need no stop.
	f.FollowUsage(c.told)
}

// told takes one commit from the store's ledger writer, which waits for
// it: it only appends the commit to the log. Readers fold it in.
func (c *usageCache) told(u store.UsageCommit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = u.Seq
	if u.Lost || len(c.entries) == 0 {
		if u.Lost {
			for k, e := range c.entries {
				c.remove(k, e)
			}
		}
		c.log, c.logLen, c.base = nil, 0, u.Seq
		return
	}
	c.log = append(c.log, u)
	c.logLen += len(u.Deltas)
	for c.logLen > usageLogMax {
		c.logLen -= len(c.log[0].Deltas)
		c.base = c.log[0].Seq
		c.log = c.log[1:] // not cleared: a reader may be folding it
	}
}

// get returns the answer of k: the kept one brought up to date, one being
// computed (it waits for it), or load's, which it keeps if it can.
func (c *usageCache) get(ctx context.Context, k usageKey, load func() (*usageView, error)) ([]byte, error) {
	c.mu.Lock()
	e := c.entries[k]
	if e == nil {
		e = &usageEntry{ready: make(chan struct{})}
		c.add(k, e)
		c.queries++
		c.mu.Unlock()
		return c.fill(k, e, load)
	}
	c.clock++
	e.used = c.clock
	need := c.seq // this read's Sync has come: its calls are in commits told
	c.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the same usage query: %w", context.Cause(ctx))
	}
	if e.view == nil {
		if e.err == nil && e.from >= need {
			return e.body, nil // not kept, but new enough for this read
		}
		// Its reader's failure (its deadline) need not be ours.
		return c.compute(load)
	}
	if body, ok := c.current(e); ok {
		return body, nil
	}
	// Older than the commits the log holds: compute it again.
	c.mu.Lock()
	if c.entries[k] == e {
		c.remove(k, e)
	}
	c.mu.Unlock()
	return c.get(ctx, k, load)
}

// compute is load's answer, not kept.
func (c *usageCache) compute(load func() (*usageView, error)) ([]byte, error) {
	v, err := load()
	if err != nil {
		return nil, err
	}
	return v.render(), nil
}

// fill computes e's answer, keeping it when the store can say which
// commit's state it is.
func (c *usageCache) fill(k usageKey, e *usageEntry, load func() (*usageView, error)) ([]byte, error) {
	var v *usageView
	seq, exact, err := c.feed.ReadUsage(func() error {
		var err error
		v, err = load()
		return err
	})
	if err == nil && exact {
		v.at = seq
		e.view = v
	}
	e.err, e.from = err, seq
	var body []byte
	if err == nil {
		body = v.render()
		if e.view == nil {
			e.body = body // for the reads waiting for it (see get)
		}
	}
	c.mu.Lock()
	if c.entries[k] == e {
		if e.view == nil {
			c.remove(k, e)
		} else {
			c.resize(e, v.size())
		}
	}
	c.mu.Unlock()
	close(e.ready)
	// Its own reader's Sync came before its query: this answer is new
	// enough for it, whatever has been committed since.
	return body, err
}

// current brings e's answer up to the last commit told and renders it; ok
// is false when the log no longer holds the commits it needs.
func (c *usageCache) current(e *usageEntry) (body []byte, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.view
	c.mu.Lock()
	seq, base, log := c.seq, c.base, c.log
	c.mu.Unlock()
	if v.at < base {
		return nil, false
	}
	if v.at < seq {
		i, _ := slices.BinarySearchFunc(log, v.at+1, func(u store.UsageCommit, seq uint64) int { return cmp.Compare(u.Seq, seq) })
		for _, u := range log[i:] {
			v.apply(u.Deltas)
		}
		v.at = seq
	}
	if v.body != nil {
		return v.body, true
	}
	body = v.render()
	c.mu.Lock()
	if e.size > 0 { // still kept (see remove)
		c.resize(e, v.size())
	}
	c.mu.Unlock()
	return body, true
}

// add keeps e under k, making room for it. Callers hold c.mu.
func (c *usageCache) add(k usageKey, e *usageEntry) {
	if c.entries == nil {
		c.entries = make(map[usageKey]*usageEntry)
	}
	c.clock++
	e.used = c.clock
	c.entries[k] = e
	c.shrink(e)
}

// remove forgets e, kept under k; e.size is 0 from then on. Callers hold
// c.mu.
func (c *usageCache) remove(k usageKey, e *usageEntry) {
	delete(c.entries, k)
	c.bytes -= e.size
	e.size = 0
}

// resize notes that e now takes size bytes. Callers hold c.mu.
func (c *usageCache) resize(e *usageEntry, size int) {
	c.bytes += size - e.size
	e.size = size
	c.shrink(e)
}

// shrink forgets the least recently read answers other than keep while
// the cache holds more than its bounds. Callers hold c.mu.
func (c *usageCache) shrink(keep *usageEntry) {
	for len(c.entries) > usageCacheMax || c.bytes > usageCacheBytes {
		var (
			oldest *usageEntry
			ok     usageKey
		)
		for k, e := range c.entries {
			if e != keep && (oldest == nil || e.used < oldest.used) {
				oldest, ok = e, k
			}
		}
		if oldest == nil {
			return
		}
		c.remove(ok, oldest)
	}
}

// usageView is one usage answer as its sums: the cells (buckets) in the
// order the body lists them, each with its rendering, and the total. It
// renders the same bytes as NewUsageReport and encodeJSON (or, grouped by
// day and an axis, usageByDay) on the same sums, which the tests check
// against the handler without a cache.
type usageView struct {
	at       uint64 // the last commit whose sums it holds
	account  int64
	axis     string // request_type, application, api_key; or day
	byDay    bool   // cells of day × axis
	from, to int32  // the days it covers, [from, to)
	head     []byte // the body before the first cell
	cells    []*usageCell
	index    map[cellKey]*usageCell
	total    usageSums
	body     []byte // the rendering; nil once a delta changed the sums
}

// cellKey names a cell: its day when grouped by day and an axis ("" else),
// and its bucket. Cells are ordered by day, then bucket, bytewise, as the
// store orders them.
type cellKey struct {
	day, bucket string
}

type usageCell struct {
	cellKey
	sums usageSums
	json []byte // the cell's rendering; nil once a delta changed it
}

// usageSums are a cell's figures; cost in micro-dollars.
type usageSums struct {
	requests, input, output, cached, cacheWrite, reasoning, cost int64
}

func (s *usageSums) add(d *store.UsageDelta) {
	s.requests += d.Requests
	s.input += d.InputTokens
	s.output += d.OutputTokens
	s.cached += d.CachedInputTokens
	s.cacheWrite += d.CacheWriteTokens
	s.reasoning += d.ReasoningTokens
	s.cost += d.CostMicros
}

func (s *usageSums) plus(t usageSums) {
	s.requests += t.requests
	s.input += t.input
	s.output += t.output
	s.cached += t.cached
	s.cacheWrite += t.cacheWrite
	s.reasoning += t.reasoning
	s.cost += t.cost
}

func (s usageSums) totals() UsageTotals {
	return UsageTotals{
		Requests:          s.requests,
		InputTokens:       s.input,
		OutputTokens:      s.output,
		TotalTokens:       s.input + s.output,
		CachedInputTokens: s.cached,
		CacheWriteTokens:  s.cacheWrite,
		ReasoningTokens:   s.reasoning,
		Cost:              money.Micros(s.cost).String(),
	}
}

// newUsageView makes the view of the answer to q (grouped by groupBy as the
// body echoes it: q.GroupBy, or day and q.GroupBy when byDay) from the
// store's cells, which are in the body's order.
func newUsageView(account int64, groupBy string, byDay bool, q store.UsageQuery, cells []store.DayBucket) (*usageView, error) {
	from, to, err := q.Days()
	if err != nil {
		return nil, err
	}
	head, err := json.Marshal(struct {
		Object    string  `json:"object"`
		GroupBy   string  `json:"group_by"`
		StartDate *string `json:"start_date"`
		EndDate   *string `json:"end_date"`
	}{"usage", groupBy, rfc3339(q.Start), rfc3339(q.End)})
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	v := &usageView{
		account: account, axis: q.GroupBy, byDay: byDay, from: from, to: to,
		head:  append(head[:len(head)-1], `,"data":[`...),
		cells: make([]*usageCell, len(cells)),
		index: make(map[cellKey]*usageCell, len(cells)),
	}
	for i, b := range cells {
		cost, err := micros(b.Cost)
		if err != nil {
			return nil, fmt.Errorf("usage: cost of %q: %w", b.Bucket.Bucket, err)
		}
		c := &usageCell{cellKey: cellKey{day: b.Day, bucket: b.Bucket.Bucket}, sums: usageSums{
			requests: b.Requests, input: b.InputTokens, output: b.OutputTokens, cached: b.CachedInputTokens,
			cacheWrite: b.CacheWriteTokens, reasoning: b.ReasoningTokens, cost: cost,
		}}
		v.cells[i], v.index[c.cellKey] = c, c
		v.total.plus(c.sums)
	}
	return v, nil
}

// micros is an amount of the store's (six decimals at most) in
// micro-dollars.
func micros(d apd.Decimal) (int64, error) {
	var q apd.Decimal
	if _, err := usdContext.Quantize(&q, &d, -6); err != nil {
		return 0, err
	}
	q.Exponent = 0
	return q.Int64()
}

// apply adds a commit's deltas to the cells they fall in: those of the
// view's account whose day the view covers. A cell new to the answer is
// placed where a query would list it.
func (v *usageView) apply(deltas []store.UsageDelta) {
	var (
		lastDay  int32
		lastDate string
	)
	date := func(day int32) string { // deltas of a commit are nearly all of one day
		if lastDate == "" || day != lastDay {
			lastDay, lastDate = day, time.Unix(int64(day)*86400, 0).UTC().Format(time.DateOnly)
		}
		return lastDate
	}
	for i := range deltas {
		d := &deltas[i]
		if d.AccountID != v.account || d.Day < v.from || d.Day >= v.to {
			continue
		}
		var k cellKey
		switch v.axis {
		case store.GroupByDay:
			k.bucket = date(d.Day)
		case store.GroupByRequestType:
			k.bucket = d.RequestType
		case store.GroupByApplication:
			k.bucket = d.Application
		case store.GroupByAPIKey:
			k.bucket = d.KeyID
		}
		if v.byDay {
			k.day = date(d.Day)
		}
		c := v.index[k]
		if c == nil {
			// Copies: the delta's strings may share memory with a request.
			c = &usageCell{cellKey: cellKey{day: strings.Clone(k.day), bucket: strings.Clone(k.bucket)}}
			i, _ := slices.BinarySearchFunc(v.cells, c.cellKey, func(c *usageCell, k cellKey) int {
				return cmp.Or(cmp.Compare(c.day, k.day), cmp.Compare(c.bucket, k.bucket))
			})
			v.cells = slices.Insert(v.cells, i, c)
			v.index[c.cellKey] = c
		}
		c.sums.add(d)
		c.json = nil
		v.total.add(d)
		v.body = nil
	}
}

// render returns the body, rendering the cells that changed since the
// last rendering.
func (v *usageView) render() []byte {
	if v.body != nil {
		return v.body
	}
	size := len(v.head) + 256
	for _, c := range v.cells {
		if c.json == nil {
			var err error
			if v.byDay {
				c.json, err = json.Marshal(DayUsageBucket{Day: c.day, Bucket: c.bucket, UsageTotals: c.sums.totals()})
			} else {
				c.json, err = json.Marshal(UsageBucket{Bucket: c.bucket, UsageTotals: c.sums.totals()})
			}
			if err != nil { // strings and integers: cannot fail
				panic(err)
			}
		}
		size += len(c.json) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, v.head...)
	for i, c := range v.cells {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, c.json...)
	}
	total, err := json.Marshal(v.total.totals())
	if err != nil {
		panic(err)
	}
	b = append(b, `],"total":`...)
	b = append(b, total...)
	v.body = append(b, "}\n"...)
	return v.body
}

// size is about the memory the view takes: its body, the cells'
// renderings (about the body again) and the cells themselves.
func (v *usageView) size() int {
	return 2*len(v.body) + 160*len(v.cells)
}
