package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// TestBackup_UnderLoad copies the database while the ledger commits
// generations and another process adds credits, and checks the copy: it
// passes integrity_check, and on it balances reconcile with credits and
// generations, and every roll-up with the generations it sums. Generation
// rowids are kept (the roll-up backfill depends on them).
func TestBackup_UnderLoad(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	s, clock := newTestStore(t)
	a, k, _ := storetest.NewAccount(t, s, "acme", "1000")
	for i := range 200 { // history, with gaps in the rowids
		s.RecordGeneration(storetest.Gen(t, fmt.Sprint("old-", i), k, "0.01"))
	}
	is.NoErr(s.Sync(ctx))
	_, err := s.w.Exec(`DELETE FROM generations WHERE id IN ('old-3', 'old-50', 'old-199')`)
	is.NoErr(err) // gaps (the ledger's invariants are restored below)
	_, err = s.w.Exec(`DELETE FROM usage_daily; DELETE FROM usage_periods; DELETE FROM spend_daily;
		INSERT INTO spend_daily (account_id, key_id, day, requests, cost_micros)
		SELECT account_id, COALESCE(key_id, ''), created_at / 86400000, COUNT(*), SUM(cost_micros) FROM generations GROUP BY 1, 2, 3;
		UPDATE accounts SET total_used_micros = 1970000, balance_micros = 1000000000 - 1970000;
		UPDATE ledger_upkeep SET backfill_after = 0, backfill_through = (SELECT MAX(rowid) FROM generations)`)
	is.NoErr(err) // as if made before roll-ups: the copy must be able to resume the backfill
	s.SetRollupsComplete(false)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the ledger under load
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			clock.Advance(time.Second)
			s.RecordGeneration(storetest.Gen(t, fmt.Sprint("new-", i), k, "0.001"))
			if i%50 == 0 {
				if err := s.Sync(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	go func() { // another process adding credits
		defer wg.Done()
		other := openTestStore(t, s.path, store.Options{})
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := other.AddCredits(ctx, a.ID, storetest.Dec(t, "1"), "top-up"); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	dest := filepath.Join(dir, "copy.db")
	res, err := Backup(ctx, s.path, dest, false)
	is.NoErr(err)                            // backed up while serving
	is.True(res.Checked && res.Bytes > 4096) // checked, not empty
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	is.NoErr(s.Sync(ctx))

	entries, err := os.ReadDir(dir)
	is.NoErr(err)
	is.Equal(len(entries), 1) // the copy alone: no partial file left

	c := openTestStore(t, dest, store.Options{})
	var check string
	is.NoErr(c.r.QueryRow(`PRAGMA integrity_check`).Scan(&check))
	is.Equal(check, "ok")
	storetest.CheckLedger(t, c) // balances reconcile in the copy
	var copied, live int
	is.NoErr(c.r.QueryRow(`SELECT COUNT(*) FROM generations`).Scan(&copied))
	is.NoErr(s.r.QueryRow(`SELECT COUNT(*) FROM generations`).Scan(&live))
	is.True(copied > 197 && copied < live) // a snapshot taken mid-load
	rowids := func(s *Store) map[string]int64 {
		rows, err := s.r.Query(`SELECT id, rowid FROM generations`)
		is.NoErr(err)
		defer rows.Close()
		m := map[string]int64{}
		for rows.Next() {
			var id string
			var rowid int64
			is.NoErr(rows.Scan(&id, &rowid))
			m[id] = rowid
		}
		return m
	}
	liveRowids := rowids(s)
	for id, rowid := range rowids(c) {
		if liveRowids[id] != rowid {
			t.Errorf("generation %s: rowid %d in the copy, %d in the database", id, rowid, liveRowids[id])
		}
	}

	// The copy resumes the backfill it was taken in the middle of.
	is.True(!c.RollupsComplete())
	var rs store.RollupSums
	for {
		ch, err := c.backfillChunk(ctx, 64, 1000, &rs, nil)
		is.NoErr(err)
		if ch.left == 0 {
			break
		}
	}
	storetest.CheckRollups(t, c)
}

func TestBackup_Refuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := newTestStore(t)
	existing := filepath.Join(dir, "existing.db")
	if err := os.WriteFile(existing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src, dest string
		want            error
	}{
		{"an existing file, even empty", s.path, existing, store.ErrInvalid},
		{"a missing database", filepath.Join(dir, "nope.db"), filepath.Join(dir, "a.db"), fs.ErrNotExist},
		{"a URI", "file:" + s.path, filepath.Join(dir, "b.db"), store.ErrInvalid},
		{"a directory", dir, filepath.Join(dir, "c.db"), store.ErrInvalid},
		{"a destination in no directory", s.path, filepath.Join(dir, "no", "d.db"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			_, err := Backup(ctx, tc.src, tc.dest, false)
			is.True(err != nil) // refused
			if tc.want != nil {
				is.True(errors.Is(err, tc.want))
			}
		})
	}
	is := is.New(t)
	b, err := os.ReadFile(existing)
	is.NoErr(err)
	is.Equal(len(b), 0) // untouched
	_, err = os.Stat(filepath.Join(dir, "nope.db"))
	is.True(errors.Is(err, fs.ErrNotExist)) // never created
	entries, err := os.ReadDir(dir)
	is.NoErr(err)
	is.Equal(len(entries), 1) // nothing but the file that was there
}
