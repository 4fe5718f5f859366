-- x402 pay-per-call (issue 15; SQLite version 18).
--
-- A call paid with an x402 authorization is recorded by one ledger entry of a new kind, and logged in calls under a
-- new endpoint. PostgreSQL changes a CHECK in place (the columns' inline CHECKs carry PostgreSQL's default names).
ALTER TABLE entries DROP CONSTRAINT entries_kind_check;
ALTER TABLE entries ADD CONSTRAINT entries_kind_check CHECK (kind IN ('dev_credit', 'deposit', 'hold', 'capture', 'release',
                                                                      'voucher_withdrawal', 'voucher_return', 'exit_freeze', 'exit_return',
                                                                      'x402_payment'));
ALTER TABLE calls DROP CONSTRAINT calls_endpoint_check;
ALTER TABLE calls ADD CONSTRAINT calls_endpoint_check CHECK (endpoint IN ('call', 'skill_call', 'x402'));

-- One row per call paid with an x402 authorization (server/x402/schema.ts says what each status means).
CREATE TABLE x402_payments (
  call_id            TEXT COLLATE "C" PRIMARY KEY,
  skill_id           TEXT COLLATE "C" NOT NULL,
  seller_account_id  TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
  payer              TEXT COLLATE "C" NOT NULL,
  nonce              TEXT COLLATE "C" NOT NULL,
  valid_after        BIGINT NOT NULL,
  valid_before       BIGINT NOT NULL,
  amount             BIGINT NOT NULL CHECK (amount > 0),
  seller_amount      BIGINT NOT NULL CHECK (seller_amount >= 0),
  fee_amount         BIGINT NOT NULL CHECK (fee_amount >= 0),
  status             TEXT COLLATE "C" NOT NULL CHECK (status IN ('reserved', 'settling', 'settled', 'released', 'failed')),
  tx_hash            TEXT COLLATE "C",
  -- The chain's head just before the settlement was sent: where recovery looks for its X402Settled event.
  settle_block       BIGINT,
  entry_id           BIGINT REFERENCES entries(id),
  replica_id         TEXT COLLATE "C",
  created_at         BIGINT NOT NULL,
  closed_at          BIGINT,
  CHECK (seller_amount + fee_amount = amount),
  CHECK ((status = 'settled') = (entry_id IS NOT NULL)),
  CHECK (status <> 'settled' OR tx_hash IS NOT NULL),
  UNIQUE (payer, nonce)
);
CREATE UNIQUE INDEX x402_payments_one_entry ON x402_payments(entry_id) WHERE entry_id IS NOT NULL;
CREATE INDEX x402_payments_open ON x402_payments(created_at) WHERE status IN ('reserved', 'settling');
CREATE INDEX x402_payments_by_seller ON x402_payments(seller_account_id, status);
