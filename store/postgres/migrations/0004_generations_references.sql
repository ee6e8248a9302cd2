-- 0004_generations_references: a generation's account and key are checked
-- by the ledger writer instead of by foreign keys. A foreign key is checked
-- row by row: for each generation inserted, PostgreSQL ran a query of its
-- own with a row lock (SELECT … FOR KEY SHARE) on the account, then on the
-- key, and the two were about a quarter of its CPU per committed
-- generation. The writer (store/postgres_ledger.go, ledgerRefs) refuses a
-- generation whose account or key does not exist, as the foreign keys did
-- (the row is dropped alone and logged), from the accounts and keys it has
-- already seen in the database: svcgw never deletes an account or a key (a
-- key is revoked, its row kept), so one seen once exists for good, and in
-- steady state the check costs the database nothing.
--
-- What the foreign keys also did, forbid deleting an account or key that a
-- generation names, nothing needs: an account with generations is still
-- held by the other tables' foreign keys (spend_daily, usage_daily,
-- usage_periods, api_keys), and a key is never deleted.
ALTER TABLE generations DROP CONSTRAINT generations_account_id_fkey;
ALTER TABLE generations DROP CONSTRAINT generations_key_id_fkey;
