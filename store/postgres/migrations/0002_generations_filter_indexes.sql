-- 0002_generations_filter_indexes: a listing of an account's generations
-- filtered by application or request type (GET /svc/v1/generations,
-- store.ListGenerations) reads the index of that filter from the cursor
-- backwards, newest first, instead of walking every generation of the
-- account and keeping the matching ones: a rare or absent value cost a walk
-- of the whole account. seq is last, as in generations_account_created, and
-- orders the generations of one millisecond.
CREATE INDEX generations_account_application ON generations (account_id, application, created_at, seq);
CREATE INDEX generations_account_request_type ON generations (account_id, request_type, created_at, seq);
