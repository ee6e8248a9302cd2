-- 0010_account_rate_limits: an account's requests and tokens per minute,
-- across all of its keys; NULL: no limit of the account's own (each key
-- still has its own).
ALTER TABLE accounts ADD COLUMN rpm_limit INTEGER CHECK (rpm_limit >= 0);
ALTER TABLE accounts ADD COLUMN tpm_limit INTEGER CHECK (tpm_limit >= 0);
