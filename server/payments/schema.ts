import type { SchemaStep } from "../db/migrations";

/**
 * Card top-ups' table: checkouts.
 *
 * Each step belongs to one global schema version (server/schema.ts names the versions and applies them in order):
 * a step is never edited once it has shipped; a change is a step of a new version. Money columns are INTEGER base units.
 */
export const PAYMENTS_SCHEMA: readonly SchemaStep[] = [
  {
    version: 11,
    sql: `
-- Card top-ups (server/payments/card-topups.ts): one row per checkout at the payment provider, keyed by the provider's
-- checkout id, which is also what makes a repeated provider notification harmless: only the move out of
-- 'created' acts. A paid checkout is funded on-chain (test USDC minted to the gateway's funding wallet, then
-- depositFor the account's address); the ledger credit comes from the deposit indexer, never from here.
-- mint_tx and deposit_tx are recorded as soon as sent, so a retry does not send them twice.
CREATE TABLE card_checkouts (
  id            TEXT PRIMARY KEY,
  provider      TEXT NOT NULL,
  account_id    TEXT NOT NULL REFERENCES accounts(id),
  address       TEXT NOT NULL,
  amount        INTEGER NOT NULL CHECK (amount > 0),
  status        TEXT NOT NULL CHECK (status IN ('created', 'paid', 'declined', 'abandoned', 'funded')),
  decline_code  TEXT,
  mint_tx       TEXT,
  deposit_tx    TEXT,
  created_at    INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  CHECK (status <> 'funded' OR deposit_tx IS NOT NULL),
  CHECK (status IN ('paid', 'funded') OR (mint_tx IS NULL AND deposit_tx IS NULL))
) WITHOUT ROWID;
CREATE INDEX card_checkouts_by_account ON card_checkouts(account_id, created_at);
`,
  },
];
