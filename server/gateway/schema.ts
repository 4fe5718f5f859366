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
];
