import type { Db } from "../db/db";

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
 * The `vouchers` table (./vouchers.ts). The ledger entry a voucher's amount left by is the ledger's
 * (Ledger.withdrawByVoucher); this records the voucher beside it, in the same ledger operation.
 */
export interface VoucherStore {
  /** Records an issued voucher and the entry its amount left the ledger by. */
  insertIssued(v: { address: string; nonce: bigint; accountId: string; amountMicros: bigint; deadlineSec: bigint; entryId: bigint }): void;
  /** Keeps the signature given out for a voucher. */
  setSignature(address: string, nonce: bigint, signature: string): void;
  /** Moves an issued voucher to its end state; false if it was not issued any more (someone settled it first). */
  settle(address: string, nonce: bigint, status: "redeemed" | "returned"): boolean;
  /** Every voucher still issued, oldest first. */
  issued(): VoucherRecord[];
  /** An account's newest vouchers, newest first. */
  ofAccount(accountId: string, limit: number): VoucherRecord[];
}

/** VoucherStore on the gateway's SQLite database: every SQL statement on `vouchers` lives here. */
export class SqliteVoucherStore implements VoucherStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      insert: db.prepare(
        `INSERT INTO vouchers (address, nonce, account_id, amount, deadline, status, entry_id, created_at)
         VALUES (?, ?, ?, ?, ?, 'issued', ?, ?)`,
      ),
      sign: db.prepare("UPDATE vouchers SET signature = ? WHERE address = ? AND nonce = ?"),
      settle: db.prepare("UPDATE vouchers SET status = ? WHERE address = ? AND nonce = ? AND status = 'issued'"),
      issued: db.prepare(
        "SELECT address, nonce, account_id, amount, deadline, status, created_at FROM vouchers WHERE status = 'issued' ORDER BY created_at",
      ),
      ofAccount: db.prepare(
        `SELECT address, nonce, account_id, amount, deadline, status, created_at FROM vouchers
         WHERE account_id = ? ORDER BY created_at DESC LIMIT ?`,
      ),
    };
  }

  /** Records an issued voucher and the entry its amount left the ledger by. */
  insertIssued(v: { address: string; nonce: bigint; accountId: string; amountMicros: bigint; deadlineSec: bigint; entryId: bigint }): void {
    this.stmt.insert.run(v.address, v.nonce, v.accountId, v.amountMicros, v.deadlineSec, v.entryId, Date.now());
  }

  /** Keeps the signature given out for a voucher. */
  setSignature(address: string, nonce: bigint, signature: string): void {
    this.stmt.sign.run(signature, address, nonce);
  }

  /** Moves an issued voucher to its end state; false if it was not issued any more (someone settled it first). */
  settle(address: string, nonce: bigint, status: "redeemed" | "returned"): boolean {
    return this.stmt.settle.run(status, address, nonce).changes === 1;
  }

  /** Every voucher still issued, oldest first. */
  issued(): VoucherRecord[] {
    return (this.stmt.issued.all() as Row[]).map(toRecord);
  }

  /** An account's newest vouchers, newest first. */
  ofAccount(accountId: string, limit: number): VoucherRecord[] {
    return (this.stmt.ofAccount.all(accountId, limit) as Row[]).map(toRecord);
  }
}
