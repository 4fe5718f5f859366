import type { SchemaStep } from "../db/migrations";

/**
 * The call path's tables: calls and idempotency keys.
 *
 * Each step belongs to one global schema version (server/schema.ts names the versions and applies them in order):
 * a step is never edited once it has shipped; a change is a step of a new version. Money columns are INTEGER base units.
 */
export const GATEWAY_SCHEMA: readonly SchemaStep[] = [
  {
    version: 1,
    sql: `
CREATE TABLE calls (
  id              TEXT PRIMARY KEY,
  account_id      TEXT NOT NULL REFERENCES accounts(id),
  api_key_id      TEXT NOT NULL,
  skill_id        TEXT NOT NULL,
  endpoint        TEXT NOT NULL CHECK (endpoint IN ('call', 'skill_call')),
  http_status     INTEGER NOT NULL,
  outcome         TEXT NOT NULL,
  charged_micros  INTEGER NOT NULL DEFAULT 0 CHECK (charged_micros >= 0),
  hold_id         TEXT,
  latency_us      INTEGER NOT NULL,
  created_at      INTEGER NOT NULL
);
CREATE INDEX calls_by_account ON calls(account_id, created_at);

CREATE TABLE idempotency_keys (
  account_id    TEXT NOT NULL,
  key           TEXT NOT NULL,
  request_hash  TEXT NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),
  status_code   INTEGER,
  response_body TEXT,
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (account_id, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_by_age ON idempotency_keys(created_at);
`,
  },
  {
    version: 4,
    sql: `
-- A receipt names its call by the call's id; the settler finds it from the hold.
CREATE INDEX calls_by_hold ON calls(hold_id) WHERE hold_id IS NOT NULL;
`,
  },
  {
    version: 18,
    sql: `
-- x402 (issue 15): a call paid per call with an EIP-3009 authorization, with no account or key, is logged here too,
-- under the x402 payers' system account and endpoint 'x402' (its payer and payment are in x402_payments, by call
-- id). The endpoint's CHECK cannot be changed in place, so the table is rebuilt with its rowids (the usage pages
-- order by them) and its indexes. Version 18 rebuilds tables (server/ledger/schema.ts says so for the version).
CREATE TABLE calls_v18 (
  id              TEXT PRIMARY KEY,
  account_id      TEXT NOT NULL REFERENCES accounts(id),
  api_key_id      TEXT NOT NULL,
  skill_id        TEXT NOT NULL,
  endpoint        TEXT NOT NULL CHECK (endpoint IN ('call', 'skill_call', 'x402')),
  http_status     INTEGER NOT NULL,
  outcome         TEXT NOT NULL,
  charged_micros  INTEGER NOT NULL DEFAULT 0 CHECK (charged_micros >= 0),
  hold_id         TEXT,
  latency_us      INTEGER NOT NULL,
  created_at      INTEGER NOT NULL
);
INSERT INTO calls_v18 (rowid, id, account_id, api_key_id, skill_id, endpoint, http_status, outcome, charged_micros,
                       hold_id, latency_us, created_at)
SELECT rowid, id, account_id, api_key_id, skill_id, endpoint, http_status, outcome, charged_micros,
       hold_id, latency_us, created_at
FROM calls;
DROP TABLE calls;
ALTER TABLE calls_v18 RENAME TO calls;
CREATE INDEX calls_by_account ON calls(account_id, created_at);
CREATE INDEX calls_by_hold ON calls(hold_id) WHERE hold_id IS NOT NULL;
`,
  },
  {
    version: 20,
    sql: `
-- Calls a key's own limits refused (its rate limits, its account's daily cap) are counted here per key, skill,
-- outcome and UTC minute (minute: its first millisecond), not logged one by one in calls (issue 23): a flood of
-- refusals costs rows per minute, not per call. GET /v1/usage/daily shows them as each day's "refused".
CREATE TABLE call_refusals (
  account_id  TEXT NOT NULL REFERENCES accounts(id),
  api_key_id  TEXT NOT NULL,
  skill_id    TEXT NOT NULL,
  outcome     TEXT NOT NULL CHECK (outcome IN ('rate_limited', 'daily_limit_reached')),
  minute      INTEGER NOT NULL,
  count       INTEGER NOT NULL CHECK (count > 0),
  PRIMARY KEY (account_id, api_key_id, skill_id, outcome, minute)
);
`,
  },
  {
    version: 26,
    sql: `
-- Calls whose backend answered 2xx with a body that broke the skill's output schema (issue 27: outcome
-- 'skill_bad_output' in calls, not charged), with the first problem found, for the skill's seller to see: the place in
-- the seller's own schema and the keyword that failed, never anything of the answer (the buyer's data). Written in the
-- transaction that records the call.
CREATE TABLE call_output_failures (
  call_id     TEXT PRIMARY KEY,
  skill_id    TEXT NOT NULL,
  endpoint    TEXT NOT NULL,
  problem     TEXT NOT NULL,
  created_at  INTEGER NOT NULL
);
CREATE INDEX call_output_failures_by_skill ON call_output_failures(skill_id, created_at);
`,
  },
  {
    version: 28,
    sql: `
-- The skills' quality roll-up (issue 27 §3): every skill's calls counted per UTC hour (hour: its first millisecond),
-- result ('success' or the error code the call ended with) and latency bucket (server/gateway/quality.ts: fixed,
-- log-scale), with what they captured. The marketplace's figures (success rate, p50 and p95 over the last 7 days) and
-- the seller's stats are read from these rows, never from the calls log. Counts are only added to, by each replica's
-- flush of what it counted in memory (server/gateway/quality-recorder.ts); hours older than 35 days are pruned.
CREATE TABLE skill_quality (
  skill_id        TEXT NOT NULL,
  hour            INTEGER NOT NULL,
  result          TEXT NOT NULL,
  latency_bucket  INTEGER NOT NULL CHECK (latency_bucket >= 0),
  calls           INTEGER NOT NULL CHECK (calls > 0),
  charged_micros  INTEGER NOT NULL DEFAULT 0 CHECK (charged_micros >= 0),
  PRIMARY KEY (skill_id, hour, result, latency_bucket)
);
CREATE INDEX skill_quality_by_hour ON skill_quality(hour);
`,
  },
  {
    version: 30,
    sql: `
-- The keys in progress, swept every few seconds by the PostgreSQL leader (and at a SQLite gateway's start): not every
-- key of the last day. It costs a keyed call with an Idempotency-Key an index entry made and removed. The refusals of
-- an account by minute, read by GET /v1/usage/daily: not every refusal it was ever given.
CREATE INDEX idempotency_in_progress ON idempotency_keys(created_at) WHERE state = 'in_progress';
CREATE INDEX call_refusals_by_minute ON call_refusals(account_id, minute);
`,
  },
  {
    version: 31,
    sql: `
-- An account's calls and spend per UTC day, key and skill (day: ms / 86,400,000), added by the database as each call's
-- line is written, in its transaction: GET /v1/usage/daily, /v1/usage/keys (today, this month, in total) and the
-- month's total read these rows, not every call the account ever made (at a million calls, a read of them all held a
-- SQLite gateway's event loop for most of a second). Counted as those reads always counted: every call but the ones
-- refused by a key's own limits. A call's line is written once and never changes, so the days only grow. The reads go
-- through the view usage_by_day (PostgreSQL's adds the days not yet folded in: its migration 0019).
CREATE TABLE usage_days (
  account_id    TEXT NOT NULL,
  day           INTEGER NOT NULL,
  api_key_id    TEXT NOT NULL,
  skill_id      TEXT NOT NULL,
  calls         INTEGER NOT NULL CHECK (calls > 0),
  spend_micros  INTEGER NOT NULL CHECK (spend_micros >= 0),
  PRIMARY KEY (account_id, day, api_key_id, skill_id)
) WITHOUT ROWID;
CREATE VIEW usage_by_day AS SELECT account_id, day, api_key_id, skill_id, calls, spend_micros FROM usage_days;
CREATE TRIGGER calls_usage_days AFTER INSERT ON calls
WHEN NEW.outcome NOT IN ('rate_limited', 'daily_limit_reached')
BEGIN
  INSERT INTO usage_days (account_id, day, api_key_id, skill_id, calls, spend_micros)
  VALUES (NEW.account_id, NEW.created_at / 86400000, NEW.api_key_id, NEW.skill_id, 1, NEW.charged_micros)
  ON CONFLICT (account_id, day, api_key_id, skill_id) DO UPDATE SET
    calls = calls + 1, spend_micros = spend_micros + excluded.spend_micros;
END;
CREATE TRIGGER calls_written_once BEFORE UPDATE ON calls
BEGIN
  SELECT RAISE(ABORT, 'a call''s line is written once');
END;
CREATE TRIGGER calls_kept BEFORE DELETE ON calls
BEGIN
  SELECT RAISE(ABORT, 'a call''s line cannot be deleted');
END;
CREATE TRIGGER usage_days_grow BEFORE UPDATE ON usage_days
WHEN NOT (NEW.account_id = OLD.account_id AND NEW.day = OLD.day AND NEW.api_key_id = OLD.api_key_id
          AND NEW.skill_id = OLD.skill_id AND NEW.calls > OLD.calls AND NEW.spend_micros >= OLD.spend_micros)
BEGIN
  SELECT RAISE(ABORT, 'the usage days only grow, by the calls written');
END;
CREATE TRIGGER usage_days_kept BEFORE DELETE ON usage_days
BEGIN
  SELECT RAISE(ABORT, 'the usage days cannot be deleted');
END;
INSERT INTO usage_days (account_id, day, api_key_id, skill_id, calls, spend_micros)
SELECT account_id, created_at / 86400000, api_key_id, skill_id, COUNT(*), SUM(charged_micros) FROM calls
WHERE outcome NOT IN ('rate_limited', 'daily_limit_reached')
GROUP BY account_id, created_at / 86400000, api_key_id, skill_id;
`,
  },
  {
    version: 32,
    sql: `
-- GET /v1/usage and its CSV narrowed to one key (a calls-only key reading its own calls always is) page through that
-- key's calls, not through every call of its account until a page of the key's is found (232 ms a page for a key with
-- ten calls on an account with a million). Both equalities lead, so SQLite takes this index whenever a key is named.
-- It costs every call an index entry.
CREATE INDEX calls_by_key ON calls(api_key_id, account_id, created_at);
`,
  },
];
