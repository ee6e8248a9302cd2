package sqlite

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// Batches of any size go in multi-row INSERTs of 64 rows and the powers of
// two below it, so the writer holds seven prepared INSERTs however the
// batch sizes vary (one per count held ~7 MB of SQLite's memory), and every
// row is written once.
func TestCommitBatch_SevenInsertStatementsCoverEveryCount(t *testing.T) {
	is := is.New(t)
	s, _ := newTestStore(t)
	_, k, _ := storetest.NewAccount(t, s, "acme", "1000000")
	g := storetest.Gen(t, "", k, "0.000123")
	ctx := context.Background()
	agg := &store.BatchSums{Debits: make(map[int64]int64), Spend: make(map[store.SpendDay]store.SpendSum)}
	total := 0
	for size := 1; size <= 2*insertChunk+3; size++ {
		batch := make([]store.GenRow, size)
		for i := range batch {
			g.ID = "chatcmpl-" + strconv.Itoa(total)
			total++
			r, err := toRow(s, g)
			is.NoErr(err)
			batch[i] = r
		}
		is.NoErr(s.CommitBatch(ctx, batch, agg))
	}

	inserts := 0
	for q := range s.stmts {
		if strings.HasPrefix(q, "INSERT INTO generations") {
			inserts++
		}
	}
	is.Equal(inserts, len(upsertChunks)) // 64, 32, …, 1

	var rows, distinct int
	is.NoErr(s.r.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT id) FROM generations`).Scan(&rows, &distinct))
	is.Equal(rows, total)
	is.Equal(distinct, total)
}

// toRow is g in the form RecordGeneration queues it.
func toRow(s *Store, g store.Generation) (store.GenRow, error) {
	if g.CreatedAt.IsZero() {
		g.CreatedAt = s.Now()
	}
	return store.GenRow{Gen: g, CostMicros: int64(g.Cost), CreatedMS: store.Millis(g.CreatedAt)}, nil
}
