import type { Database, Sql } from "../db/sql";

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

/**
 * The next `updated_at` of a row: now, or one past the current value when that is not earlier (two writes in
 * one millisecond, or a replica whose clock is behind). Every write to a checkout thus leaves a value no
 * earlier write left, so a funder that wrote it last can tell (`holdFunding`). Its two `?` are both now.
 */
const NEXT_STAMP = "CASE WHEN CAST(? AS BIGINT) > updated_at THEN CAST(? AS BIGINT) ELSE updated_at + 1 END";

/**
 * The `card_checkouts` table (./card-topups.ts), on either engine. A checkout moves created → paid | declined |
 * abandoned, and paid → funded; each move is one conditional UPDATE, so of two notifications (on one replica or
 * two) exactly one moves it. Which replica funds a paid checkout is decided in the table too: its `updated_at`
 * is a lease (`holdFunding`). Writes take the caller's transaction when given one.
 */
export class CheckoutsStore {
  constructor(private readonly db: Database) {}

  async insertCreated(
    c: {
      id: string;
      provider: string;
      accountId: string;
      address: string;
      amountMicros: bigint;
      nowMs: number;
      expiresAtMs: number;
    },
    tx?: Sql,
  ): Promise<void> {
    await (tx ?? this.db).run(
      `INSERT INTO card_checkouts (id, provider, account_id, address, amount, status, created_at, expires_at, updated_at)
       VALUES (?, ?, ?, ?, ?, 'created', ?, ?, ?)`,
      [c.id, c.provider, c.accountId, c.address, c.amountMicros, c.nowMs, c.expiresAtMs, c.nowMs],
    );
  }

  /**
   * Moves a created checkout to its outcome; resolves with the checkout's new `updated_at` (its funding lease,
   * for a paid one), or undefined if it was not `created` any more.
   */
  async settleCreated(
    id: string,
    status: "paid" | "declined" | "abandoned",
    declineCode: string | null,
    nowMs: number,
    tx?: Sql,
  ): Promise<number | undefined> {
    const stamp = await (tx ?? this.db).value<bigint>(
      `UPDATE card_checkouts SET status = ?, decline_code = ?, updated_at = ${NEXT_STAMP}
       WHERE id = ? AND status = 'created' RETURNING updated_at`,
      [status, declineCode, nowMs, nowMs, id],
    );
    return stamp === undefined ? undefined : Number(stamp);
  }

  /**
   * Takes or keeps the right to fund a paid checkout: granted when the checkout's `updated_at` is still
   * `heldStampMs` (nobody wrote since this funder did) or older than `staleBeforeMs` (its last funder went quiet:
   * failed, died, or gave up). Resolves with the new `updated_at`, the funder's to present next time, or
   * undefined when the checkout is not `paid` or another funder holds it.
   */
  async holdFunding(
    id: string,
    heldStampMs: number | undefined,
    staleBeforeMs: number,
    nowMs: number,
    tx?: Sql,
  ): Promise<number | undefined> {
    const stamp = await (tx ?? this.db).value<bigint>(
      `UPDATE card_checkouts SET updated_at = ${NEXT_STAMP}
       WHERE id = ? AND status = 'paid' AND (updated_at = ? OR updated_at < ?) RETURNING updated_at`,
      [nowMs, nowMs, id, heldStampMs ?? -1, staleBeforeMs],
    );
    return stamp === undefined ? undefined : Number(stamp);
  }

  /** Records the funding transaction (mint or deposit) sent for a checkout; resolves with its new `updated_at`. */
  async setFundingTx(id: string, which: "mint" | "deposit", hash: string | null, nowMs: number, tx?: Sql): Promise<number | undefined> {
    const column = which === "mint" ? "mint_tx" : "deposit_tx";
    const stamp = await (tx ?? this.db).value<bigint>(
      `UPDATE card_checkouts SET ${column} = ?, updated_at = ${NEXT_STAMP} WHERE id = ? RETURNING updated_at`,
      [hash, nowMs, nowMs, id],
    );
    return stamp === undefined ? undefined : Number(stamp);
  }

  /** Moves a paid checkout to `funded`; false if it was not `paid`. */
  async markFunded(id: string, nowMs: number, tx?: Sql): Promise<boolean> {
    const changed = await (tx ?? this.db).run(
      `UPDATE card_checkouts SET status = 'funded', updated_at = ${NEXT_STAMP} WHERE id = ? AND status = 'paid'`,
      [nowMs, nowMs, id],
    );
    return changed === 1;
  }

  /** The checkout, with whether the indexer has credited its deposit. */
  async get(id: string, sql: Sql = this.db): Promise<CheckoutRecord | undefined> {
    // Whether the deposit is credited is the indexer's to say: its `chain_deposits` row has its entry.
    const row = await sql.one<Row>(
      `SELECT c.*, (SELECT COUNT(*) FROM chain_deposits d WHERE d.tx_hash = lower(c.deposit_tx) AND d.entry_id IS NOT NULL) AS credited
       FROM card_checkouts c WHERE c.id = ?`,
      [id],
    );
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
