import type { Db } from "../db/db";

/** A recorded settlement batch as reconciliation compares it. */
export type ReconcileBatchRow = {
  number: bigint;
  status: "pending" | "settled";
  receipts_root: string;
  call_count: bigint;
  total_debits: bigint;
  platform_fee: bigint;
};

/**
 * The reads reconciliation (./reconcile.ts) and a seller's earnings (./earnings.ts) make across the ledger's
 * and settlement's tables: batches, holds, entries and postings, chain deposits and exits, vouchers, linked
 * addresses, indexer progress. Read-only: it writes nothing. Amounts are base units.
 */
export interface ReconcileStore {
  /** Whether the database has the settlement schema (a handle migrated by openDatabase always has). */
  hasSettlementSchema(): boolean;
  /** Every recorded batch, by number. */
  batches(): ReconcileBatchRow[];
  /** The holds a batch holds: how many, their debits and fees. */
  batchSums(number: bigint): { calls: bigint; debits: bigint; fees: bigint };
  /** Debits and seller credits of batches up to `lastBatchNumber`, per (payer, seller). */
  settledPerAccount(lastBatchNumber: number): { account_id: string; seller_account_id: string; debits: bigint; credits: bigint }[];
  /** Deposit entries per account and the address the indexer saw each paid to (null: no chain record), up to a block. */
  deposits(blockNumber: bigint): { account_id: string; address: string | null; amount: bigint }[];
  /** Recorded deposits still waiting for their address to be linked, per address, up to a block. */
  waitingDeposits(blockNumber: bigint): { address: string; amount: bigint }[];
  /** The last block an indexer finished, if it has started. */
  indexedThrough(name: string): bigint | undefined;
  /** Vouchers the escrow may still owe at a block of time `blockTimeSec` (issued, or redeemed with a deadline at or after it). */
  outstandingVouchers(blockTimeSec: bigint): { address: string; nonce: bigint; amount: bigint }[];
  /** What voucher withdrawals (net of returns) took from each account's available balance. */
  voucherWithdrawals(): { account_id: string; amount: bigint }[];
  /** Exits completed up to a block: what was paid, and what the ledger took for each (its linked entries, net). */
  completedExits(blockNumber: bigint): { address: string; account_id: string | null; paid: bigint; taken: bigint }[];
  /** Every linked address and its account, by address. */
  linkedAddresses(): { address: string; account_id: string }[];
  /** A seller's captured shares: in settled batches, and not (yet) in one. */
  sellerShares(accountId: string): { settled: bigint; pending: bigint };
}

