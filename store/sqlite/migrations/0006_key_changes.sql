-- 0006_key_changes: a count of the changes to API keys that serving
-- processes cache (a revocation, new limits). Every such change adds one to
-- it in its own transaction; a serving process reads the count at least
-- once per authentication-cache window (Options.AuthCacheTTL, 1 s) and
-- forgets its cached keys when it has moved, instead of reading every key
-- again once its cache entry is a window old: with many keys, each used
-- less often than once a window, that was one read per call.
CREATE TABLE key_changes (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
) STRICT;

INSERT INTO key_changes (id, n) VALUES (1, 0);
