import type { Db } from "../db/db";

export type CheckoutStatus = "created" | "paid" | "declined" | "abandoned" | "funded";

/** A checkout as the gateway records it. */
export interface CheckoutRecord {
  id: string;
  provider: string;
  accountId: string;
  /** The escrow balance the money goes to: the account's linked address. */
  address: string;
  amountMicros: bigint;
  status: CheckoutStatus;
  declineCode: string | null;
  mintTx: string | null;
  depositTx: string | null;
  /** Whether the deposit indexer has credited the deposit to the ledger. */
  credited: boolean;
  createdAtMs: number;
  expiresAtMs: number;
}

/**
 * The `card_checkouts` table (./card-topups.ts). A checkout moves created → paid | declined | abandoned,
 * and paid → funded; each move is one conditional UPDATE, so of two notifications exactly one
 * moves it. Writes run inside the caller's ledger operation.
 */
export interface CheckoutsStore {
  insertCreated(c: {
    id: string;
    provider: string;
    accountId: string;
    address: string;
    amountMicros: bigint;
    nowMs: number;
    expiresAtMs: number;
  }): void;
  /** Moves a created checkout to its outcome; false if it was not `created` any more. */
  settleCreated(id: string, status: "paid" | "declined" | "abandoned", declineCode: string | null, nowMs: number): boolean;
  /** Records the funding transaction (mint or deposit) sent for a checkout. */
  setFundingTx(id: string, which: "mint" | "deposit", hash: string | null, nowMs: number): void;
  /** Moves a paid checkout to `funded`. */
  markFunded(id: string, nowMs: number): void;
  /** The checkout, with whether the indexer has credited its deposit. */
  get(id: string): CheckoutRecord | undefined;
}

type Row = {
  id: string;
  provider: string;
  account_id: string;
  address: string;
  amount: bigint;
  status: CheckoutStatus;
  decline_code: string | null;
  mint_tx: string | null;
  deposit_tx: string | null;
  created_at: bigint;
  expires_at: bigint;
  credited: bigint;
};

/** CheckoutsStore on the gateway's SQLite database. */
export class SqliteCheckoutsStore implements CheckoutsStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      insert: db.prepare(
        `INSERT INTO card_checkouts (id, provider, account_id, address, amount, status, created_at, expires_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'created', ?, ?, ?)`,
      ),
      settle: db.prepare("UPDATE card_checkouts SET status = ?, decline_code = ?, updated_at = ? WHERE id = ? AND status = 'created'"),
      mintTx: db.prepare("UPDATE card_checkouts SET mint_tx = ?, updated_at = ? WHERE id = ?"),
      depositTx: db.prepare("UPDATE card_checkouts SET deposit_tx = ?, updated_at = ? WHERE id = ?"),
      funded: db.prepare("UPDATE card_checkouts SET status = 'funded', updated_at = ? WHERE id = ? AND status = 'paid'"),
      // Whether the deposit is credited is the indexer's to say: its `chain_deposits` row has its entry.
      get: db.prepare(
        `SELECT c.*, (SELECT COUNT(*) FROM chain_deposits d WHERE d.tx_hash = lower(c.deposit_tx) AND d.entry_id IS NOT NULL) AS credited
         FROM card_checkouts c WHERE c.id = ?`,
      ),
    };
  }

  insertCreated(c: {
    id: string;
    provider: string;
    accountId: string;
    address: string;
    amountMicros: bigint;
    nowMs: number;
    expiresAtMs: number;
  }): void {
    this.stmt.insert.run(c.id, c.provider, c.accountId, c.address, c.amountMicros, c.nowMs, c.expiresAtMs, c.nowMs);
  }

  settleCreated(id: string, status: "paid" | "declined" | "abandoned", declineCode: string | null, nowMs: number): boolean {
    return this.stmt.settle.run(status, declineCode, nowMs, id).changes === 1;
  }

  setFundingTx(id: string, which: "mint" | "deposit", hash: string | null, nowMs: number): void {
    (which === "mint" ? this.stmt.mintTx : this.stmt.depositTx).run(hash, nowMs, id);
  }

  markFunded(id: string, nowMs: number): void {
    this.stmt.funded.run(nowMs, id);
  }

  get(id: string): CheckoutRecord | undefined {
    const row = this.stmt.get.get(id) as Row | undefined;
    if (!row) return undefined;
    return {
      id: row.id,
      provider: row.provider,
      accountId: row.account_id,
      address: row.address,
      amountMicros: row.amount,
      status: row.status,
      declineCode: row.decline_code,
      mintTx: row.mint_tx,
      depositTx: row.deposit_tx,
      credited: row.credited > 0n,
      createdAtMs: Number(row.created_at),
      expiresAtMs: Number(row.expires_at),
    };
  }
}
