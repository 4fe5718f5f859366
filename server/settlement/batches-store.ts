import type { Hash, Hex } from "viem";
import { type Database, type Sql, within } from "../db/sql";

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

/** What a pending batch is recorded with. */
export type PendingBatch = {
  number: number;
  receiptsRoot: Hex;
  callCount: number;
  totalDebitsMicros: bigint;
  platformFeeMicros: bigint;
  recordedAtBlock: bigint;
  createdAtMs: number;
};

const BATCH_COLUMNS = "number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, tx_hash";

const HOLD_COLUMNS = `h.id, h.account_id, h.seller_account_id, h.amount, h.seller_amount, h.fee_amount, h.closed_at,
  (SELECT c.id FROM calls c WHERE c.hold_id = h.id LIMIT 1) AS call_id`;

/**
 * The `settlement_batches` table (./batches.ts), and the reads a batch needs of the ledger's captured holds
 * and the calls log. Moving a hold into a batch is the ledger's write (Ledger.assignHoldToBatch).
 *
 * Reads take an optional `sql` (a transaction to read in, the database by default); a write given a `tx`
 * joins the caller's transaction (the settler records a batch and assigns its holds in one), and otherwise
 * runs in one of its own. At most one batch is pending (a unique partial index on both engines): of two
 * settlers recording at once, the second's insert fails with a uniqueness violation.
 */
export class BatchesStore {
  constructor(private readonly db: Database) {}

  /** The batch recorded but not yet settled, if any. */
  pending(sql: Sql = this.db): Promise<BatchRow | undefined> {
    return sql.one<BatchRow>(`SELECT ${BATCH_COLUMNS} FROM settlement_batches WHERE status = 'pending'`);
  }

  batch(number: bigint | number, sql: Sql = this.db): Promise<BatchRow | undefined> {
    return sql.one<BatchRow>(`SELECT ${BATCH_COLUMNS} FROM settlement_batches WHERE number = ?`, [number]);
  }

  /** The last batch number recorded; 0 before the first. */
  async lastNumber(sql: Sql = this.db): Promise<number> {
    return Number(await sql.value<bigint>("SELECT COALESCE(MAX(number), 0) FROM settlement_batches"));
  }

  /** Records batch `b.number` as pending; throws a uniqueness violation if that number, or any pending batch, exists. */
  insertPending(b: PendingBatch, tx?: Sql): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run(
        `INSERT INTO settlement_batches (number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, created_at)
         VALUES (?, 'pending', ?, ?, ?, ?, ?, ?)`,
        [b.number, b.receiptsRoot, b.callCount, b.totalDebitsMicros, b.platformFeeMicros, b.recordedAtBlock, b.createdAtMs],
      );
    });
  }

  /** Keeps the transaction sent for a pending batch. */
  setTxHash(number: number, hash: Hash, tx?: Sql): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run("UPDATE settlement_batches SET tx_hash = ? WHERE number = ? AND status = 'pending'", [hash, number]);
    });
  }

  /**
   * Marks a pending batch settled (the database adds its calls to the settled totals per payer and seller, in the same
   * transaction: settled_pair_totals); false if it was not pending (settled already, by this settler or another).
   */
  markSettled(number: number, txHash: Hash | null, atMs: number, tx?: Sql): Promise<boolean> {
    return within(this.db, tx, async (tx) => {
      const changed = await tx.run(
        `UPDATE settlement_batches SET status = 'settled', tx_hash = COALESCE(CAST(? AS TEXT), tx_hash), settled_at = ?
         WHERE number = ? AND status = 'pending'`,
        [txHash, atMs, number],
      );
      return changed === 1;
    });
  }

  /** Captured holds not in a batch, per (payer, seller). */
  unbatchedGroups(sql: Sql = this.db): Promise<{ account_id: string; seller_account_id: string; calls: bigint }[]> {
    return sql.all(
      `SELECT account_id, seller_account_id, COUNT(*) AS calls FROM holds
       WHERE status = 'captured' AND batch_number IS NULL GROUP BY account_id, seller_account_id`,
    );
  }

  /** Captured unbatched holds after (closed_at, id), oldest first. */
  unbatchedPage(after: [bigint, string], limit: number, sql: Sql = this.db): Promise<HoldRow[]> {
    return sql.all<HoldRow>(
      `SELECT ${HOLD_COLUMNS} FROM holds h
       WHERE h.status = 'captured' AND h.batch_number IS NULL AND (h.closed_at, h.id) > (?, ?)
       ORDER BY h.closed_at, h.id LIMIT ?`,
      [after[0], after[1], limit],
    );
  }

  async unbatchedCount(sql: Sql = this.db): Promise<number> {
    return Number(await sql.value<bigint>("SELECT COUNT(*) FROM holds WHERE status = 'captured' AND batch_number IS NULL"));
  }

  /** Per payer, what its captured unbatched holds would debit. */
  async unbatchedDebits(sql: Sql = this.db): Promise<Map<string, bigint>> {
    const rows = await sql.all<{ account_id: string; amount: bigint }>(
      `SELECT account_id, CAST(SUM(amount) AS BIGINT) AS amount FROM holds
       WHERE status = 'captured' AND batch_number IS NULL GROUP BY account_id`,
    );
    return new Map(rows.map((r) => [r.account_id, r.amount]));
  }

  holdsOfBatch(number: number, sql: Sql = this.db): Promise<HoldRow[]> {
    return sql.all<HoldRow>(`SELECT ${HOLD_COLUMNS} FROM holds h WHERE h.batch_number = ? ORDER BY h.closed_at, h.id`, [number]);
  }

  /** The hold a call charged (null for a call not charged); undefined for an unknown call. */
  callHold(callId: string, sql: Sql = this.db): Promise<{ hold_id: string | null } | undefined> {
    return sql.one("SELECT hold_id FROM calls WHERE id = ?", [callId]);
  }

  /** A hold's status, batch and how many calls name it. */
  hold(
    holdId: string,
    sql: Sql = this.db,
  ): Promise<{ id: string; status: string; batch_number: bigint | null; calls: bigint } | undefined> {
    return sql.one(
      "SELECT id, status, batch_number, (SELECT COUNT(*) FROM calls c WHERE c.hold_id = holds.id) AS calls FROM holds WHERE id = ?",
      [holdId],
    );
  }
}
