-- 0002_seal_keys: the keys svcgw seals the tokens it hands callers with
-- (Responses API item ids that carry their item, reasoning signatures; see
-- package seal). Every instance on this database shares them, so a token
-- one instance sealed opens on any other. The first key is made, from
-- crypto/rand, by the first store that finds none (Store.SealKeys): SQLite's
-- randomblob() is not a documented cryptographic source.
--
-- The highest id seals; every row opens. Rotate by inserting a higher id;
-- delete a key once no token sealed under it is still in use.

CREATE TABLE seal_keys (
    id         INTEGER PRIMARY KEY CHECK (id BETWEEN 1 AND 255),
    secret     BLOB    NOT NULL CHECK (length(secret) = 32),
    created_at INTEGER NOT NULL
) STRICT;
