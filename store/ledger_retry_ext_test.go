package store_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// TestLedger_RetryOfACommitThatHadSucceeded: a commit may report failure
// and still take effect; retrying its rows must not charge them twice, nor
// drop them as duplicates.
func TestLedger_RetryOfACommitThatHadSucceeded(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var logs storetest.LogBuffer
	s := openSQLite(t, filepath.Join(t.TempDir(), "svcgw.db"), store.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a, k, _ := storetest.NewAccount(t, s, "acme", "10")
	_, err := s.Spend(ctx, a.ID, k.ID, time.Now())
	is.NoErr(err) // loaded before the charge, as admission does

	// Queue a row as RecordGeneration would, and commit it as a batch
	// whose COMMIT took effect but reported a failure.
	is.NoErr(s.CommitUncertain(ctx, storetest.Gen(t, "twice", k, "1"), errors.New("injected fault")))

	is.NoErr(s.FlushQueued(time.Now().Add(time.Minute))) // the retry meets its own row
	is.Equal(s.Pending(), int64(0))                      // settled
	acct, err := s.AccountByID(ctx, a.ID)
	is.NoErr(err)
	is.Equal(acct.Balance.String(), "9.000000") // charged once
	storetest.CheckLedger(t, s)
	is.Equal(logs.Count("generation dropped"), 0)
	is.Equal(logs.Count("had succeeded"), 1)
	sp, err := s.Spend(ctx, a.ID, "", time.Now())
	is.NoErr(err)
	is.Equal(sp.Total, int64(1_000_000)) // counted once
}
