-- The hot balance rows off the capture's path (issue 25 §1; docs/scaling.md "The call path on PostgreSQL" says why
-- this way and not sharded rows). Every capture posts to the seller's 'earned', the platform's 'fees' and the buyer's
-- 'held' rows; moving those rows in the capture's statement kept each locked until its charge group's durable COMMIT,
-- so the charge groups of two replicas took turns on 'earned' and 'fees', and a hot buyer's next hold (which moves
-- 'held' too) waited for the group. Here such a posting moves no row: the trigger records it as a pending delta (an
-- INSERT, which locks nothing another call needs), reads add the pending deltas to the materialized balance
-- (ledger_balances), and ledger_roll_up folds them into the rows later, in short transactions of their own.
--
-- Which postings wait is one rule, in postings_move_balance below: money INTO 'earned' and 'fees' (nothing ever takes
-- money out of them in the ledger) and money OUT of 'held'. Each leaves the materialized balance on the safe side of
-- its CHECK (>= 0): 'earned' and 'fees' under their true balance, which nothing debits; 'held' over it, and 'held' is
-- only debited by closing an open hold, which the conditional UPDATE of holds guards. 'available' and 'source' always
-- move at once: a hold decides on 'available' under its row lock. SQLite keeps moving every row at once (one writer:
-- nothing queues), so its ledger_accounts is its balances; server/db/sql.ts's Dialect.balances names the relation a
-- balance is read from on each engine. The ledger's invariants check the new shape (server/ledger/invariants.ts).

-- A posting not yet in its balance row: made only by postings_move_balance, from the posting of the same id (same
-- account, bucket and amount: an invariant checks it), and deleted only by ledger_roll_up, in the transaction that adds
-- it to the row. No foreign key: the posting's own key to ledger_accounts already takes the row's KEY SHARE lock.
CREATE TABLE ledger_balance_deltas (
  posting_id  BIGINT PRIMARY KEY,
  account_id  TEXT COLLATE "C" NOT NULL,
  bucket      TEXT COLLATE "C" NOT NULL,
  amount      BIGINT NOT NULL CHECK (amount <> 0)
);
CREATE INDEX ledger_balance_deltas_by_balance ON ledger_balance_deltas(account_id, bucket);

-- A balance as the ledger means it: the materialized row plus what is pending for it. Every read of a balance on
-- PostgreSQL (GET /v1/balance, the invariants, the copy from SQLite) reads this.
CREATE VIEW ledger_balances AS
SELECT la.account_id, la.bucket,
       la.balance + COALESCE((SELECT SUM(d.amount) FROM ledger_balance_deltas d
                              WHERE d.account_id = la.account_id AND d.bucket = la.bucket), 0)::BIGINT AS balance
FROM ledger_accounts la;

CREATE OR REPLACE FUNCTION postings_move_balance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.bucket IN ('earned', 'fees') AND NEW.amount > 0) OR (NEW.bucket = 'held' AND NEW.amount < 0) THEN
    INSERT INTO ledger_balance_deltas (posting_id, account_id, bucket, amount)
    VALUES (NEW.id, NEW.account_id, NEW.bucket, NEW.amount);
  ELSE
    UPDATE ledger_accounts SET balance = balance + NEW.amount
    WHERE account_id = NEW.account_id AND bucket = NEW.bucket;
  END IF;
  RETURN NULL;
END;
$$;

-- Folds up to p_limit pending deltas (oldest postings first) into their balance rows, in one transaction: the deltas
-- deleted and the rows moved together, so ledger_balances reads the same before and after. p_async = 1: it commits by
-- itself without waiting for the WAL flush (a roll-up lost in a crash leaves its deltas pending: the same balances);
-- 0 inside a caller's transaction (the copy from SQLite, which folds everything before it commits). One roller at a time
-- (an advisory lock; a second answers 0 at once), and the rows locked in the ledger's one order (account, then bucket)
-- before they move, so it cannot deadlock with a posting transaction. Returns how many deltas it folded.
CREATE FUNCTION ledger_roll_up(p_limit INTEGER, p_async INTEGER) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
  v_ids BIGINT[];
  v_rolled BIGINT;
