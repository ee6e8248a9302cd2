-- 0009_control_plane: what the management API (/admin/v1) and the CLI
-- share: admin tokens, the audit log, key expiry, and credit transactions
-- that may be negative (refunds, corrections), carry a reference and an
-- idempotency key.

-- The secret is never stored: only its SHA-256 (hex) and a public id. A
-- name is unique among the active tokens; a revoked token keeps its row.
CREATE TABLE admin_tokens (
    id            TEXT    PRIMARY KEY,  -- "adm_" + 16 hex
    name          TEXT    NOT NULL,
    secret_sha256 TEXT    NOT NULL UNIQUE,
    read_only     INTEGER NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    created_at    INTEGER NOT NULL,
    revoked_at    INTEGER  -- NULL: active
) STRICT;

CREATE UNIQUE INDEX admin_tokens_active_name ON admin_tokens (name) WHERE revoked_at IS NULL;

-- Every change made through the management API or the CLI, in the
-- transaction of the change: who (an admin token's name, or "cli"), what,
-- to what, and the entity before and after it as JSON (NULL: none). Kept
-- forever.
CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY,
    created_at INTEGER NOT NULL,
    actor      TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    target     TEXT    NOT NULL,
    before     TEXT,
    after      TEXT
) STRICT;

-- A key past expires_at (Unix ms) is refused; NULL: never expires.
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;

-- credit_transactions again, with the CHECK that refused a negative
-- amount relaxed to refuse only zero (SQLite cannot change a CHECK in
-- place), and with: the caller's reference (a payment id); who made it;
-- the balance right after it; the Idempotency-Key it was made under
-- (unique: a retry anywhere finds the first) and the SHA-256 of the
-- request it answered.
CREATE TABLE credit_transactions_new (
    id                   INTEGER PRIMARY KEY,
    account_id           INTEGER NOT NULL REFERENCES accounts (id),
    amount_micros        INTEGER NOT NULL CHECK (amount_micros <> 0),
    note                 TEXT    NOT NULL DEFAULT '',
    created_at           INTEGER NOT NULL,
    reference            TEXT    NOT NULL DEFAULT '',
    actor                TEXT    NOT NULL DEFAULT '',
    balance_after_micros INTEGER,
    idempotency_key      TEXT    UNIQUE,
    request_sha256       TEXT
) STRICT;

INSERT INTO credit_transactions_new (id, account_id, amount_micros, note, created_at)
    SELECT id, account_id, amount_micros, note, created_at FROM credit_transactions;

DROP TABLE credit_transactions;

ALTER TABLE credit_transactions_new RENAME TO credit_transactions;

CREATE INDEX credit_transactions_account ON credit_transactions (account_id, created_at);
