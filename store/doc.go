// Package store owns svcgw's database: the schema and its embedded
// migrations, every query, and the batched ledger writer that records
// generations and debits balances. It runs on two engines: SQLite in one
// file (Store, the embedded default, for one svcgw serve) and PostgreSQL
// (Postgres, which several instances share); Dial picks one by the DSN.
//
// What svcgw decides is written once, above the engines, in the policy
// both engine types embed (ledger.go): the ledger writer (its queue,
// batches, retries and health), authentication and its cache, accounts,
// keys, credits, caps, feedback, usage reports and retention. It reaches
// the database only through the narrow engine interface (engine.go):
// commit a batch, the call path's reads, a connection and a write
// transaction whose queries are written once with ? placeholders
// (conn.go), and how the engine classifies a failure. What differs is the
// engine's: its connections, its SQL where the dialects part (the ledger's
// batch, generation pages, spend), and what only it has (SQLite's WAL,
// checkpoints, bulk writer, backfill, backup and serve lock; PostgreSQL's
// balance leases and instances).
//
// On SQLite the database is opened with modernc.org/sqlite (no cgo) in WAL
// mode. The Store holds one writer connection (every write is serialised
// through it, with BEGIN IMMEDIATE) and a separate pool of read-only
// connections, so readers never wait for the ledger and the ledger never
// waits for readers.
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
// costs, and a crash (kill -9, power loss aside) can lose only generations
// not yet committed: those queued in the last BatchInterval plus the batch
// being committed while the database is healthy, and every generation held
// in memory while it fails (see below). WAL mode with synchronous=NORMAL
// survives a killed process without corruption; a power loss may also lose
// the last commits, never consistency. (A bulk writer, such as bench/seed's,
// runs its load with synchronous=OFF, which a power loss during the load
// can corrupt: such a database is refused until loaded again; see
// bulkwriter.go.)
//
// A database that fails a commit (the disk full, the write lock held by
// another process, an I/O error) never makes a generation free: its rows
// stay queued in memory, still charged in Spend, and are retried until they
// commit, while CheckLedger tells the server to refuse billable calls — the
// refusal is what bounds that memory. Only a row the database rejects as
// such (a duplicate id, an unknown account) is dropped, and logged.
//
// Spend reports, from memory, what each account and key has been charged,
// queued generations included: RecordGeneration counts a charge before it
// queues it, and the ledger takes back only the ones it drops. This is
// exact only while one Store (one svcgw serve) records generations for a
// database (LockServe makes sure of it); other processes (the CLI) may add
// credits, set caps and create keys.
//
// store may import llm and nothing else of svcgw's: never net/http, server,
// cli, billing or a surface. It returns errors instead of logging, except in
// the ledger writer, which has no caller to return them to.
package store
