package store

import (
	"strconv"
	"testing"

	"github.com/matryer/is"
)

// TestLedgerQueue_Blocks pushes and settles across block boundaries in
// uneven steps: order is kept, settled rows are cleared, and emptied
// blocks are reused rather than kept without bound: a few for a serving
// store, a batch's worth for a bulk writer.
func TestLedgerQueue_Blocks(t *testing.T) {
	for _, batchSize := range []int{256, BulkBatchRows} {
		t.Run(strconv.Itoa(batchSize), func(t *testing.T) { testLedgerQueueBlocks(t, batchSize) })
	}
}

func testLedgerQueueBlocks(t *testing.T, batchSize int) {
	is := is.New(t)
	s := &Policy{}
	s.Init(Options{BatchSize: batchSize}, nil, nopCharges{})
	q := &s.queue
	next, first := 0, 0 // the next id to push, the oldest queued
	push := func(k int) {
		q.mu.Lock()
		for range k {
			q.push(GenRow{Gen: Generation{ID: strconv.Itoa(next)}})
			next++
		}
		q.mu.Unlock()
		s.pending.Add(int64(k))
	}
	check := func() {
		t.Helper()
		got := q.peek(nil, 1<<20)
		is.Equal(len(got), next-first) // queued
		for i, r := range got {
			if r.Gen.ID != strconv.Itoa(first+i) {
				t.Fatalf("row %d is %s, want %d", i, r.Gen.ID, first+i)
			}
		}
		is.Equal(s.pending.Load(), int64(next-first))
		is.Equal(q.recorded-q.settled, uint64(next-first))
	}
	for _, step := range [][2]int{{1, 1}, {300, 100}, {0, 200}, {700, 299}, {256, 256}, {1, 402}, {513, 0}, {0, 513}, {2560, 0}, {0, 2560}} {
		push(step[0])
		check()
		s.settle(step[1])
		first += step[1]
		check()
	}
	is.Equal(q.n, 0)
	is.True(len(q.blocks) <= 1) // an empty queue holds at most its current block
	// And spare ones: the 2,560 rows above emptied 10 blocks.
	is.True(len(q.free) <= freeBlocks(batchSize))
	is.True(len(q.free) >= min(freeBlocks(batchSize), 10))
	for _, b := range q.free {
		for i := range b {
			is.Equal(b[i].Gen.ID, "") // cleared: no references kept
		}
	}
}

// nopCharges counts nothing: the queue alone is under test.
type nopCharges struct{}

func (nopCharges) Record(r GenRow) GenRow { return r }
func (nopCharges) Unrecord(GenRow)        {}
