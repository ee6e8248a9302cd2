// Package store is svcgw's database as one policy over an engine: the
// schema's rules, every decision about money and keys, and the batched
// ledger writer that records generations and debits balances, written once
// above the engines that hold the data. The engines are packages of their
// own: store/sqlite, SQLite in one file (the embedded default, for one
// svcgw serve), and store/postgres, a PostgreSQL server that several
// instances share. Each registers itself (Register) in its package's init,
// and Dial opens a DSN with the engine that claims it; a program links the
// engines it may open by importing them.
//
// What svcgw decides is written once, in the Policy both engine types
// embed: the ledger writer (its queue, batches, retries and health),
// authentication and its cache, accounts, keys, credits, caps, feedback,
// usage reports over the roll-ups and retention. It reaches the database
// only through the Engine interface (engine.go): commit a batch, the call
// path's reads, a connection and a write transaction whose queries are
// written once with ? placeholders (Conn), and how the engine classifies a
// failure; the migration step runs over a Migrator. What differs is the
// engine's: its connections, its SQL where the dialects part (the ledger's
// batch, generation pages, spend), its migrations, and what only it has.
// The engine contract's conformance suite is store/storetest: a new engine
// is one package, one Register line and a test that runs the suite.
//
// Money is apd.Decimal in Go and INTEGER micro-dollars (millionths of a USD,
// the six decimal places svcgw renders) in the database, so SQL SUM is
// exact. A value with more than six decimal places is rejected at this
// boundary: billing rounds, once, before anything reaches the store. Times
// are INTEGER Unix milliseconds in UTC, read from the injected Options.Now.
//
// API key secrets are never stored: only their SHA-256 and a public key id.
//
// The ledger writer commits each batch of generations in one transaction
// that inserts their rows, debits their accounts (balance and total_used)
// and adds their costs to spend_daily, the per (account, key, UTC day)
// aggregate that spend caps read. So at every commit, for every account,
// balance = Σ credits − Σ generation costs and total_used = Σ generation
// costs, and a crash can lose only generations not yet committed: those
// queued in the last BatchInterval plus the batch being committed while
// the database is healthy, and every generation held in memory while it
// fails (see below).
//
// A database that fails a commit (the disk full, the write lock held by
// another process, an I/O error) never makes a generation free: its rows
// stay queued in memory, still charged in Spend, and are retried until they
// commit, while CheckLedger tells the server to refuse billable calls — the
// refusal is what bounds that memory. Only a row the database rejects as
// such (a duplicate id, an unknown account) is dropped, and logged.
//
// Spend reports what each account and key has been charged, queued
// generations included: RecordGeneration counts a charge before it queues
// it (the engine's ChargeCounter), and the ledger takes back only the ones
// it drops.
//
// store may import money and nothing else of svcgw's, and its engines
// store (and, for the copy from SQLite, store/sqlite): never net/http,
// server, cli, billing or a surface. It returns errors instead of logging,
// except in the ledger writer, which has no caller to return them to.
package store
