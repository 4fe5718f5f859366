-- Refusals of a key's own limits counted per key, skill, outcome and UTC minute (issue 23; SQLite version 20,
-- server/gateway/schema.ts says why).
CREATE TABLE call_refusals (
  account_id  TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
  api_key_id  TEXT COLLATE "C" NOT NULL,
  skill_id    TEXT COLLATE "C" NOT NULL,
  outcome     TEXT COLLATE "C" NOT NULL CHECK (outcome IN ('rate_limited', 'daily_limit_reached')),
  minute      BIGINT NOT NULL,
  count       BIGINT NOT NULL CHECK (count > 0),
  PRIMARY KEY (account_id, api_key_id, skill_id, outcome, minute)
);
