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

  /** Records an issued voucher and the entry its amount left the ledger by. */
  insertIssued(
    v: { address: string; nonce: bigint; accountId: string; amountMicros: bigint; deadlineSec: bigint; entryId: bigint },
    tx?: Sql,
  ): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run(
        `INSERT INTO vouchers (address, nonce, account_id, amount, deadline, status, entry_id, created_at)
         VALUES (?, ?, ?, ?, ?, 'issued', ?, ?)`,
        [v.address, v.nonce, v.accountId, v.amountMicros, v.deadlineSec, v.entryId, Date.now()],
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
