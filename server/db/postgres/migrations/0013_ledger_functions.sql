-- The call path's two ledger operations as server-side functions (issue 25 §1), so that each reaches PostgreSQL in
-- one round trip and a balance row is locked for the microseconds a statement runs, not for a dozen round trips
-- between the gateway and the server. No SQLite version matches it: SQLite runs the same operations as
-- server/ledger/ledger.ts's statements, in process. The rules are those of server/ledger/ledger.ts (hold, capture)
-- and server/ledger/spend-limits.ts (take): each function says which lines it mirrors, the ledger's property test
-- and every money suite run on both engines, and test/ledger/engine-rules.test.ts runs the same operations on both
-- engines side by side (and shows that a function made to differ is caught). What stays in TypeScript only: the
-- calendar (the gateway passes the day's and the month's start for its clock), the fee split (the hold's amounts
-- come computed), and an exit's freeze (a hold that finds an exit short of its freeze answers 'exit_short' and the
-- gateway takes the hold through its own path, which freezes first).

-- Ledger.hold (takeHold): the account's available balance locked and compared with the charge, the key's spending
-- limit counted (SpendLimits.take), the hold row, its 'hold' entry and its two postings (the trigger moves the
-- balances). p_async = 1: the function commits by itself (a statement of its own), without waiting for the WAL flush,
-- as every hold does (a hold lost in a crash is a released one); 0 inside a caller's transaction.
CREATE FUNCTION ledger_hold(
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
  WHERE la.account_id = p_account AND la.bucket = 'available' FOR UPDATE;
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
  PERFORM 1 FROM ledger_accounts la WHERE la.account_id = p_account AND la.bucket = 'held' FOR UPDATE;
  INSERT INTO postings (entry_id, account_id, bucket, amount)
  VALUES (v_entry, p_account, 'available', -p_amount), (v_entry, p_account, 'held', p_amount);
  RETURN QUERY SELECT 'held'::TEXT, v_available, NULL::TEXT, NULL::BIGINT, NULL::TEXT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT;
END;
$$;

-- Ledger.captureWithBudget: the hold closed by one conditional UPDATE (takeOpenHold), its 'capture' entry paying the
-- held amount to the seller's 'earned' and the platform's 'fees' (zero shares left out, rows locked in one order:
-- Ledger.post), then the budget the answer reports, read after the capture in its transaction (budgetIn). No row
-- when the hold is not open.
CREATE FUNCTION ledger_capture(p_hold TEXT, p_now_ms BIGINT, p_key TEXT)
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
  PERFORM 1 FROM ledger_accounts la
  WHERE (la.account_id = h.account_id AND la.bucket = 'held')
     OR (h.seller_amount > 0 AND la.account_id = h.seller_account_id AND la.bucket = 'earned')
     OR (h.fee_amount > 0 AND la.account_id = 'platform' AND la.bucket = 'fees')
  ORDER BY la.account_id, la.bucket FOR UPDATE;
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
