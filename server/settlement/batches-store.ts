import type { Hash, Hex } from "viem";
import type { Db } from "../db/db";

/** A captured hold as a batch reads it (the `holds` table is the ledger's; batches only read it). */
export type HoldRow = {
  id: string;
  account_id: string;
  seller_account_id: string;
  amount: bigint;
  seller_amount: bigint;
  fee_amount: bigint;
  closed_at: bigint;
  call_id: string | null;
};

/** A row of `settlement_batches`. */
export type BatchRow = {
  number: bigint;
  status: "pending" | "settled";
  receipts_root: Hex;
  call_count: bigint;
  total_debits: bigint;
  platform_fee: bigint;
  recorded_at_block: bigint;
  tx_hash: Hash | null;
};

/**
 * The `settlement_batches` table (./batches.ts), and the reads a batch needs of the ledger's captured holds
 * and the calls log. Moving a hold into a batch is the ledger's write (Ledger.assignHoldToBatch). Writes run
 * inside the caller's ledger operation.
 */
export interface BatchesStore {
  /** The batch recorded but not yet settled, if any. */
  pending(): BatchRow | undefined;
  batch(number: bigint | number): BatchRow | undefined;
  /** The last batch number recorded; 0 before the first. */
  lastNumber(): number;
  insertPending(b: {
    number: number;
    receiptsRoot: Hex;
    callCount: number;
    totalDebitsMicros: bigint;
    platformFeeMicros: bigint;
    recordedAtBlock: bigint;
    createdAtMs: number;
  }): void;
  /** Keeps the transaction sent for a pending batch. */
  setTxHash(number: number, hash: Hash): void;
  /** Marks a pending batch settled; false if it was not pending. */
  markSettled(number: number, txHash: Hash | null, atMs: number): boolean;
  /** Captured holds not in a batch, per (payer, seller). */
  unbatchedGroups(): { account_id: string; seller_account_id: string; calls: bigint }[];
  /** Captured unbatched holds after (closed_at, id), oldest first. */
  unbatchedPage(after: [bigint, string], limit: number): HoldRow[];
  unbatchedCount(): number;
  /** Per payer, what its captured unbatched holds would debit. */
  unbatchedDebits(): Map<string, bigint>;
  holdsOfBatch(number: number): HoldRow[];
  /** The hold a call charged (null for a call not charged); undefined for an unknown call. */
  callHold(callId: string): { hold_id: string | null } | undefined;
  /** A hold's status, batch and how many calls name it. */
  hold(holdId: string): { status: string; batch_number: bigint | null; calls: bigint } | undefined;
}

const HOLD_COLUMNS = `h.id, h.account_id, h.seller_account_id, h.amount, h.seller_amount, h.fee_amount, h.closed_at,
  (SELECT c.id FROM calls c WHERE c.hold_id = h.id LIMIT 1) AS call_id`;

/** BatchesStore on the gateway's SQLite database. */
export class SqliteBatchesStore implements BatchesStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      pending: db.prepare(
        `SELECT number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, tx_hash
         FROM settlement_batches WHERE status = 'pending'`,
      ),
      batch: db.prepare(
        `SELECT number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, tx_hash
         FROM settlement_batches WHERE number = ?`,
      ),
      lastNumber: db.prepare("SELECT COALESCE(MAX(number), 0) FROM settlement_batches").pluck(),
      unbatchedGroups: db.prepare(
        `SELECT account_id, seller_account_id, COUNT(*) AS calls FROM holds
         WHERE status = 'captured' AND batch_number IS NULL GROUP BY account_id, seller_account_id`,
      ),
      unbatchedPage: db.prepare(
        `SELECT ${HOLD_COLUMNS} FROM holds h
         WHERE h.status = 'captured' AND h.batch_number IS NULL AND (h.closed_at, h.id) > (?, ?)
         ORDER BY h.closed_at, h.id LIMIT ?`,
      ),
      unbatchedCount: db.prepare("SELECT COUNT(*) FROM holds WHERE status = 'captured' AND batch_number IS NULL").pluck(),
      unbatchedDebits: db.prepare(
        "SELECT account_id, SUM(amount) AS amount FROM holds WHERE status = 'captured' AND batch_number IS NULL GROUP BY account_id",
      ),
      holdsOfBatch: db.prepare(`SELECT ${HOLD_COLUMNS} FROM holds h WHERE h.batch_number = ? ORDER BY h.closed_at, h.id`),
      insertBatch: db.prepare(
        `INSERT INTO settlement_batches (number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, created_at)
         VALUES (?, 'pending', ?, ?, ?, ?, ?, ?)`,
      ),
      setTxHash: db.prepare("UPDATE settlement_batches SET tx_hash = ? WHERE number = ? AND status = 'pending'"),
      markSettled: db.prepare(
        "UPDATE settlement_batches SET status = 'settled', tx_hash = COALESCE(?, tx_hash), settled_at = ? WHERE number = ? AND status = 'pending'",
      ),
      callById: db.prepare("SELECT hold_id FROM calls WHERE id = ?"),
      holdById: db.prepare(
        "SELECT id, status, batch_number, (SELECT COUNT(*) FROM calls c WHERE c.hold_id = holds.id) AS calls FROM holds WHERE id = ?",
      ),
    };
  }

  pending(): BatchRow | undefined {
    return this.stmt.pending.get() as BatchRow | undefined;
  }

  batch(number: bigint | number): BatchRow | undefined {
    return this.stmt.batch.get(number) as BatchRow | undefined;
  }

  lastNumber(): number {
    return Number(this.stmt.lastNumber.get() as bigint);
  }

  insertPending(b: {
    number: number;
    receiptsRoot: Hex;
    callCount: number;
    totalDebitsMicros: bigint;
    platformFeeMicros: bigint;
    recordedAtBlock: bigint;
    createdAtMs: number;
  }): void {
    this.stmt.insertBatch.run(
      b.number,
      b.receiptsRoot,
      b.callCount,
      b.totalDebitsMicros,
      b.platformFeeMicros,
      b.recordedAtBlock,
      b.createdAtMs,
    );
  }

  setTxHash(number: number, hash: Hash): void {
    this.stmt.setTxHash.run(hash, number);
  }

  markSettled(number: number, txHash: Hash | null, atMs: number): boolean {
    return this.stmt.markSettled.run(txHash, atMs, number).changes === 1;
  }

  unbatchedGroups(): { account_id: string; seller_account_id: string; calls: bigint }[] {
    return this.stmt.unbatchedGroups.all() as { account_id: string; seller_account_id: string; calls: bigint }[];
  }

  unbatchedPage(after: [bigint, string], limit: number): HoldRow[] {
    return this.stmt.unbatchedPage.all(after[0], after[1], limit) as HoldRow[];
  }

  unbatchedCount(): number {
    return Number(this.stmt.unbatchedCount.get() as bigint);
  }

  unbatchedDebits(): Map<string, bigint> {
    const rows = this.stmt.unbatchedDebits.all() as { account_id: string; amount: bigint }[];
    return new Map(rows.map((r) => [r.account_id, r.amount]));
  }

  holdsOfBatch(number: number): HoldRow[] {
    return this.stmt.holdsOfBatch.all(number) as HoldRow[];
  }

  callHold(callId: string): { hold_id: string | null } | undefined {
    return this.stmt.callById.get(callId) as { hold_id: string | null } | undefined;
  }

  hold(holdId: string): { status: string; batch_number: bigint | null; calls: bigint } | undefined {
    return this.stmt.holdById.get(holdId) as { status: string; batch_number: bigint | null; calls: bigint } | undefined;
  }
}
