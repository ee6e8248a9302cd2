-- 0001_init: accounts, API keys, credits, the generation ledger, daily spend
-- aggregates and feedback.
--
-- Money columns are INTEGER micro-dollars (1 USD = 1 000 000), so SUM is
-- exact. Times are INTEGER Unix milliseconds, UTC. Tables are STRICT: a value
-- of the wrong type (such as a REAL produced by an integer overflow) is an
-- error instead of a silent conversion.

CREATE TABLE accounts (
    id                 INTEGER PRIMARY KEY,
    name               TEXT    NOT NULL UNIQUE,
    balance_micros     INTEGER NOT NULL DEFAULT 0,
    total_used_micros  INTEGER NOT NULL DEFAULT 0,
    -- Spend caps per UTC calendar day and month; NULL: no cap.
    daily_cap_micros   INTEGER CHECK (daily_cap_micros >= 0),
    monthly_cap_micros INTEGER CHECK (monthly_cap_micros >= 0),
    created_at         INTEGER NOT NULL
) STRICT;

-- The secret is never stored: only its SHA-256 (hex) and a public id.
CREATE TABLE api_keys (
    id                 TEXT    PRIMARY KEY,  -- "key_" + 16 hex
    account_id         INTEGER NOT NULL REFERENCES accounts (id),
    name               TEXT    NOT NULL,
    secret_sha256      TEXT    NOT NULL UNIQUE,
    -- Spend caps of this key alone, per UTC calendar day and month; NULL: none.
    daily_cap_micros   INTEGER CHECK (daily_cap_micros >= 0),
    monthly_cap_micros INTEGER CHECK (monthly_cap_micros >= 0),
    -- Requests and tokens per minute; NULL: the server's default, 0: unlimited.
    rpm_limit          INTEGER CHECK (rpm_limit >= 0),
    tpm_limit          INTEGER CHECK (tpm_limit >= 0),
    created_at         INTEGER NOT NULL,
    revoked_at         INTEGER   -- NULL: active
) STRICT;

CREATE INDEX api_keys_account ON api_keys (account_id, created_at);

CREATE TABLE credit_transactions (
    id            INTEGER PRIMARY KEY,
    account_id    INTEGER NOT NULL REFERENCES accounts (id),
    amount_micros INTEGER NOT NULL CHECK (amount_micros > 0),
    note          TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL
) STRICT;

CREATE INDEX credit_transactions_account ON credit_transactions (account_id, created_at);

-- One row per billed call, written by the batched ledger writer in the same
-- transaction that debits the account.
CREATE TABLE generations (
    id                    TEXT    PRIMARY KEY,  -- the id the caller saw
    account_id            INTEGER NOT NULL REFERENCES accounts (id),
    key_id                TEXT    REFERENCES api_keys (id),
    application           TEXT    NOT NULL DEFAULT '',
    surface               TEXT    NOT NULL DEFAULT '',
    model                 TEXT    NOT NULL DEFAULT '',  -- the caller's model id, never a backend
    request_type          TEXT    NOT NULL DEFAULT '',
    tier                  TEXT    NOT NULL DEFAULT '',
    streamed              INTEGER NOT NULL DEFAULT 0,
    finish_reason         TEXT    NOT NULL DEFAULT '',
    prompt_tokens         INTEGER NOT NULL DEFAULT 0,
    completion_tokens     INTEGER NOT NULL DEFAULT 0,
    cached_prompt_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens      INTEGER NOT NULL DEFAULT 0,
    cost_micros           INTEGER NOT NULL CHECK (cost_micros >= 0),
    latency_ms            INTEGER NOT NULL DEFAULT 0,
    generation_time_ms    INTEGER NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL
) STRICT;

CREATE INDEX generations_account_created ON generations (account_id, created_at);

-- Spend per account, key and UTC day, kept by the ledger writer in the same
-- transaction as the generations it sums, so spend caps read at most a
-- month of days instead of scanning generations. key_id is '' for
-- generations made without a key. day is the UTC day number: Unix days.
CREATE TABLE spend_daily (
    account_id  INTEGER NOT NULL REFERENCES accounts (id),
    key_id      TEXT    NOT NULL DEFAULT '',
    day         INTEGER NOT NULL,
    requests    INTEGER NOT NULL DEFAULT 0,
    cost_micros INTEGER NOT NULL DEFAULT 0 CHECK (cost_micros >= 0),
    PRIMARY KEY (account_id, key_id, day)
) STRICT, WITHOUT ROWID;

CREATE INDEX spend_daily_account_day ON spend_daily (account_id, day);

-- One rating per (account, generation, end user); resubmitting updates it.
CREATE TABLE feedback (
    id            INTEGER PRIMARY KEY,
    account_id    INTEGER NOT NULL REFERENCES accounts (id),
    generation_id TEXT    NOT NULL REFERENCES generations (id),
    end_user      TEXT    NOT NULL DEFAULT '',
    rating        TEXT    NOT NULL CHECK (rating IN ('up', 'down')),
    comment       TEXT    NOT NULL DEFAULT '',
    labels        TEXT,  -- flat JSON object, or NULL
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (account_id, generation_id, end_user)
) STRICT;
