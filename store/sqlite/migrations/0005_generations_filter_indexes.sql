-- 0005_generations_filter_indexes: a listing of an account's generations
-- filtered by application or request type (GET /svc/v1/generations,
-- store.ListGenerations) reads the index of that filter from the cursor
-- backwards, newest first, instead of walking every generation of the
-- account and keeping the matching ones: a rare or absent value cost a walk
-- of the whole account (on one account of 10 million calls, past the 10 s
-- read limit). The rowid, the last column of every SQLite index, orders the
-- generations of one millisecond. They cost about 35 and 21 bytes a call.
-- Building them on an existing ledger holds the write lock, about 5 s of
-- CPU per million generations (docs/ledger-scale.md).
CREATE INDEX generations_account_application ON generations (account_id, application, created_at);
CREATE INDEX generations_account_request_type ON generations (account_id, request_type, created_at);
