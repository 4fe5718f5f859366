-- Settled batches' totals per payer and seller, and calls in a batch final: SQLite version 29
-- (server/settlement/schema.ts says why). The database adds a batch's calls to the totals as the batch is marked
-- settled, in the transaction that marks it.
CREATE TABLE settled_pair_totals (
  account_id        TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
  seller_account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts(id),
  calls             BIGINT NOT NULL CHECK (calls > 0),
  debits            BIGINT NOT NULL CHECK (debits > 0),
  credits           BIGINT NOT NULL CHECK (credits >= 0),
  PRIMARY KEY (account_id, seller_account_id)
);
CREATE INDEX settled_pair_totals_by_seller ON settled_pair_totals(seller_account_id);

CREATE FUNCTION settled_pair_totals_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO settled_pair_totals (account_id, seller_account_id, calls, debits, credits)
  SELECT h.account_id, h.seller_account_id, COUNT(*), SUM(h.amount), SUM(h.seller_amount) FROM holds h
  WHERE h.batch_number = NEW.number GROUP BY h.account_id, h.seller_account_id
  ON CONFLICT (account_id, seller_account_id) DO UPDATE SET
    calls = settled_pair_totals.calls + EXCLUDED.calls,
    debits = settled_pair_totals.debits + EXCLUDED.debits,
    credits = settled_pair_totals.credits + EXCLUDED.credits;
  RETURN NULL;
END;
$$;
-- Made before the backfill below, in the migration's transaction: CREATE TRIGGER locks settlement_batches against
-- updates until the commit, so a batch an older replica marks settled meanwhile is either in the backfill or waits
-- and goes through the trigger.
CREATE TRIGGER settlement_batches_settled_totals AFTER UPDATE OF status ON settlement_batches
FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status = 'settled')
EXECUTE FUNCTION settled_pair_totals_add();
CREATE TRIGGER settled_pair_totals_grow BEFORE UPDATE ON settled_pair_totals
FOR EACH ROW WHEN (NOT (NEW.account_id = OLD.account_id AND NEW.seller_account_id = OLD.seller_account_id
                        AND NEW.calls > OLD.calls AND NEW.debits > OLD.debits AND NEW.credits >= OLD.credits))
EXECUTE FUNCTION refuse_change('the settled totals only grow, by the batches marked settled');
CREATE TRIGGER settled_pair_totals_kept BEFORE DELETE ON settled_pair_totals
FOR EACH ROW EXECUTE FUNCTION refuse_change('the settled totals cannot be deleted');
-- TRUNCATE fires no row trigger (as for the journal, 0001).
CREATE TRIGGER settled_pair_totals_no_truncate BEFORE TRUNCATE ON settled_pair_totals
FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('the settled totals cannot be deleted');
INSERT INTO settled_pair_totals (account_id, seller_account_id, calls, debits, credits)
SELECT h.account_id, h.seller_account_id, COUNT(*), SUM(h.amount), SUM(h.seller_amount)
FROM holds h JOIN settlement_batches b ON b.number = h.batch_number
WHERE b.status = 'settled'
GROUP BY h.account_id, h.seller_account_id;

-- A call joins only a pending batch; once in one, its hold changes no more and is never deleted (moving it to another
-- batch stays holds_batch_once's refusal). A trigger's WHEN cannot read another table: the first check is a function.
CREATE FUNCTION holds_into_pending_batch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- FOR SHARE: a batch being marked settled meanwhile is waited for (and then refused), never raced.
  IF (SELECT b.status FROM settlement_batches b WHERE b.number = NEW.batch_number FOR SHARE) IS DISTINCT FROM 'pending' THEN
    RAISE EXCEPTION 'a hold joins only a pending settlement batch' USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER holds_into_pending_batch BEFORE UPDATE OF batch_number ON holds
FOR EACH ROW WHEN (OLD.batch_number IS NULL AND NEW.batch_number IS NOT NULL)
EXECUTE FUNCTION holds_into_pending_batch();
CREATE TRIGGER holds_batched_final BEFORE UPDATE ON holds
FOR EACH ROW WHEN (OLD.batch_number IS NOT NULL AND NEW.batch_number IS NOT DISTINCT FROM OLD.batch_number)
EXECUTE FUNCTION refuse_change('a hold in a settlement batch cannot change');
CREATE TRIGGER holds_batched_kept BEFORE DELETE ON holds
FOR EACH ROW WHEN (OLD.batch_number IS NOT NULL)
EXECUTE FUNCTION refuse_change('a hold in a settlement batch cannot be deleted');
