-- Settled batches' totals per payer and seller, and calls in a batch final: SQLite version 29
-- (server/settlement/schema.ts says why). The totals are added by the transaction that marks a batch settled.
CREATE TABLE settled_pair_totals (
  account_id        TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
  seller_account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
  calls             BIGINT NOT NULL CHECK (calls > 0),
  debits            BIGINT NOT NULL CHECK (debits > 0),
  credits           BIGINT NOT NULL CHECK (credits >= 0),
  PRIMARY KEY (account_id, seller_account_id)
);
CREATE INDEX settled_pair_totals_by_seller ON settled_pair_totals(seller_account_id);
INSERT INTO settled_pair_totals (account_id, seller_account_id, calls, debits, credits)
SELECT h.account_id, h.seller_account_id, COUNT(*), SUM(h.amount), SUM(h.seller_amount)
FROM holds h JOIN settlement_batches b ON b.number = h.batch_number
WHERE b.status = 'settled'
GROUP BY h.account_id, h.seller_account_id;

-- Moving a batched hold to another batch stays holds_batch_once's refusal.
CREATE TRIGGER holds_batched_final BEFORE UPDATE ON holds
FOR EACH ROW WHEN (OLD.batch_number IS NOT NULL AND NEW.batch_number IS NOT DISTINCT FROM OLD.batch_number)
EXECUTE FUNCTION refuse_change('a hold in a settlement batch cannot change');
CREATE TRIGGER holds_batched_kept BEFORE DELETE ON holds
FOR EACH ROW WHEN (OLD.batch_number IS NOT NULL)
EXECUTE FUNCTION refuse_change('a hold in a settlement batch cannot be deleted');
