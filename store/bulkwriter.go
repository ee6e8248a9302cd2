package store

import "fmt"

// A bulk writer: a store whose batches may hold bulkBatchRows generations
// or more (a bulk load such as bench/seed's, 131,072 a batch); svcgw serve
// never makes one.
//
// Its writer connection's page cache holds writerCacheBytesPerRow a
// generation of its batch, so that the pages a commit writes (the rows,
// the insertion points of the table and its indexes, the roll-up rows it
// updates) stay in the cache until it commits. With SQLite's default 2 MB
// the cache spills dirty pages into the WAL in the middle of the
// transaction and reads them back when the commit touches them again:
// seeding in batches of 131,072 calls, twice the read and a third more
// write system calls (bench/RESULTS.md, session 4). The cache is allocated
// as pages are used, never in advance; stores with ordinary batches
// (serving) keep SQLite's defaults, so their memory is what it was.
//
// Its checkpoints stay SQLite's own, in the COMMIT that takes the WAL past
// 1,000 pages. Running them on a connection of their own after each commit
// (tried in session 4) let the WAL grow without end: the writer begins its
// next transaction before such a checkpoint ends, so it never starts on a
// fully checkpointed WAL, which is when SQLite rewinds the WAL (884 MB
// after 3 million calls, and the seeding slower for it).

// bulkBatchRows is the smallest BatchSize that makes a bulk writer.
const bulkBatchRows = 8192

// bulkWriter reports whether a store with batches of up to batchSize
// generations is a bulk writer.
func bulkWriter(batchSize int) bool { return batchSize >= bulkBatchRows }

// writerPragmas are the DSN pragmas of the writer connection for its batch
// size, beyond those of every writer: a bulk writer's page cache.
func writerPragmas(batchSize int) string {
	if !bulkWriter(batchSize) {
		return ""
	}
	return fmt.Sprintf("&_pragma=cache_size(-%d)", batchSize*writerCacheBytesPerRow/1024)
}

// writerCacheBytesPerRow is a bulk writer's page cache per generation of its
// largest batch: a committed call takes ~290 bytes on disk, most of them
// new pages that go to the WAL at the commit anyway.
const writerCacheBytesPerRow = 256
