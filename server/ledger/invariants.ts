import type { Sql } from "../db/sql";

/** The rule every single entry obeys; the ledger also asserts it before it writes one (Ledger.post). */
export const ENTRY_SUMS_TO_ZERO = "every entry's postings sum to zero";

/** Where the checks read balances: replaced by the engine's Dialect.balances. */
const BALANCES = "{balances}";

/**
 * The ledger's invariants, stated as queries next to the schema they guard. Each query
 * returns the rows that break its rule, so an empty result everywhere means the books
 * are consistent. They run at startup (the gateway refuses to start on a violation) and
 * after every step of the ledger's property tests.
 */
const CHECKS: readonly { rule: string; sql: string }[] = [
  {
    rule: "all postings sum to zero",
    sql: "SELECT COALESCE(SUM(amount), 0) AS total FROM postings HAVING COALESCE(SUM(amount), 0) <> 0",
  },
  {
    rule: ENTRY_SUMS_TO_ZERO,
    sql: "SELECT entry_id, SUM(amount) AS total FROM postings GROUP BY entry_id HAVING SUM(amount) <> 0",
  },
  // A balance is read from BALANCES: the table on SQLite; on PostgreSQL the view adding the pending deltas of
  // migration 0016 (Dialect.balances), whose own rules follow at the end (POSTGRES_CHECKS).
  {
    rule: "every balance equals the sum of its postings",
    sql: `SELECT la.account_id, la.bucket, la.balance, COALESCE(p.total, 0) AS postings
          FROM ${BALANCES} la
          LEFT JOIN (SELECT account_id, bucket, SUM(amount) AS total FROM postings GROUP BY account_id, bucket) p
            ON p.account_id = la.account_id AND p.bucket = la.bucket
          WHERE la.balance <> COALESCE(p.total, 0)`,
  },
  {
    rule: "no balance below zero outside the source accounts",
    sql: `SELECT account_id, bucket, balance FROM ${BALANCES} WHERE bucket <> 'source' AND balance < 0`,
  },
  {
    rule: "each account's held balance equals its open holds",
    sql: `SELECT la.account_id, la.balance, COALESCE(h.total, 0) AS open_holds
          FROM ${BALANCES} la
          LEFT JOIN (SELECT account_id, SUM(amount) AS total FROM holds WHERE status = 'open' GROUP BY account_id) h
            ON h.account_id = la.account_id
          WHERE la.bucket = 'held' AND la.balance <> COALESCE(h.total, 0)`,
  },
  // What a capture spent is what it took from `held` less what it gave back to `available`: a usage-priced call's capture
  // takes the whole hold and gives back what the call did not use (Ledger.capture).
  {
    rule: "available + held + spent = deposited - withdrawn, per user",
    sql: `SELECT a.id,
                 SUM(CASE WHEN p.bucket IN ('available', 'held') THEN p.amount ELSE 0 END) AS on_hand,
                 SUM(CASE WHEN e.kind = 'capture' AND p.bucket IN ('held', 'available') THEN -p.amount ELSE 0 END) AS spent,
                 SUM(CASE WHEN e.kind IN ('dev_credit', 'deposit') AND p.bucket = 'available' THEN p.amount ELSE 0 END) AS deposited,
                 SUM(CASE WHEN e.kind IN ('voucher_withdrawal', 'voucher_return', 'exit_freeze', 'exit_return')
                           AND p.bucket = 'available' THEN -p.amount ELSE 0 END) AS withdrawn
          FROM accounts a
          JOIN postings p ON p.account_id = a.id
          JOIN entries e ON e.id = p.entry_id
          WHERE a.kind IN ('user', 'seller')
          GROUP BY a.id
          HAVING SUM(CASE WHEN p.bucket IN ('available', 'held') THEN p.amount ELSE 0 END)
               + SUM(CASE WHEN e.kind = 'capture' AND p.bucket IN ('held', 'available') THEN -p.amount ELSE 0 END)
              <> SUM(CASE WHEN e.kind IN ('dev_credit', 'deposit') AND p.bucket = 'available' THEN p.amount ELSE 0 END)
               - SUM(CASE WHEN e.kind IN ('voucher_withdrawal', 'voucher_return', 'exit_freeze', 'exit_return')
                           AND p.bucket = 'available' THEN -p.amount ELSE 0 END)`,
  },
  {
    rule: "a hold is captured or released exactly once, matching its status",
    sql: `SELECT h.id, h.status, COUNT(e.id) AS settlements, MIN(e.kind) AS kinds
          FROM holds h
          LEFT JOIN entries e ON e.hold_id = h.id AND e.kind IN ('capture', 'release')
          GROUP BY h.id, h.status
          HAVING NOT ((h.status = 'open' AND COUNT(e.id) = 0)
                   OR (h.status = 'captured' AND COUNT(e.id) = 1 AND MIN(e.kind) = 'capture')
                   OR (h.status = 'released' AND COUNT(e.id) = 1 AND MIN(e.kind) = 'release'))`,
  },
  {
    rule: "a capture pays exactly the hold's seller share and fee",
    sql: `SELECT h.id
          FROM holds h
          JOIN entries e ON e.hold_id = h.id AND e.kind = 'capture'
          LEFT JOIN (SELECT entry_id,
                            SUM(CASE WHEN bucket = 'earned' THEN amount ELSE 0 END) AS seller,
                            SUM(CASE WHEN bucket = 'fees' THEN amount ELSE 0 END) AS fee
                     FROM postings GROUP BY entry_id) p ON p.entry_id = e.id
          WHERE COALESCE(p.seller, 0) <> h.seller_amount OR COALESCE(p.fee, 0) <> h.fee_amount`,
  },
  {
    rule: "each money-out entry moves money the way its kind says",
    sql: `SELECT e.id, e.kind, SUM(CASE WHEN p.bucket = 'available' THEN p.amount ELSE 0 END) AS available
          FROM entries e JOIN postings p ON p.entry_id = e.id
          WHERE e.kind IN ('voucher_withdrawal', 'voucher_return', 'exit_freeze', 'exit_return')
          GROUP BY e.id, e.kind
          HAVING NOT ((e.kind IN ('voucher_withdrawal', 'exit_freeze') AND SUM(CASE WHEN p.bucket = 'available' THEN p.amount ELSE 0 END) < 0)
                   OR (e.kind IN ('voucher_return', 'exit_return') AND SUM(CASE WHEN p.bucket = 'available' THEN p.amount ELSE 0 END) > 0))`,
  },
  // On-chain deposits (server/settlement/indexer.ts): a Deposited log is credited once, to the account its
  // address belongs to, for exactly its amount; a second entry for the same log is a double credit.
  {
    rule: "a credited chain deposit is one deposit entry paying its amount into its account",
    sql: `SELECT cd.tx_hash, cd.log_index, cd.account_id, cd.amount, e.kind, e.deposit_tx_hash, e.deposit_log_index,
                 p.account_id AS paid_to, p.amount AS paid
          FROM chain_deposits cd
          LEFT JOIN entries e ON e.id = cd.entry_id
          LEFT JOIN postings p ON p.entry_id = cd.entry_id AND p.bucket = 'available'
          WHERE cd.entry_id IS NOT NULL
            AND (e.id IS NULL OR e.kind <> 'deposit' OR e.deposit_tx_hash IS DISTINCT FROM cd.tx_hash OR e.deposit_log_index IS DISTINCT FROM cd.log_index
                 OR p.account_id IS DISTINCT FROM cd.account_id OR p.amount IS DISTINCT FROM cd.amount)`,
  },
  {
    rule: "a chain deposit is credited to its address's account, and waits only while the address is unlinked",
    sql: `SELECT cd.tx_hash, cd.log_index, cd.address, cd.account_id, aa.account_id AS linked_to
          FROM chain_deposits cd
          LEFT JOIN account_addresses aa ON aa.address = cd.address
          WHERE cd.account_id IS DISTINCT FROM aa.account_id`,
  },
  {
    rule: "every deposit entry for a chain log is the one its chain deposit records",
    sql: `SELECT e.id, e.deposit_tx_hash, e.deposit_log_index
          FROM entries e
          WHERE e.deposit_tx_hash IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM chain_deposits cd WHERE cd.entry_id = e.id)`,
  },
  {
    rule: "a voucher's withdrawal takes exactly its amount from its account, and a returned one gives it back once",
    sql: `SELECT v.address, v.nonce, v.amount, e.kind, p.amount AS taken, r.returns, r.given
          FROM vouchers v
          LEFT JOIN entries e ON e.id = v.entry_id
          LEFT JOIN postings p ON p.entry_id = v.entry_id AND p.account_id = v.account_id AND p.bucket = 'available'
          LEFT JOIN (SELECT e2.voucher_address, e2.voucher_nonce, COUNT(DISTINCT e2.id) AS returns, SUM(p2.amount) AS given,
                            SUM(CASE WHEN p2.account_id IS DISTINCT FROM v2.account_id THEN 1 ELSE 0 END) AS foreign_postings
                     FROM entries e2
                     JOIN vouchers v2 ON v2.address = e2.voucher_address AND v2.nonce = e2.voucher_nonce
                     JOIN postings p2 ON p2.entry_id = e2.id AND p2.bucket = 'available'
                     WHERE e2.kind = 'voucher_return'
                     GROUP BY e2.voucher_address, e2.voucher_nonce) r
            ON r.voucher_address = v.address AND r.voucher_nonce = v.nonce
          WHERE e.kind IS DISTINCT FROM 'voucher_withdrawal' OR e.voucher_address IS DISTINCT FROM v.address OR e.voucher_nonce IS DISTINCT FROM v.nonce
             OR COALESCE(p.amount, 0) <> -v.amount
             OR COALESCE(r.returns, 0) <> (CASE WHEN v.status = 'returned' THEN 1 ELSE 0 END)
             OR COALESCE(r.given, v.amount) <> v.amount OR COALESCE(r.foreign_postings, 0) <> 0`,
  },
  {
    rule: "every voucher entry is the one its voucher records",
    sql: `SELECT e.id, e.kind, e.voucher_address, e.voucher_nonce
          FROM entries e
          LEFT JOIN vouchers v ON v.address = e.voucher_address AND v.nonce = e.voucher_nonce
          WHERE e.voucher_address IS NOT NULL
            AND (v.address IS NULL OR (e.kind = 'voucher_withdrawal' AND v.entry_id IS DISTINCT FROM e.id))`,
  }, // Unilateral exits (server/settlement/exits.ts): an exit's freeze is exactly what its linked entries took out of
  // its account's available balance; nothing else moves money for an exit; and an account whose pending exit is
  // still short of its freeze has nothing available, so no call can spend what the escrow is about to pay out.
  {
    rule: "an exit's frozen amount is what its linked freeze and return entries took from its account",
    sql: `SELECT x.tx_hash, x.log_index, x.account_id, x.frozen, COALESCE(t.taken, 0) AS taken, t.foreign_postings
          FROM chain_exits x
          LEFT JOIN (SELECT e.exit_tx_hash, e.exit_log_index,
                            -SUM(CASE WHEN p.bucket = 'available' THEN p.amount ELSE 0 END) AS taken,
                            SUM(CASE WHEN p.bucket = 'available' AND p.account_id IS DISTINCT FROM x2.account_id THEN 1 ELSE 0 END) AS foreign_postings
                     FROM entries e
                     JOIN chain_exits x2 ON x2.tx_hash = e.exit_tx_hash AND x2.log_index = e.exit_log_index
                     JOIN postings p ON p.entry_id = e.id
                     WHERE e.exit_tx_hash IS NOT NULL
                     GROUP BY e.exit_tx_hash, e.exit_log_index) t
            ON t.exit_tx_hash = x.tx_hash AND t.exit_log_index = x.log_index
          WHERE COALESCE(t.taken, 0) <> x.frozen OR COALESCE(t.foreign_postings, 0) <> 0`,
  },
  {
    rule: "every exit entry names a recorded exit",
    sql: `SELECT e.id, e.kind, e.exit_tx_hash, e.exit_log_index FROM entries e
          WHERE e.exit_tx_hash IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM chain_exits x WHERE x.tx_hash = e.exit_tx_hash AND x.log_index = e.exit_log_index)`,
  },
  {
    rule: "an account with a pending exit short of its freeze has nothing available",
    sql: `SELECT x.account_id, x.tx_hash, x.log_index, x.shortfall, la.balance AS available
          FROM chain_exits x
          JOIN ${BALANCES} la ON la.account_id = x.account_id AND la.bucket = 'available'
          WHERE x.status = 'pending' AND x.shortfall > 0 AND la.balance > 0`,
  },
  // API keys' spending limits (./spend-limits.ts): a key's count of its current period is exactly what its holds
  // counted in that period and not released took (a capture keeps its count, a release gives it back), and no hold
  // names a period of its key that has not begun.
  {
    rule: "a key's spending count is the sum of the holds counted in its period and not released",
    sql: `SELECT l.key_id, l.period_seq, l.spent_micros, COALESCE(h.total, 0) AS counted
          FROM key_spend_limits l
          LEFT JOIN (SELECT spend_key_id, spend_period_seq, SUM(amount) AS total FROM holds
                     WHERE spend_key_id IS NOT NULL AND status <> 'released'
                     GROUP BY spend_key_id, spend_period_seq) h
            ON h.spend_key_id = l.key_id AND h.spend_period_seq = l.period_seq
          WHERE l.spent_micros <> COALESCE(h.total, 0)`,
  },
  {
    rule: "a hold counted against a key's limit names a period of that key that has begun",
    sql: `SELECT h.id, h.spend_key_id, h.spend_period_seq, l.period_seq AS current_seq
          FROM holds h
          LEFT JOIN key_spend_limits l ON l.key_id = h.spend_key_id
          WHERE h.spend_key_id IS NOT NULL AND (l.key_id IS NULL OR h.spend_period_seq IS NULL OR h.spend_period_seq > l.period_seq)`,
  },
  {
    rule: "an exit is recorded against the account its address is linked to",
    sql: `SELECT x.tx_hash, x.log_index, x.address, x.account_id, aa.account_id AS linked_to
          FROM chain_exits x
          LEFT JOIN account_addresses aa ON aa.address = x.address
          WHERE x.account_id IS DISTINCT FROM aa.account_id`,
  },
  // x402 payments (server/x402/): a settled payment is recorded by exactly one x402_payment entry, and nothing else is.
  {
    rule: "a settled x402 payment is one x402_payment entry paying its seller share and fee from the x402 source",
    sql: `SELECT x.call_id, x.status, x.entry_id, e.kind, p.seller, p.fee, p.source, p.foreign_postings
          FROM x402_payments x
          LEFT JOIN entries e ON e.id = x.entry_id
          LEFT JOIN (SELECT entry_id,
                            SUM(CASE WHEN bucket = 'earned' THEN amount ELSE 0 END) AS seller,
                            SUM(CASE WHEN bucket = 'fees' THEN amount ELSE 0 END) AS fee,
                            SUM(CASE WHEN bucket = 'source' THEN amount ELSE 0 END) AS source,
                            SUM(CASE WHEN bucket NOT IN ('earned', 'fees', 'source') THEN 1 ELSE 0 END) AS foreign_postings
                     FROM postings GROUP BY entry_id) p ON p.entry_id = x.entry_id
          WHERE x.status = 'settled'
            AND (e.kind IS DISTINCT FROM 'x402_payment' OR COALESCE(p.seller, 0) <> x.seller_amount
                 OR COALESCE(p.fee, 0) <> x.fee_amount OR COALESCE(p.source, 0) <> -x.amount OR COALESCE(p.foreign_postings, 0) <> 0)`,
  },
  {
    rule: "every x402_payment entry is the one a settled x402 payment names",
    sql: `SELECT e.id FROM entries e
          WHERE e.kind = 'x402_payment'
            AND NOT EXISTS (SELECT 1 FROM x402_payments x WHERE x.entry_id = e.id AND x.status = 'settled')`,
  },
];

