-- Spending limits of API keys (issue 15; server/ledger/spend-limits.ts), as SQLite version 17 adds them.
--
-- A hold checks its key's limit in its own transaction, so the ledger keeps them: one row per key that has had a
-- limit. limit_micros is NULL once the limit is removed; period_start and period_seq name the period now counted
-- (period_seq grows by one at every rollover and every change of period), spent_micros what the key's holds not
-- released took in it. A lowered limit may sit below what was spent, so no CHECK ties the two. key_id is
-- identity's api_keys.id, without a foreign key: the ledger knows no keys.
CREATE TABLE key_spend_limits (
  key_id        TEXT COLLATE "C" PRIMARY KEY,
  limit_micros  BIGINT CHECK (limit_micros IS NULL OR limit_micros > 0),
  period        TEXT COLLATE "C" NOT NULL CHECK (period IN ('day', 'month', 'total')),
  period_start  BIGINT NOT NULL,
  period_seq    BIGINT NOT NULL DEFAULT 0,
  spent_micros  BIGINT NOT NULL DEFAULT 0 CHECK (spent_micros >= 0)
);

-- The key and the period a hold was counted in (NULL for a hold no limit counted): its release gives the amount
-- back to that period only. The index serves the invariant that sums each key's counted holds.
ALTER TABLE holds ADD COLUMN spend_key_id TEXT COLLATE "C";
ALTER TABLE holds ADD COLUMN spend_period_seq BIGINT;
CREATE INDEX holds_by_spend_period ON holds(spend_key_id, spend_period_seq) WHERE spend_key_id IS NOT NULL;