BEGIN
  IF p_async = 1 THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  IF NOT pg_try_advisory_xact_lock(('x' || substr(encode(sha256('skill-gateway:ledger-roll-up'::bytea), 'hex'), 1, 16))::bit(64)::BIGINT) THEN
    RETURN 0;
  END IF;
  v_ids := ARRAY(SELECT d.posting_id FROM ledger_balance_deltas d ORDER BY d.posting_id LIMIT p_limit);
  IF cardinality(v_ids) = 0 THEN
    RETURN 0;
  END IF;
  PERFORM 1 FROM ledger_accounts la
  WHERE (la.account_id, la.bucket) IN (SELECT d.account_id, d.bucket FROM ledger_balance_deltas d WHERE d.posting_id = ANY (v_ids))
  ORDER BY la.account_id, la.bucket FOR NO KEY UPDATE;
  WITH taken AS (
    DELETE FROM ledger_balance_deltas d WHERE d.posting_id = ANY (v_ids) RETURNING d.account_id, d.bucket, d.amount
  ), sums AS (
    SELECT t.account_id, t.bucket, SUM(t.amount)::BIGINT AS total FROM taken t GROUP BY t.account_id, t.bucket
  )
  UPDATE ledger_accounts la SET balance = la.balance + s.total
  FROM sums s WHERE la.account_id = s.account_id AND la.bucket = s.bucket;
  v_rolled := cardinality(v_ids);
  RETURN v_rolled;
END;
$$;

