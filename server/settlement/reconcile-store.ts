import type { Database, Sql } from "../db/sql";

/** A recorded settlement batch as reconciliation compares it. */
export type ReconcileBatchRow = {
  number: bigint;
  status: "pending" | "settled";
  receipts_root: string;
  call_count: bigint;
  total_debits: bigint;
  platform_fee: bigint;
};

/** Calls, debits and seller credits of a (payer, seller) pair, in base units. */
export type PairSums = { account_id: string; seller_account_id: string; calls: bigint; debits: bigint; credits: bigint };

/**
 * The reads reconciliation (./reconcile.ts) and a seller's earnings (./earnings.ts) make across the ledger's
 * and settlement's tables: batches, holds, entries and postings, chain deposits and exits, vouchers, linked
 * addresses, indexer progress. Read-only: it writes nothing. Amounts are base units.
 *
 * Each read runs on `sql`: the database, or the snapshot of `snapshot()`, in which every read sees the
 * books as they were at one moment.
 */
export class ReconcileStore {
  constructor(private readonly db: Database) {}

  /**
   * Runs `fn`'s reads on one consistent view of the books, so no write can land between two of them: a
   * read-only REPEATABLE READ transaction on PostgreSQL, a transaction on SQLite.
   */
  snapshot<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    return this.db.transaction(async (tx) => {
      // Must come before the transaction's first query; PostgreSQL's default (READ COMMITTED) would give
      // each statement a snapshot of its own.
      if (tx.engine === "postgres") await tx.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
      return fn(tx);
    });
  }

  /** Whether the database has the settlement schema a reconciliation reads (a database the gateway migrated has). */
  async hasSettlementSchema(sql: Sql = this.db): Promise<boolean> {
    // The batches, and their settled totals (SQLite version 29, PostgreSQL 0017), which a reconciliation reads.
    const found =
      sql.engine === "postgres"
        ? await sql.value<bigint>(
            `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()
             AND table_name IN ('settlement_batches', 'settled_pair_totals')`,
          )
        : await sql.value<bigint>(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('settlement_batches', 'settled_pair_totals')",
          );
    return Number(found ?? 0) === 2;
  }

  /** Every recorded batch, by number. */
  batches(sql: Sql = this.db): Promise<ReconcileBatchRow[]> {
    return sql.all("SELECT number, status, receipts_root, call_count, total_debits, platform_fee FROM settlement_batches ORDER BY number");
  }

  /** The holds a batch holds: how many, their debits and fees. */
  async batchSums(number: bigint, sql: Sql = this.db): Promise<{ calls: bigint; debits: bigint; fees: bigint }> {
    const row = await sql.one<{ calls: bigint; debits: bigint; fees: bigint }>(
      `SELECT COUNT(*) AS calls, COALESCE(SUM(amount), 0) AS debits, COALESCE(SUM(fee_amount), 0) AS fees
       FROM holds WHERE batch_number = ?`,
      [number],
    );
    return row!;
  }

  /** Debits and seller credits of batches up to `lastBatchNumber`, per (payer, seller). */
  settledPerAccount(lastBatchNumber: number, sql: Sql = this.db): Promise<Omit<PairSums, "calls">[]> {
    return sql.all(
      `SELECT h.account_id, h.seller_account_id, SUM(h.amount) AS debits, SUM(h.seller_amount) AS credits
       FROM holds h JOIN settlement_batches b ON b.number = h.batch_number
       WHERE b.number <= ?
       GROUP BY h.account_id, h.seller_account_id
       ORDER BY h.account_id, h.seller_account_id`,
      [lastBatchNumber],
    );
  }

  /** Deposit entries per account and the address the indexer saw each paid to (null: no chain record), up to a block. */
  deposits(blockNumber: bigint, sql: Sql = this.db): Promise<{ account_id: string; address: string | null; amount: bigint }[]> {
    return sql.all(
      // CROSS JOIN: the deposit entries first, by their partial index, then their postings (SQLite keeps the order;
      // left to itself, without statistics, it scanned every posting). Not every call's postings: only deposits'.
      `SELECT p.account_id, cd.address, SUM(p.amount) AS amount
       FROM entries e CROSS JOIN postings p
       LEFT JOIN chain_deposits cd ON cd.entry_id = e.id
       WHERE e.kind = 'deposit' AND p.entry_id = e.id AND p.bucket = 'available' AND (cd.block_number IS NULL OR cd.block_number <= ?)
       GROUP BY p.account_id, cd.address
       ORDER BY p.account_id, cd.address`,
      [blockNumber],
    );
  }

  /** Recorded deposits still waiting for their address to be linked, per address, up to a block. */
  waitingDeposits(blockNumber: bigint, sql: Sql = this.db): Promise<{ address: string; amount: bigint }[]> {
    return sql.all(
      `SELECT address, SUM(amount) AS amount FROM chain_deposits
       WHERE account_id IS NULL AND block_number <= ? GROUP BY address ORDER BY address`,
      [blockNumber],
    );
  }

  /** The last block an indexer finished, if it has started. */
  indexedThrough(name: string, sql: Sql = this.db): Promise<bigint | undefined> {
    return sql.value<bigint>("SELECT last_block FROM indexer_state WHERE name = ?", [name]);
  }

  /** Vouchers the escrow may still owe at a block of time `blockTimeSec` (issued, or redeemed with a deadline at or after it). */
  outstandingVouchers(blockTimeSec: bigint, sql: Sql = this.db): Promise<{ address: string; nonce: bigint; amount: bigint }[]> {
    return sql.all(
      `SELECT address, nonce, amount FROM vouchers
       WHERE status = 'issued' OR (status = 'redeemed' AND deadline >= ?) ORDER BY address, nonce`,
      [blockTimeSec],
    );
  }

  /** What voucher withdrawals (net of returns) took from each account's available balance. */
  voucherWithdrawals(sql: Sql = this.db): Promise<{ account_id: string; amount: bigint }[]> {
    return sql.all(
      // As deposits: the voucher entries by their partial index, then their postings.
      `SELECT p.account_id, -SUM(p.amount) AS amount
       FROM entries e CROSS JOIN postings p
       WHERE e.kind IN ('voucher_withdrawal', 'voucher_return') AND p.entry_id = e.id AND p.bucket = 'available'
       GROUP BY p.account_id
       ORDER BY p.account_id`,
    );
  }

  /** Exits completed up to a block: what was paid, and what the ledger took for each (its linked entries, net). */
  completedExits(
    blockNumber: bigint,
    sql: Sql = this.db,
  ): Promise<{ address: string; account_id: string | null; paid: bigint; taken: bigint }[]> {
    return sql.all(
      `SELECT x.address, x.account_id, x.paid,
              COALESCE((SELECT -SUM(p.amount) FROM entries e JOIN postings p ON p.entry_id = e.id AND p.bucket = 'available'
                        WHERE e.exit_tx_hash = x.tx_hash AND e.exit_log_index = x.log_index), 0) AS taken
       FROM chain_exits x WHERE x.status = 'completed' AND x.closed_block_number <= ?
       ORDER BY x.closed_block_number, x.closed_log_index`,
      [blockNumber],
    );
  }

  /** Every linked address and its account, by address. */
  linkedAddresses(sql: Sql = this.db): Promise<{ address: string; account_id: string }[]> {
    return sql.all("SELECT address, account_id FROM account_addresses ORDER BY address");
  }

  /**
   * A seller's shares: of captured calls in settled batches (their totals, kept per payer as each batch is marked
   * settled) and not (yet) in one (unbatched, or in the pending batch), plus its settled x402 payments. Bounded by
   * the seller's payers and the calls not yet settled, never by every call the seller was paid for.
   */
  async sellerShares(accountId: string, sql: Sql = this.db): Promise<{ settled: bigint; pending: bigint }> {
    // One statement: one snapshot, so a batch marked settled meanwhile is counted once, on one side.
    const row = await sql.one<{ settled: bigint; unbatched: bigint; in_pending: bigint }>(
      `SELECT
         (SELECT COALESCE(SUM(t.credits), 0) FROM settled_pair_totals t WHERE t.seller_account_id = ?) AS settled,
         (SELECT COALESCE(SUM(h.seller_amount), 0) FROM holds h
          WHERE h.status = 'captured' AND h.batch_number IS NULL AND h.seller_account_id = ?) AS unbatched,
         (SELECT COALESCE(SUM(h.seller_amount), 0) FROM settlement_batches b JOIN holds h ON h.batch_number = b.number
          WHERE b.status = 'pending' AND h.seller_account_id = ?) AS in_pending`,
      [accountId, accountId, accountId],
    );
    // Calls paid with x402 are settled on-chain as they are paid (server/x402/): never pending.
    const x402 = await sql.value<bigint>(
      "SELECT COALESCE(SUM(seller_amount), 0) FROM x402_payments WHERE seller_account_id = ? AND status = 'settled'",
      [accountId],
    );
    return { settled: BigInt(row!.settled) + BigInt(x402 ?? 0n), pending: BigInt(row!.unbatched) + BigInt(row!.in_pending) };
  }

  /** The settled totals per (payer, seller), kept as each batch is marked settled (./batches-store.ts markSettled). */
  settledTotals(sql: Sql = this.db): Promise<PairSums[]> {
    return sql.all(
      `SELECT account_id, seller_account_id, calls, debits, credits FROM settled_pair_totals
       ORDER BY account_id, seller_account_id`,
    );
  }

  /** What the calls of the settled batches sum to per (payer, seller), from every hold: what settledTotals must equal. */
  settledPairSums(sql: Sql = this.db): Promise<PairSums[]> {
    return sql.all(
      `SELECT h.account_id, h.seller_account_id, COUNT(*) AS calls, SUM(h.amount) AS debits, SUM(h.seller_amount) AS credits
       FROM holds h JOIN settlement_batches b ON b.number = h.batch_number
       WHERE b.status = 'settled'
       GROUP BY h.account_id, h.seller_account_id
       ORDER BY h.account_id, h.seller_account_id`,
    );
  }

  /** What the calls of one batch sum to per (payer, seller). */
  batchPairSums(number: bigint | number, sql: Sql = this.db): Promise<PairSums[]> {
    return sql.all(
      `SELECT account_id, seller_account_id, COUNT(*) AS calls, SUM(amount) AS debits, SUM(seller_amount) AS credits
       FROM holds WHERE batch_number = ?
       GROUP BY account_id, seller_account_id
       ORDER BY account_id, seller_account_id`,
      [number],
    );
  }

  /**
   * x402 payments (server/x402/) the chain may have completed: settled ones, and those still open (a completion mined
   * but not yet recorded; the open states are x402/payments-store.ts's OPEN_STATUSES, which settlement/ may not
   * import). Each names its call (the escrow's callId) and its split.
   */
  async x402Payments(
    sql: Sql = this.db,
  ): Promise<{ call_id: string; seller_account_id: string; status: string; amount: bigint; seller_amount: bigint; fee_amount: bigint }[]> {
    return sql.all(
      `SELECT call_id, seller_account_id, status, amount, seller_amount, fee_amount
       FROM x402_payments
       WHERE status IN ('settled', 'reserved', 'collecting', 'collected', 'completing', 'refunding', 'settling') ORDER BY call_id`,
    );
  }
}
