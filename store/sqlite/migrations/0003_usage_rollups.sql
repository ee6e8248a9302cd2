-- 0003_usage_rollups: usage roll-ups kept by the ledger writer in the same
-- transaction as the generations they sum, and the state of the store's
-- background upkeep (the backfill of roll-ups for the generations recorded
-- before this migration, and generation retention). docs/ledger-scale.md explains
-- the design; store/rollup.go writes and reads these tables.
--
-- (0002 is left to another change; versions need not be contiguous.)

-- The roll-up of generations: one row per account, UTC day, API key,
-- application and request type, with every sum the usage report shows and
-- a few it may. It is the finest roll-up, from which any grouping can be
-- recomputed; usage_periods below holds the groupings /usage reads.
-- day is the UTC day number (Unix days); key_id is '' for generations made
-- without a key. Token columns are as in generations: input includes cached
-- and cache-write tokens, output includes reasoning tokens.
CREATE TABLE usage_daily (
    account_id          INTEGER NOT NULL REFERENCES accounts (id),
    day                 INTEGER NOT NULL,
    key_id              TEXT    NOT NULL,
    application         TEXT    NOT NULL,
    request_type        TEXT    NOT NULL,
    requests            INTEGER NOT NULL,
    input_tokens        INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    cache_write_tokens  INTEGER NOT NULL,
    reasoning_tokens    INTEGER NOT NULL,
    cost_micros         INTEGER NOT NULL CHECK (cost_micros >= 0),
    PRIMARY KEY (account_id, day, key_id, application, request_type)
) STRICT, WITHOUT ROWID;

-- The same sums grouped the four ways /usage groups them (axis), per UTC
-- day, month and year (span; first_day is the period's first day number),
-- so that a report over any range reads whole years, then whole months,
-- then days at its edges: its cost grows with the number of buckets, not
-- with history.
-- bucket is the request type, the application or the key id ('' for none);
-- axis 'day' has one bucket, '', and only day rows.
CREATE TABLE usage_periods (
    account_id          INTEGER NOT NULL REFERENCES accounts (id),
    axis                TEXT    NOT NULL CHECK (axis IN ('day', 'request_type', 'application', 'api_key')),
    span                TEXT    NOT NULL CHECK (span IN ('day', 'month', 'year')),
    first_day           INTEGER NOT NULL,
    bucket              TEXT    NOT NULL,
    requests            INTEGER NOT NULL,
    input_tokens        INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    cache_write_tokens  INTEGER NOT NULL,
    reasoning_tokens    INTEGER NOT NULL,
    cost_micros         INTEGER NOT NULL CHECK (cost_micros >= 0),
    PRIMARY KEY (account_id, axis, span, first_day, bucket)
) STRICT, WITHOUT ROWID;

-- One row: what the background upkeep has done.
--
-- Generations that existed before this migration are rolled up by a
-- backfill in small transactions, in rowid order: those with
-- backfill_after < rowid <= backfill_through are not in the roll-ups yet
-- (every later rowid was rolled up by the ledger as it was written). The
-- backfill is complete when backfill_after = backfill_through; on a new
-- database it is complete from the start.
--
-- pruned_before is the created_at (Unix ms) before which generation detail
-- has been deleted by retention; 0 while nothing has been.
CREATE TABLE ledger_upkeep (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    backfill_after   INTEGER NOT NULL,
    backfill_through INTEGER NOT NULL,
    pruned_before    INTEGER NOT NULL DEFAULT 0
) STRICT;

INSERT INTO ledger_upkeep (id, backfill_after, backfill_through)
SELECT 1, 0, COALESCE(MAX(rowid), 0) FROM generations;

-- Retention deletes a generation's feedback with it (docs/ledger-scale.md); this
-- index keeps that, and the foreign key's own check on each deleted
-- generation, from scanning the feedback table.
CREATE INDEX feedback_generation ON feedback (generation_id);
