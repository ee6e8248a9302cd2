package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// UpkeepOptions configures the store's background upkeep (StartUpkeep).
type UpkeepOptions struct {
	// Retention is how long generation rows are kept: older ones are
	// deleted (with their feedback), in small transactions. Zero keeps
	// every generation forever. Roll-ups, credits and balances are never
	// deleted.
	Retention time.Duration
	// Interval is the pause between retention passes; default 1 minute.
	Interval time.Duration
	// ChunkTime is how long one upkeep transaction should hold the
	// database's write lock, which the ledger writer then waits for; the
	// number of rows per transaction adapts to it. Default 50ms. Between
	// transactions the upkeep pauses three times as long as the last one
	// took, and longer while the ledger has half a batch of generations
	// waiting, so it takes at most a quarter of the writer's time (and
	// about as much of a core) and the ledger always catches up first;
	// within a transaction it gives up the processor every few hundred
	// rows, so calls on the same core are not held up for its length.
	ChunkTime time.Duration
	// RetryDelay is the pause after a failed upkeep transaction (the
	// database locked by another process, the disk full); default 10s.
	RetryDelay time.Duration
	// Logger receives the upkeep's progress and failures; default the
	// store's (Options.Logger).
	Logger *slog.Logger
}

// UpkeepState is the upkeep goroutine, if started.
type UpkeepState struct {
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// errUpkeepStarted means StartUpkeep was called twice.
var errUpkeepStarted = errors.New("upkeep already started")

// WithDefaults fills in the defaults of the zero fields.
func (opts UpkeepOptions) WithDefaults() UpkeepOptions {
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.ChunkTime <= 0 {
		opts.ChunkTime = 50 * time.Millisecond
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 10 * time.Second
	}
	return opts
}

// Start runs run in the upkeep goroutine, which stop cancels.
func (u *UpkeepState) Start(run func(ctx context.Context)) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.stopped:
		return ErrClosed
	case u.started:
		return errUpkeepStarted
	}
	ctx, cancel := context.WithCancel(context.Background())
	u.started, u.cancel, u.done = true, cancel, make(chan struct{})
	go func() {
		defer close(u.done)
		run(ctx)
	}()
	return nil
}

func (u *UpkeepState) Stop() {
	u.mu.Lock()
	u.stopped = true
	started := u.started
	u.mu.Unlock()
	if started {
		u.cancel()
		<-u.done
	}
}

// RunRetention deletes the generations older than opts.Retention every
// opts.Interval until ctx ends; it returns at once when there is none.
func RunRetention(ctx context.Context, pr Pruner, now func() time.Time, opts UpkeepOptions, pp *Pacer, log *slog.Logger) {
	if opts.Retention <= 0 {
		return
	}
	log.Info("retention: generation records older than the window are deleted in the background",
		"window", formatDays(opts.Retention))
	for {
		if err := PrunePass(ctx, pr, now, opts.Retention, pp, log); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Error("retention: pass failed; retrying", "retry_in", opts.RetryDelay.String(), "error", err)
			if !Sleep(ctx, opts.RetryDelay) {
				return
			}
			continue
		}
		if !Sleep(ctx, opts.Interval) {
			return
		}
	}
}

// Pruner is what retention needs of a database.
type Pruner interface {
	// startPrune records that detail before cutoff (Unix ms) is being
	// deleted; the mark only moves forward.
	startPrune(ctx context.Context, cutoff int64) error
	// pruneAccounts lists the accounts.
	pruneAccounts(ctx context.Context) ([]int64, error)
	// pruneChunk deletes up to limit of the account's oldest generations
	// created before cutoff, with their feedback, and says how many.
	pruneChunk(ctx context.Context, accountID, cutoff int64, limit int) (int, error)
}

// PrunePass deletes every generation older than retention, account by
// account, chunk by chunk.
func PrunePass(ctx context.Context, s Pruner, now func() time.Time, retention time.Duration, p *Pacer, log *slog.Logger) error {
	cutoff := Millis(now().Add(-retention))
	if err := s.startPrune(ctx, cutoff); err != nil {
		return err
	}
	accounts, err := s.pruneAccounts(ctx)
	if err != nil {
		return err
	}
	var total int
	for _, id := range accounts {
		for {
			limit := int(max(min(p.Size, 20000), 100))
			began := time.Now()
			n, err := s.pruneChunk(ctx, id, cutoff, limit)
			if err != nil {
				return err
			}
			total += n
			if n < limit {
				break
			}
			if !p.Pause(ctx, time.Since(began), n) {
				return ctx.Err()
			}
		}
	}
	if total > 0 {
		log.Info("retention: deleted generation detail", "generations", total,
			"created_before", FromMillis(cutoff).Format(time.RFC3339))
	}
	return nil
}

// Pacer sizes upkeep transactions to take about target each, and pauses
// between them three times as long as the last one took, and then for as
// long as the ledger is busy.
type Pacer struct {
	Target time.Duration
	Size   int64 // rows (or rowids) per transaction
	// LedgerBusy reports whether the ledger has generations waiting to be
	// committed: the upkeep lets it have the writer first. Nil: never.
	LedgerBusy func() bool
}

// Pause adapts the size to a transaction of n rows that took took, then
// sleeps; it reports false if ctx ended first.
func (p *Pacer) Pause(ctx context.Context, took time.Duration, n int) bool {
	switch {
	case took > 2*p.Target:
		p.Size = max(p.Size/2, 100)
	case took < p.Target/2 && int64(n) >= p.Size/2:
		p.Size = min(p.Size*2, 100000)
	}
	if !Sleep(ctx, max(3*took, time.Millisecond)) {
		return false
	}
	for p.LedgerBusy != nil && p.LedgerBusy() {
		if !Sleep(ctx, 5*time.Millisecond) {
			return false
		}
	}
	return true
}

// formatDays renders a retention window in days when it is whole days.
func formatDays(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// Sleep waits for d or ctx, reporting false if ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
