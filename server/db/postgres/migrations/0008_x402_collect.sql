-- x402 payments collected into the escrow before their call is forwarded (issue 23; SQLite version 22, which
-- server/x402/schema.ts explains state by state). PostgreSQL changes the CHECK in place and adds the columns.
ALTER TABLE x402_payments DROP CONSTRAINT x402_payments_status_check;
ALTER TABLE x402_payments ADD CONSTRAINT x402_payments_status_check
  CHECK (status IN ('reserved', 'collecting', 'collected', 'completing', 'refunding',
                    'settled', 'refunded', 'released', 'failed', 'settling'));
ALTER TABLE x402_payments ADD COLUMN seller_address TEXT COLLATE "C";
ALTER TABLE x402_payments ADD COLUMN reclaimable_at BIGINT;
ALTER TABLE x402_payments ADD COLUMN close_tx TEXT COLLATE "C";
ALTER TABLE x402_payments ADD CONSTRAINT x402_payments_collected_check
  CHECK (status NOT IN ('collected', 'completing', 'refunding', 'refunded')
         OR (tx_hash IS NOT NULL AND seller_address IS NOT NULL AND reclaimable_at IS NOT NULL));
DROP INDEX x402_payments_open;
CREATE INDEX x402_payments_open ON x402_payments(created_at)
  WHERE status IN ('reserved', 'collecting', 'collected', 'completing', 'refunding', 'settling');
