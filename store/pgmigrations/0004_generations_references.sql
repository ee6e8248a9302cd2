-- 0004_generations_references: the generation ledger's references to its
-- account and key are checked by the ledger's INSERT instead of by foreign
-- keys. A foreign key is checked row by row: for each generation inserted,
-- PostgreSQL runs a query of its own (SELECT … FOR KEY SHARE on the
-- referenced account, then on the key), and the two were about a quarter of
-- PostgreSQL's CPU per committed generation. The INSERT (store/
-- postgres_ledger.go) looks both up in the same statement and gives a row
-- whose account or key does not exist a NULL account_id, which the column's
-- NOT NULL rejects: the row is refused as before (the ledger drops it alone
-- and logs it), without a query and a row lock per reference.
--
-- What the foreign keys also did, forbid deleting an account or key that a
-- generation names, nothing needs: svcgw never deletes an account or a key
-- (a key is revoked, its row kept), and an account with generations is
-- still held by the other tables' foreign keys (spend_daily, usage_daily,
-- usage_periods, credit_transactions, api_keys, feedback).
ALTER TABLE generations DROP CONSTRAINT generations_account_id_fkey;
ALTER TABLE generations DROP CONSTRAINT generations_key_id_fkey;
