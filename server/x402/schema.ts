import type { SchemaStep } from "../db/migrations";

/**
 * The x402 payments' table (issue 15): one row per call paid with an x402 `exact` authorization. Each step belongs
 * to one global schema version (server/schema.ts names the versions); a shipped step is never edited. Money columns
 * are INTEGER base units.
 */
export const X402_SCHEMA: readonly SchemaStep[] = [
  {
    version: 18,
    sql: `
-- One paid call's payment. The row is written before the call is forwarded (status 'reserved'): the authorization's
-- (payer, nonce) is unique here, so the same payment can never pay for two calls, even while the chain has not yet
-- seen it. 'settling' once the escrow's settleX402 is about to be sent; 'settled' with its transaction and the
-- ledger entry that records it; 'released' when the call failed or was refused (nothing was sent, the payer keeps
-- the money); 'failed' when the settlement itself was refused on-chain (the authorization could not be used).
CREATE TABLE x402_payments (
  call_id            TEXT PRIMARY KEY,
  skill_id           TEXT NOT NULL,
  seller_account_id  TEXT NOT NULL REFERENCES accounts(id),
  -- The authorization: its signer (lower-case 0x address), nonce (lower-case 0x + 64 hex), validity window (unix s).
  payer              TEXT NOT NULL,
  nonce              TEXT NOT NULL,
  valid_after        INTEGER NOT NULL,
  valid_before       INTEGER NOT NULL,
  amount             INTEGER NOT NULL CHECK (amount > 0),
  seller_amount      INTEGER NOT NULL CHECK (seller_amount >= 0),
  fee_amount         INTEGER NOT NULL CHECK (fee_amount >= 0),
  status             TEXT NOT NULL CHECK (status IN ('reserved', 'settling', 'settled', 'released', 'failed')),
  tx_hash            TEXT,
  -- The chain's head just before the settlement was sent: where recovery looks for its X402Settled event.
  settle_block       INTEGER,
  entry_id           INTEGER REFERENCES entries(id),
  replica_id         TEXT,
  created_at         INTEGER NOT NULL,
  closed_at          INTEGER,
  CHECK (seller_amount + fee_amount = amount),
  CHECK ((status = 'settled') = (entry_id IS NOT NULL)),
  CHECK (status <> 'settled' OR tx_hash IS NOT NULL),
  UNIQUE (payer, nonce)
);
CREATE UNIQUE INDEX x402_payments_one_entry ON x402_payments(entry_id) WHERE entry_id IS NOT NULL;
CREATE INDEX x402_payments_open ON x402_payments(created_at) WHERE status IN ('reserved', 'settling');
CREATE INDEX x402_payments_by_seller ON x402_payments(seller_account_id, status);
`,
  },
  {
    version: 22,
    rebuildsTables: true,
    sql: `
-- A payment is collected into the escrow before its call is forwarded (issue 23: no unpaid work), then completed
-- (the seller and the treasury credited) or refunded. New states, in order: 'collecting' once the escrow's
-- collectX402 is about to be sent (durably first); 'collected' once it was mined (the money is in the escrow,
-- pending); 'completing' / 'refunding' when completeX402 / refundX402 was sent but its fate is not known yet (recovery
-- sends it again or finds it); 'settled' (completed, with its ledger entry) or 'refunded' (the payer got it back).
-- 'failed' is a collection the chain refused (nothing moved). 'settling' stays for payments of the one-step
-- settleX402 of version 18, which recovery still resolves. The pending payment's commitment needs the seller's
-- address and the reclaim time; close_tx is the completion's or refund's transaction (tx_hash the collection's).
CREATE TABLE x402_payments_v22 (
  call_id            TEXT PRIMARY KEY,
  skill_id           TEXT NOT NULL,
  seller_account_id  TEXT NOT NULL REFERENCES accounts(id),
  payer              TEXT NOT NULL,
  nonce              TEXT NOT NULL,
  valid_after        INTEGER NOT NULL,
  valid_before       INTEGER NOT NULL,
  amount             INTEGER NOT NULL CHECK (amount > 0),
  seller_amount      INTEGER NOT NULL CHECK (seller_amount >= 0),
  fee_amount         INTEGER NOT NULL CHECK (fee_amount >= 0),
  status             TEXT NOT NULL CHECK (status IN ('reserved', 'collecting', 'collected', 'completing', 'refunding',
                                                     'settled', 'refunded', 'released', 'failed', 'settling')),
  tx_hash            TEXT,
  -- The chain's head just before the collection (or version 18's settlement) was sent: where recovery looks.
  settle_block       INTEGER,
  entry_id           INTEGER REFERENCES entries(id),
  replica_id         TEXT,
  created_at         INTEGER NOT NULL,
  closed_at          INTEGER,
  seller_address     TEXT,
  reclaimable_at     INTEGER,
  close_tx           TEXT,
  CHECK (seller_amount + fee_amount = amount),
  CHECK ((status = 'settled') = (entry_id IS NOT NULL)),
  CHECK (status <> 'settled' OR tx_hash IS NOT NULL),
  CHECK (status NOT IN ('collected', 'completing', 'refunding', 'refunded')
         OR (tx_hash IS NOT NULL AND seller_address IS NOT NULL AND reclaimable_at IS NOT NULL)),
  UNIQUE (payer, nonce)
);
INSERT INTO x402_payments_v22 (call_id, skill_id, seller_account_id, payer, nonce, valid_after, valid_before, amount,
                               seller_amount, fee_amount, status, tx_hash, settle_block, entry_id, replica_id,
                               created_at, closed_at)
  SELECT call_id, skill_id, seller_account_id, payer, nonce, valid_after, valid_before, amount, seller_amount,
         fee_amount, status, tx_hash, settle_block, entry_id, replica_id, created_at, closed_at
  FROM x402_payments;
DROP TABLE x402_payments;
ALTER TABLE x402_payments_v22 RENAME TO x402_payments;
CREATE UNIQUE INDEX x402_payments_one_entry ON x402_payments(entry_id) WHERE entry_id IS NOT NULL;
CREATE INDEX x402_payments_open ON x402_payments(created_at)
  WHERE status IN ('reserved', 'collecting', 'collected', 'completing', 'refunding', 'settling');
CREATE INDEX x402_payments_by_seller ON x402_payments(seller_account_id, status);
`,
  },
  {
    version: 30,
    sql: `
-- What a payer's balance must still cover, read at every x402 reservation: its payments not yet collected, not every
-- payment it ever made. Its list is payments-store.ts's UNCOLLECTED_SQL, in the same order (SQLite matches a partial
-- index's IN list as written).
CREATE INDEX x402_payments_uncollected_by_payer ON x402_payments(payer) WHERE status IN ('reserved', 'collecting', 'settling');
`,
  },
];
