package sqlite

import (
	"context"
	"log/slog"
	"time"

	"github.com/svcgw/svcgw/store"
)

// StartUpkeep starts the store's background upkeep, which Close stops:
//
//   - first, on a database made before the usage roll-ups existed, it
//     rolls up the generations recorded before the upgrade, chunk by chunk
//     (Usage is exact meanwhile: see Usage; backfillChunk explains how);
//   - then, when opts.Retention is set, it deletes the generations older
//     than that, every Interval, a few thousand per transaction.
//
// Each transaction holds the database's write lock for about ChunkTime;
// the ledger writer waits for it at most that long, and callers never wait
// for the ledger. serve starts the upkeep; short-lived commands (the CLI)
// do not. The upkeep logs its progress and its failures, having no caller
// to return them to.
func (s *Store) StartUpkeep(opts store.UpkeepOptions) error {
	opts = opts.WithDefaults()
	log := opts.Logger
	if log == nil {
		log = s.Logger()
	}
	return s.upkeep.Start(func(ctx context.Context) { s.runUpkeep(ctx, opts, log) })
}

// stopUpkeep cancels the upkeep and waits for it to return; the
// transaction it was in is rolled back and resumed at the next start.
func (s *Store) stopUpkeep() { s.upkeep.Stop() }

func (s *Store) runUpkeep(ctx context.Context, opts store.UpkeepOptions, log *slog.Logger) {
	busy := s.LedgerBusy
	// The backfill's pacer counts usage_daily rows written per chunk,
	// retention's generations deleted per transaction.
	bp := &store.Pacer{Target: opts.ChunkTime, Size: 4000, LedgerBusy: busy}
	pp := &store.Pacer{Target: opts.ChunkTime, Size: 2000, LedgerBusy: busy}
	for !s.RollupsComplete() {
		if err := s.runBackfill(ctx, bp, log); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Error("usage roll-ups: backfill failed; retrying", "retry_in", opts.RetryDelay.String(), "error", err)
			if !store.Sleep(ctx, opts.RetryDelay) {
				return
			}
		}
	}
	store.RunRetention(ctx, s, s.Now, opts, pp, log)
}

// runBackfill rolls up every generation recorded before the roll-ups
// existed, chunk by chunk, logging its progress.
func (s *Store) runBackfill(ctx context.Context, p *store.Pacer, log *slog.Logger) error {
	b, err := readBackfill(ctx, s.w)
	if err != nil {
		return err
	}
	if b.complete() {
		s.SetRollupsComplete(true)
		return nil
	}
	start, lastLog := time.Now(), time.Now()
	log.Info("usage roll-ups: rolling up the generations recorded before this version, in the background",
		"generations", b.through-b.after)
	var (
		rs    store.RollupSums
		total int
	)
	// Reading costs processor time but holds no lock: it rests three times
	// as long as each step took, like the writing (p.pause).
	rest := func(took time.Duration) bool { return store.Sleep(ctx, 3*took) }
	for {
		c, err := s.backfillChunk(ctx, backfillLimit, int(p.Size), &rs, rest)
		if err != nil {
			return err
		}
		total += c.rolled
		left := c.left
		if left == 0 {
			s.SetRollupsComplete(true)
			log.Info("usage roll-ups: complete", "generations", total,
				"took", time.Since(start).Round(time.Millisecond).String())
			return nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			log.Info("usage roll-ups: backfill progress", "done", total, "left", left)
		}
		if !p.Pause(ctx, c.wrote, c.rows) {
			return ctx.Err()
		}
	}
}

// backfillLimit bounds the rowids one backfill chunk reads; the chunk ends
// sooner once its sums fill the pacer's number of usage_daily rows, which
// adapts so that writing them takes about ChunkTime.
const backfillLimit = 1 << 20

// CompleteBackfill rolls up at once, in chunks, the generations an older
// svcgw recorded before the usage roll-ups existed (what StartUpkeep does
// in the background): svcgw db copy runs it before it copies the roll-ups.
func (s *Store) CompleteBackfill(ctx context.Context, log *slog.Logger) error {
	return s.runBackfill(ctx, &store.Pacer{Target: 200 * time.Millisecond, Size: 4000}, log)
}