/** ReconcileStore on the gateway's SQLite database. */
export class SqliteReconcileStore implements ReconcileStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      schema: db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'settlement_batches'"),
      batches: db.prepare(
        "SELECT number, status, receipts_root, call_count, total_debits, platform_fee FROM settlement_batches ORDER BY number",
      ),
      batchSums: db.prepare(
        `SELECT COUNT(*) AS calls, COALESCE(SUM(amount), 0) AS debits, COALESCE(SUM(fee_amount), 0) AS fees
         FROM holds WHERE batch_number = ?`,
      ),
      settledPerAccount: db.prepare(
        `SELECT h.account_id, h.seller_account_id, SUM(h.amount) AS debits, SUM(h.seller_amount) AS credits
         FROM holds h JOIN settlement_batches b ON b.number = h.batch_number
         WHERE b.number <= ?
         GROUP BY h.account_id, h.seller_account_id`,
      ),
      deposits: db.prepare(
        `SELECT p.account_id, cd.address, SUM(p.amount) AS amount
         FROM entries e JOIN postings p ON p.entry_id = e.id AND p.bucket = 'available'
         LEFT JOIN chain_deposits cd ON cd.entry_id = e.id
         WHERE e.kind = 'deposit' AND (cd.block_number IS NULL OR cd.block_number <= ?)
         GROUP BY p.account_id, cd.address`,
      ),
      waitingDeposits: db.prepare(
        "SELECT address, SUM(amount) AS amount FROM chain_deposits WHERE account_id IS NULL AND block_number <= ? GROUP BY address",
      ),
      indexedThrough: db.prepare("SELECT last_block FROM indexer_state WHERE name = ?").pluck(),
      outstandingVouchers: db.prepare(
        "SELECT address, nonce, amount FROM vouchers WHERE status = 'issued' OR (status = 'redeemed' AND deadline >= ?)",
      ),
      voucherWithdrawals: db.prepare(
        `SELECT p.account_id, -SUM(p.amount) AS amount
         FROM entries e JOIN postings p ON p.entry_id = e.id AND p.bucket = 'available'
         WHERE e.kind IN ('voucher_withdrawal', 'voucher_return')
         GROUP BY p.account_id`,
      ),
      completedExits: db.prepare(
        `SELECT x.address, x.account_id, x.paid,
                COALESCE((SELECT -SUM(p.amount) FROM entries e JOIN postings p ON p.entry_id = e.id AND p.bucket = 'available'
                          WHERE e.exit_tx_hash = x.tx_hash AND e.exit_log_index = x.log_index), 0) AS taken
         FROM chain_exits x WHERE x.status = 'completed' AND x.closed_block_number <= ?`,
      ),
      linked: db.prepare("SELECT address, account_id FROM account_addresses ORDER BY address"),
      sellerShares: db.prepare(
        `SELECT
           COALESCE(SUM(CASE WHEN b.status = 'settled' THEN h.seller_amount ELSE 0 END), 0) AS settled,
           COALESCE(SUM(CASE WHEN b.status IS NULL OR b.status <> 'settled' THEN h.seller_amount ELSE 0 END), 0) AS pending
         FROM holds h LEFT JOIN settlement_batches b ON b.number = h.batch_number
         WHERE h.seller_account_id = ? AND h.status = 'captured'`,
      ),
    };
  }

  hasSettlementSchema(): boolean {
    return this.stmt.schema.get() !== undefined;
  }

  batches(): ReconcileBatchRow[] {
    return this.stmt.batches.all() as ReconcileBatchRow[];
  }

  batchSums(number: bigint): { calls: bigint; debits: bigint; fees: bigint } {
    return this.stmt.batchSums.get(number) as { calls: bigint; debits: bigint; fees: bigint };
  }

  settledPerAccount(lastBatchNumber: number): { account_id: string; seller_account_id: string; debits: bigint; credits: bigint }[] {
    return this.stmt.settledPerAccount.all(lastBatchNumber) as {
      account_id: string;
      seller_account_id: string;
      debits: bigint;
      credits: bigint;
    }[];
  }

  deposits(blockNumber: bigint): { account_id: string; address: string | null; amount: bigint }[] {
    return this.stmt.deposits.all(blockNumber) as { account_id: string; address: string | null; amount: bigint }[];
  }

  waitingDeposits(blockNumber: bigint): { address: string; amount: bigint }[] {
    return this.stmt.waitingDeposits.all(blockNumber) as { address: string; amount: bigint }[];
  }

  indexedThrough(name: string): bigint | undefined {
    return this.stmt.indexedThrough.get(name) as bigint | undefined;
  }

  outstandingVouchers(blockTimeSec: bigint): { address: string; nonce: bigint; amount: bigint }[] {
    return this.stmt.outstandingVouchers.all(blockTimeSec) as { address: string; nonce: bigint; amount: bigint }[];
  }

  voucherWithdrawals(): { account_id: string; amount: bigint }[] {
    return this.stmt.voucherWithdrawals.all() as { account_id: string; amount: bigint }[];
  }

  completedExits(blockNumber: bigint): { address: string; account_id: string | null; paid: bigint; taken: bigint }[] {
    return this.stmt.completedExits.all(blockNumber) as { address: string; account_id: string | null; paid: bigint; taken: bigint }[];
  }

  linkedAddresses(): { address: string; account_id: string }[] {
    return this.stmt.linked.all() as { address: string; account_id: string }[];
  }

  sellerShares(accountId: string): { settled: bigint; pending: bigint } {
    return this.stmt.sellerShares.get(accountId) as { settled: bigint; pending: bigint };
  }
}