-- Ledger.hold (takeHold), as migration 0013 defines it, with its row locks taken FOR NO KEY UPDATE: the balance rows'
-- keys never change, and a capture's posting (its foreign key) holds the buyer's 'held' row's KEY SHARE lock until its
-- group commits, which FOR UPDATE would wait for and FOR NO KEY UPDATE does not. Nothing else changes.
CREATE OR REPLACE FUNCTION ledger_hold(
  p_id TEXT, p_account TEXT, p_seller TEXT, p_skill TEXT, p_amount BIGINT, p_seller_amount BIGINT, p_fee BIGINT,
  p_now_ms BIGINT, p_replica TEXT, p_key TEXT, p_day_start BIGINT, p_month_start BIGINT, p_async INTEGER
) RETURNS TABLE (
  outcome TEXT, available BIGINT, key_id TEXT, limit_micros BIGINT, period TEXT, period_start BIGINT, period_seq BIGINT,
  spent_micros BIGINT
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_available BIGINT;
  v_limit key_spend_limits%ROWTYPE;
  v_start BIGINT;
  v_seq BIGINT;
  v_spent BIGINT;
  v_entry BIGINT;
BEGIN
  IF p_async = 1 THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  -- The balance first, under its lock: every operation on the account's money takes this row first.
  SELECT la.balance INTO v_available FROM ledger_accounts la
  WHERE la.account_id = p_account AND la.bucket = 'available' FOR NO KEY UPDATE;
  v_available := COALESCE(v_available, 0);
  -- ExitFreezes.topUp comes before any spending: a pending exit short of its freeze takes the gateway's own path.
  IF v_available > 0 AND EXISTS (
    SELECT 1 FROM chain_exits ce WHERE ce.account_id = p_account AND ce.status = 'pending' AND ce.shortfall > 0
  ) THEN
    RETURN QUERY SELECT 'exit_short'::TEXT, v_available, NULL::TEXT, NULL::BIGINT, NULL::TEXT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT;
    RETURN;
  END IF;
  IF v_available < p_amount THEN
    RETURN QUERY SELECT 'insufficient_balance'::TEXT, v_available, NULL::TEXT, NULL::BIGINT, NULL::TEXT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT;
    RETURN;
  END IF;
  -- SpendLimits.take: the key's row under its own lock, its period rolled over when a new one has begun
  -- (currentPeriod), refused past the limit, counted otherwise.
  IF p_key IS NOT NULL THEN
    SELECT * INTO v_limit FROM key_spend_limits k WHERE k.key_id = p_key FOR UPDATE;
    IF FOUND AND v_limit.limit_micros IS NOT NULL THEN
      v_start := CASE v_limit.period WHEN 'day' THEN p_day_start WHEN 'month' THEN p_month_start ELSE 0 END;
      IF v_limit.period_start >= v_start THEN
        v_start := v_limit.period_start;
        v_seq := v_limit.period_seq;
        v_spent := v_limit.spent_micros;
      ELSE
        v_seq := v_limit.period_seq + 1;
        v_spent := 0;
      END IF;
      v_spent := v_spent + p_amount;
      IF v_spent > v_limit.limit_micros THEN
        RETURN QUERY SELECT 'key_spend_limit_reached'::TEXT, v_available, v_limit.key_id, v_limit.limit_micros, v_limit.period,
          v_limit.period_start, v_limit.period_seq, v_limit.spent_micros;
        RETURN;
      END IF;
      UPDATE key_spend_limits k SET spent_micros = v_spent, period_start = v_start, period_seq = v_seq WHERE k.key_id = p_key;
    END IF;
  END IF;
  INSERT INTO holds (id, account_id, seller_account_id, skill_id, amount, seller_amount, fee_amount, status, created_at, replica_id,
                     spend_key_id, spend_period_seq)
  VALUES (p_id, p_account, p_seller, p_skill, p_amount, p_seller_amount, p_fee, 'open', p_now_ms, p_replica,
          CASE WHEN v_seq IS NULL THEN NULL ELSE p_key END, v_seq);
  INSERT INTO entries (kind, hold_id, memo, created_at) VALUES ('hold', p_id, '', p_now_ms) RETURNING id INTO v_entry;
  -- Ledger.post: the rows in one order (account, then bucket; 'available' is locked already).
  PERFORM 1 FROM ledger_accounts la WHERE la.account_id = p_account AND la.bucket = 'held' FOR NO KEY UPDATE;
  INSERT INTO postings (entry_id, account_id, bucket, amount)
  VALUES (v_entry, p_account, 'available', -p_amount), (v_entry, p_account, 'held', p_amount);
  RETURN QUERY SELECT 'held'::TEXT, v_available, NULL::TEXT, NULL::BIGINT, NULL::TEXT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT;
END;
$$;

-- Ledger.captureWithBudget, as migration 0013 defines it, without locking the balance rows: each of a capture's
-- postings (out of 'held', into 'earned' and 'fees') is a pending delta, so the capture moves no balance row and
-- holds no row another call moves until its group commits.
CREATE OR REPLACE FUNCTION ledger_capture(p_hold TEXT, p_now_ms BIGINT, p_key TEXT)
RETURNS TABLE (
  account_id TEXT, seller_account_id TEXT, skill_id TEXT, amount BIGINT, seller_amount BIGINT, fee_amount BIGINT,
  available BIGINT, key_id TEXT, limit_micros BIGINT, period TEXT, period_start BIGINT, period_seq BIGINT, spent_micros BIGINT
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  h holds%ROWTYPE;
  v_entry BIGINT;
BEGIN
  UPDATE holds SET status = 'captured', closed_at = p_now_ms WHERE id = p_hold AND status = 'open' RETURNING * INTO h;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  -- Ledger.post: an entry that would not sum to zero (a hold whose split no longer adds up) is refused before anything
  -- is written; the gateway reports it as the LedgerInvariantError post() throws (SQLSTATE SG001, the excess in DETAIL).
  IF h.seller_amount + h.fee_amount <> h.amount THEN
    RAISE EXCEPTION 'the capture of hold % would not sum to zero', h.id
      USING ERRCODE = 'SG001', DETAIL = (h.seller_amount + h.fee_amount - h.amount)::TEXT;
  END IF;
  INSERT INTO entries (kind, hold_id, memo, created_at) VALUES ('capture', h.id, '', p_now_ms) RETURNING id INTO v_entry;
  INSERT INTO postings (entry_id, account_id, bucket, amount)
  SELECT v_entry, p.account_id, p.bucket, p.amount
  FROM (VALUES (1, h.account_id, 'held', -h.amount), (2, h.seller_account_id, 'earned', h.seller_amount),
               (3, 'platform', 'fees', h.fee_amount)) AS p(n, account_id, bucket, amount)
  WHERE p.amount <> 0 ORDER BY p.n;
  RETURN QUERY
  SELECT h.account_id, h.seller_account_id, h.skill_id, h.amount, h.seller_amount, h.fee_amount,
         (SELECT la.balance FROM ledger_accounts la WHERE la.account_id = h.account_id AND la.bucket = 'available'),
         k.key_id, k.limit_micros, k.period, k.period_start, k.period_seq, k.spent_micros
  FROM (SELECT 1) AS one LEFT JOIN key_spend_limits k ON k.key_id = p_key AND k.limit_micros IS NOT NULL;
END;
$$;
