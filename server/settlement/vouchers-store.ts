import { type Database, type Sql, within } from "../db/sql";

/** A voucher row as settlement reads it back. */
export interface VoucherRecord {
  address: string;
  nonce: bigint;
  accountId: string;
  amountMicros: bigint;
  deadlineSec: bigint;
  status: "issued" | "redeemed" | "returned";
  createdAtMs: number;
}

type Row = {
  address: string;
  nonce: bigint;
  account_id: string;
  amount: bigint;
  deadline: bigint;
  status: VoucherRecord["status"];
  created_at: bigint;
};

const toRecord = (r: Row): VoucherRecord => ({
  address: r.address,
  nonce: r.nonce,
  accountId: r.account_id,
  amountMicros: r.amount,
  deadlineSec: r.deadline,
  status: r.status,
  createdAtMs: Number(r.created_at),
});

/**
 * The `vouchers` table (./vouchers.ts): every SQL statement on it lives here. The ledger entry a voucher's
 * amount left by is the ledger's (Ledger.withdrawByVoucher); this records the voucher beside it, in the same
 * transaction. A write given a `tx` joins the caller's transaction, and otherwise runs in one of its own.
 */
export class VoucherStore {
  constructor(private readonly db: Database) {}

  /** Records an issued voucher and the entry its amount left the ledger by, issued at `createdAtMs` (default now). */
  insertIssued(
    v: {
      address: string;
      nonce: bigint;
      accountId: string;
      amountMicros: bigint;
      deadlineSec: bigint;
      entryId: bigint;
      createdAtMs?: number;
    },
    tx?: Sql,
  ): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run(
        `INSERT INTO vouchers (address, nonce, account_id, amount, deadline, status, entry_id, created_at)
         VALUES (?, ?, ?, ?, ?, 'issued', ?, ?)`,
        [v.address, v.nonce, v.accountId, v.amountMicros, v.deadlineSec, v.entryId, v.createdAtMs ?? Date.now()],
      );
    });
  }

  /** Keeps the signature given out for a voucher. */
  setSignature(address: string, nonce: bigint, signature: string, tx?: Sql): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run("UPDATE vouchers SET signature = ? WHERE address = ? AND nonce = ?", [signature, address, nonce]);
    });
  }

  /**
   * Moves an issued voucher to its end state; false if it was not issued any more (someone settled it
   * first). One conditional UPDATE: of two replicas settling the same voucher, the second waits for the
   * first's row lock, then finds it settled and changes nothing.
   */
  settle(address: string, nonce: bigint, status: "redeemed" | "returned", tx?: Sql): Promise<boolean> {
    return within(this.db, tx, async (tx) => {
      const changed = await tx.run("UPDATE vouchers SET status = ? WHERE address = ? AND nonce = ? AND status = 'issued'", [
        status,
        address,
        nonce,
      ]);
      return changed === 1;
    });
  }

  /** Every voucher still issued, oldest first. */
  async issued(sql: Sql = this.db): Promise<VoucherRecord[]> {
    const rows = await sql.all<Row>(
      "SELECT address, nonce, account_id, amount, deadline, status, created_at FROM vouchers WHERE status = 'issued' ORDER BY created_at",
    );
    return rows.map(toRecord);
  }

  /**
   * The account's open vouchers at `nowSec`: still issued (no redemption seen yet) and not past their deadline, so
   * the escrow would still pay them. With the deadline of the first to expire, after which it stops counting.
   */
  async openOf(accountId: string, nowSec: bigint, sql: Sql = this.db): Promise<{ count: number; firstDeadlineSec?: bigint }> {
    const row = await sql.one<{ open: bigint; first_deadline: bigint | null }>(
      "SELECT COUNT(*) AS open, MIN(deadline) AS first_deadline FROM vouchers WHERE account_id = ? AND status = 'issued' AND deadline >= ?",
      [accountId, nowSec],
    );
    const first = row?.first_deadline;
    return { count: Number(row?.open ?? 0), firstDeadlineSec: first === null || first === undefined ? undefined : BigInt(first) };
  }

  /**
   * How many vouchers the account was issued after `sinceMs`, whatever became of them: the table is the log a
   * sliding window counts. With the time of the first of them, the one that leaves the window next.
   */
  async issuedSince(accountId: string, sinceMs: number, sql: Sql = this.db): Promise<{ count: number; firstAtMs?: number }> {
    const row = await sql.one<{ issued: bigint; first_at: bigint | null }>(
      "SELECT COUNT(*) AS issued, MIN(created_at) AS first_at FROM vouchers WHERE account_id = ? AND created_at > ?",
      [accountId, sinceMs],
    );
    const first = row?.first_at;
    return { count: Number(row?.issued ?? 0), firstAtMs: first === null || first === undefined ? undefined : Number(first) };
  }

  /** Whether any voucher is still issued. */
  async anyIssued(sql: Sql = this.db): Promise<boolean> {
    return (await sql.one("SELECT 1 AS one FROM vouchers WHERE status = 'issued' LIMIT 1")) !== undefined;
  }

  /** The vouchers still issued whose deadline is before `beforeSec`, first deadline first. */
  async issuedExpiredBefore(beforeSec: bigint, sql: Sql = this.db): Promise<VoucherRecord[]> {
    const rows = await sql.all<Row>(
      `SELECT address, nonce, account_id, amount, deadline, status, created_at FROM vouchers
       WHERE status = 'issued' AND deadline < ? ORDER BY deadline`,
      [beforeSec],
    );
    return rows.map(toRecord);
  }

  /** An account's newest vouchers, newest first. */
  async ofAccount(accountId: string, limit: number, sql: Sql = this.db): Promise<VoucherRecord[]> {
    const rows = await sql.all<Row>(
      `SELECT address, nonce, account_id, amount, deadline, status, created_at FROM vouchers
       WHERE account_id = ? ORDER BY created_at DESC LIMIT ?`,
      [accountId, limit],
    );
    return rows.map(toRecord);
  }
}
