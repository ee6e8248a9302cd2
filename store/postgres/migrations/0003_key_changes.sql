-- 0003_key_changes: a count of the changes to API keys that instances
-- cache (a revocation, new limits). Every such change adds one to it in its
-- own transaction; an instance reads the count at least once per
-- authentication-cache window (Options.AuthCacheTTL, 1 s) and forgets its
-- cached keys when it has moved, instead of reading every key again once
-- its cache entry is a window old: with many keys, each used less often
-- than once a window, that was a round trip per call.
CREATE TABLE key_changes (
    id SMALLINT PRIMARY KEY CHECK (id = 1),
    n  BIGINT   NOT NULL
);

INSERT INTO key_changes (id, n) VALUES (1, 0);
