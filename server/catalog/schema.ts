import type { SchemaStep } from "../db/migrations";

/**
 * The catalog's table: skills.
 *
 * Each step belongs to one global schema version (server/schema.ts names the versions and applies them in order):
 * a step is never edited once it has shipped; a change is a step of a new version. Money columns are INTEGER base units.
 */
export const CATALOG_SCHEMA: readonly SchemaStep[] = [
  {
    version: 1,
    sql: `
CREATE TABLE skills (
  id                 TEXT PRIMARY KEY,
  slug               TEXT NOT NULL UNIQUE,
  name               TEXT NOT NULL,
  description        TEXT NOT NULL DEFAULT '',
  price_micros       INTEGER NOT NULL CHECK (price_micros >= 0),
  seller_account_id  TEXT NOT NULL REFERENCES accounts(id),
  backend_url        TEXT NOT NULL,
  timeout_ms         INTEGER NOT NULL CHECK (timeout_ms > 0),
  rate_limit_per_min INTEGER CHECK (rate_limit_per_min IS NULL OR rate_limit_per_min > 0),
  input_schema       TEXT,
  signing_secret     TEXT NOT NULL,
  active             INTEGER NOT NULL DEFAULT 1,
  created_at         INTEGER NOT NULL,
  updated_at         INTEGER NOT NULL
);
`,
  },
  {
    version: 21,
    sql: `
-- Whether the operator registered the skill and its backend URL (npm run register-skill, the demo seed): 1 or 0.
-- Only the operator's skills may reach an origin of SKILL_BACKEND_ALLOWLIST (server/gateway/egress.ts); a seller's
-- listing, or its edit of the backend URL, is 0. Skills stored before this version are 0 until the operator
-- registers them again: a seller's listing cannot be told from the operator's after the fact.
ALTER TABLE skills ADD COLUMN operator_listed INTEGER NOT NULL DEFAULT 0;
`,
  },
  {
    version: 26,
    sql: `
-- A skill's output contract (issue 27): the JSON Schema its 2xx answers promise to match, as the JSON text it was
-- listed with, held to the input schema's bounds. An answer that breaks it is a 502 skill_bad_output, not charged.
ALTER TABLE skills ADD COLUMN output_schema TEXT;
`,
  },
  {
    version: 27,
    sql: `
-- How a skill is priced (issue 27): 'fixed', every call costs price_micros; 'usage', the backend reports what each
-- call came to in a signed X-Skill-Charge header, at most price_micros (its max_price), which is what a call holds.
ALTER TABLE skills ADD COLUMN pricing TEXT NOT NULL DEFAULT 'fixed' CHECK (pricing IN ('fixed', 'usage'));
`,
  },
];
