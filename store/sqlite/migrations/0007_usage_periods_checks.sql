-- 0007_usage_periods_checks: usage_periods again, with the same columns,
-- key and rows, and the same checks written as comparisons. SQLite runs a
-- CHECK of the form x IN (a, b, c) — three values or more — by building a
-- temporary index of the list for every row it writes, and the ledger
-- writer upserts about seven usage_periods rows per generation with many
-- keys: the two checks of axis and span were a fifth of a commit's CPU
-- there (store.BenchmarkCommitBatch_ManyKeys, bench/RESULTS.md). x = a OR
-- x = b OR x = c accepts and refuses exactly the same values (NULL is
-- refused by NOT NULL either way).
--
-- SQLite cannot change a table's checks in place: the table is copied (its
-- rows are few: one per account, axis, period and bucket, about 100,000
-- on a ledger of 10 million calls over 1,000 keys) and the old one dropped.
CREATE TABLE usage_periods_0007 (
    account_id          INTEGER NOT NULL REFERENCES accounts (id),
    axis                TEXT    NOT NULL CHECK (axis = 'day' OR axis = 'request_type' OR axis = 'application' OR axis = 'api_key'),
    span                TEXT    NOT NULL CHECK (span = 'day' OR span = 'month' OR span = 'year'),
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

INSERT INTO usage_periods_0007
SELECT account_id, axis, span, first_day, bucket, requests, input_tokens, output_tokens,
       cached_input_tokens, cache_write_tokens, reasoning_tokens, cost_micros
FROM usage_periods ORDER BY account_id, axis, span, first_day, bucket;

DROP TABLE usage_periods;
ALTER TABLE usage_periods_0007 RENAME TO usage_periods;