/**
 * The rules of PostgreSQL's pending balance deltas (migration 0016): each is the posting of its id, not yet in its row
 * (the rule of which postings wait is postings_move_balance's: money into `earned` and `fees`, out of `held`), so the
 * materialized row plus its deltas is the balance the checks above read; and the row alone stays on the safe side of
 * its CHECK, which the table enforces.
 */
const POSTGRES_CHECKS: readonly { rule: string; sql: string }[] = [
  {
    rule: "every pending balance delta is its posting, one the capture path defers",
    sql: `SELECT d.posting_id, d.account_id, d.bucket, d.amount, p.account_id AS posting_account, p.bucket AS posting_bucket,
                 p.amount AS posting_amount
          FROM ledger_balance_deltas d
          LEFT JOIN postings p ON p.id = d.posting_id
          WHERE p.id IS NULL OR p.account_id <> d.account_id OR p.bucket <> d.bucket OR p.amount <> d.amount
             OR NOT ((d.bucket IN ('earned', 'fees') AND d.amount > 0) OR (d.bucket = 'held' AND d.amount < 0))`,
  },
];

export interface Violation {
  rule: string;
  rows: unknown[];
}

// Internal error, plain on purpose: broken books stop the gateway at start (or fail a test); never a client's answer.
export class LedgerInvariantError extends Error {
  override name = "LedgerInvariantError";
  constructor(readonly violations: Violation[]) {
    super(
      `ledger invariants violated: ${violations
        .map(
          (v) =>
            `${v.rule} (${v.rows.length} row(s), first: ${JSON.stringify(v.rows[0], (_k, x) => (typeof x === "bigint" ? x.toString() : x))})`,
        )
        .join("; ")}`,
    );
  }
}

/** Runs every invariant query and returns the rules that are broken, with the offending rows. */
export async function findViolations(sql: Sql): Promise<Violation[]> {
  const violations: Violation[] = [];
  for (const check of sql.engine === "postgres" ? [...CHECKS, ...POSTGRES_CHECKS] : CHECKS) {
    const rows = await sql.all(check.sql.replaceAll(BALANCES, sql.dialect.balances));
    if (rows.length > 0) violations.push({ rule: check.rule, rows });
  }
  return violations;
}

/** Throws LedgerInvariantError unless every invariant holds. */
export async function assertBalanced(sql: Sql): Promise<void> {
  const violations = await findViolations(sql);
  if (violations.length > 0) throw new LedgerInvariantError(violations);
}
