import type { Db } from "../db/db";

/** The rule every single entry obeys; the ledger also asserts it before it writes one (Ledger.post). */
export const ENTRY_SUMS_TO_ZERO = "every entry's postings sum to zero";

/**
 * The ledger's invariants, stated as queries next to the schema they guard. Each query
 * returns the rows that break its rule, so an empty result everywhere means the books
 * are consistent. They run at startup (the gateway refuses to start on a violation) and
 * after every step of the ledger's property tests.
 */
const CHECKS: readonly { rule: string; sql: string }[] = [
  {
    rule: "all postings sum to zero",
    sql: "SELECT COALESCE(SUM(amount), 0) AS total FROM postings HAVING total <> 0",
  },
  {
    rule: ENTRY_SUMS_TO_ZERO,
    sql: "SELECT entry_id, SUM(amount) AS total FROM postings GROUP BY entry_id HAVING total <> 0",
  },
  {
    rule: "every materialized balance equals the sum of its postings",
    sql: `SELECT la.account_id, la.bucket, la.balance, COALESCE(p.total, 0) AS postings
          FROM ledger_accounts la
          LEFT JOIN (SELECT account_id, bucket, SUM(amount) AS total FROM postings GROUP BY account_id, bucket) p
            ON p.account_id = la.account_id AND p.bucket = la.bucket
          WHERE la.balance <> COALESCE(p.total, 0)`,
  },
  {
    rule: "no balance below zero outside the source accounts",
    sql: "SELECT account_id, bucket, balance FROM ledger_accounts WHERE bucket <> 'source' AND balance < 0",
  },
  {
    rule: "each account's held balance equals its open holds",
    sql: `SELECT la.account_id, la.balance, COALESCE(h.total, 0) AS open_holds
          FROM ledger_accounts la
          LEFT JOIN (SELECT account_id, SUM(amount) AS total FROM holds WHERE status = 'open' GROUP BY account_id) h
            ON h.account_id = la.account_id
          WHERE la.bucket = 'held' AND la.balance <> COALESCE(h.total, 0)`,
  },
  {
    rule: "available + held + spent = deposited - withdrawn, per user",
    sql: `SELECT a.id,
                 SUM(CASE WHEN p.bucket IN ('available', 'held') THEN p.amount ELSE 0 END) AS on_hand,
                 SUM(CASE WHEN e.kind = 'capture' AND p.bucket = 'held' THEN -p.amount ELSE 0 END) AS spent,
                 SUM(CASE WHEN e.kind IN ('dev_credit', 'deposit') AND p.bucket = 'available' THEN p.amount ELSE 0 END) AS deposited,
                 SUM(CASE WHEN e.kind = 'withdrawal' AND p.bucket = 'available' THEN -p.amount ELSE 0 END) AS withdrawn
          FROM accounts a
          JOIN postings p ON p.account_id = a.id
          JOIN entries e ON e.id = p.entry_id
          WHERE a.kind IN ('user', 'seller')
          GROUP BY a.id
          HAVING on_hand + spent <> deposited - withdrawn`,
  },
  {
    rule: "a hold is captured or released exactly once, matching its status",
    sql: `SELECT h.id, h.status, COUNT(e.id) AS settlements, GROUP_CONCAT(e.kind) AS kinds
          FROM holds h
          LEFT JOIN entries e ON e.hold_id = h.id AND e.kind IN ('capture', 'release')
          GROUP BY h.id
          HAVING NOT ((h.status = 'open' AND settlements = 0)
                   OR (h.status = 'captured' AND settlements = 1 AND kinds = 'capture')
                   OR (h.status = 'released' AND settlements = 1 AND kinds = 'release'))`,
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
  // On-chain deposits (server/settlement/indexer.ts): a Deposited log is credited once, to the account its
  // address belongs to, for exactly its amount; a second entry for the same log is a double credit.
  {
    rule: "a credited chain deposit is one deposit entry paying its amount into its account",
    sql: `SELECT cd.tx_hash, cd.log_index, cd.account_id, cd.amount, e.kind, e.memo, p.account_id AS paid_to, p.amount AS paid
          FROM chain_deposits cd
          LEFT JOIN entries e ON e.id = cd.entry_id
          LEFT JOIN postings p ON p.entry_id = cd.entry_id AND p.bucket = 'available'
          WHERE cd.entry_id IS NOT NULL
            AND (e.id IS NULL OR e.kind <> 'deposit' OR e.memo IS NOT cd.tx_hash || ':' || cd.log_index
                 OR p.account_id IS NOT cd.account_id OR p.amount IS NOT cd.amount)`,
  },
  {
    rule: "a chain deposit is credited to its address's account, and waits only while the address is unlinked",
    sql: `SELECT cd.tx_hash, cd.log_index, cd.address, cd.account_id, aa.account_id AS linked_to
          FROM chain_deposits cd
          LEFT JOIN account_addresses aa ON aa.address = cd.address
          WHERE cd.account_id IS NOT aa.account_id`,
  },
  {
    rule: "every deposit entry for a chain log is the one its chain deposit records",
    sql: `SELECT e.id, e.memo
          FROM entries e
          WHERE e.kind = 'deposit' AND e.memo GLOB '0x*:*'
            AND NOT EXISTS (SELECT 1 FROM chain_deposits cd WHERE cd.entry_id = e.id)`,
  },
  {
    rule: "a voucher's withdrawal takes exactly its amount from its account, and a returned one gives it back once",
    sql: `SELECT v.address, v.nonce, v.amount, p.amount AS taken,
                 (SELECT COUNT(*) FROM entries e WHERE e.kind = 'withdrawal' AND e.memo = 'voucher ' || v.address || ':' || v.nonce || ' expired unredeemed: returned') AS returns
          FROM vouchers v
          LEFT JOIN postings p ON p.entry_id = v.entry_id AND p.account_id = v.account_id AND p.bucket = 'available'
          WHERE COALESCE(p.amount, 0) <> -v.amount OR returns <> (CASE WHEN v.status = 'returned' THEN 1 ELSE 0 END)`,
  }, // Unilateral exits (server/settlement/exits.ts): an exit's freeze is exactly what its linked entries took out of
  // its account's available balance; nothing else moves money for an exit; and an account whose pending exit is
  // still short of its freeze has nothing available, so no call can spend what the escrow is about to pay out.
  {
    rule: "an exit's frozen amount is what its linked withdrawal entries took from its account",
    sql: `SELECT x.tx_hash, x.log_index, x.account_id, x.frozen, COALESCE(t.taken, 0) AS taken, t.foreign_postings, t.kinds
          FROM chain_exits x
          LEFT JOIN (SELECT ee.exit_tx_hash, ee.exit_log_index,
                            -SUM(CASE WHEN p.bucket = 'available' THEN p.amount ELSE 0 END) AS taken,
                            SUM(CASE WHEN p.bucket = 'available' AND p.account_id IS NOT x2.account_id THEN 1 ELSE 0 END) AS foreign_postings,
                            GROUP_CONCAT(DISTINCT e.kind) AS kinds
                     FROM exit_entries ee
                     JOIN chain_exits x2 ON x2.tx_hash = ee.exit_tx_hash AND x2.log_index = ee.exit_log_index
                     JOIN entries e ON e.id = ee.entry_id
                     JOIN postings p ON p.entry_id = ee.entry_id
                     GROUP BY ee.exit_tx_hash, ee.exit_log_index) t
            ON t.exit_tx_hash = x.tx_hash AND t.exit_log_index = x.log_index
          WHERE COALESCE(t.taken, 0) <> x.frozen OR COALESCE(t.foreign_postings, 0) <> 0 OR COALESCE(t.kinds, 'withdrawal') <> 'withdrawal'`,
  },
  {
    rule: "every exit withdrawal entry is linked to its exit",
    sql: `SELECT e.id, e.memo FROM entries e
          WHERE e.kind = 'withdrawal' AND e.memo GLOB 'exit 0x* 0x*:*: *'
            AND NOT EXISTS (SELECT 1 FROM exit_entries ee WHERE ee.entry_id = e.id)`,
  },
  {
    rule: "an account with a pending exit short of its freeze has nothing available",
    sql: `SELECT x.account_id, x.tx_hash, x.log_index, x.shortfall, la.balance AS available
          FROM chain_exits x
          JOIN ledger_accounts la ON la.account_id = x.account_id AND la.bucket = 'available'
          WHERE x.status = 'pending' AND x.shortfall > 0 AND la.balance > 0`,
  },
  {
    rule: "an exit is recorded against the account its address is linked to",
    sql: `SELECT x.tx_hash, x.log_index, x.address, x.account_id, aa.account_id AS linked_to
          FROM chain_exits x
          LEFT JOIN account_addresses aa ON aa.address = x.address
          WHERE x.account_id IS NOT aa.account_id`,
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
export function findViolations(db: Db): Violation[] {
  const violations: Violation[] = [];
  for (const check of CHECKS) {
    const rows = db.prepare(check.sql).all();
    if (rows.length > 0) violations.push({ rule: check.rule, rows });
  }
  return violations;
}

/** Throws LedgerInvariantError unless every invariant holds. */
export function assertBalanced(db: Db): void {
  const violations = findViolations(db);
  if (violations.length > 0) throw new LedgerInvariantError(violations);
}
