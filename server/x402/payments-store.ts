import { type Database, isUniqueViolation, type Sql } from "../db/sql";

/** Where an x402 payment stands (server/x402/schema.ts says what each means). */
export type X402PaymentStatus = "reserved" | "settling" | "settled" | "released" | "failed";

/** One call's x402 payment as the gateway recorded it before forwarding the call. */
export interface X402Payment {
  callId: string;
  skillId: string;
  sellerAccountId: string;
  /** The authorization's signer, lower-case. */
  payer: string;
  /** The authorization's EIP-3009 nonce, lower-case 0x + 64 hex. */
  nonce: string;
  validAfter: bigint;
  validBefore: bigint;
  amountMicros: bigint;
  sellerMicros: bigint;
  feeMicros: bigint;
}

export interface X402PaymentRow extends X402Payment {
  status: X402PaymentStatus;
  txHash: string | null;
  replicaId: string | null;
  createdAtMs: number;
}

interface Row {
  call_id: string;
  skill_id: string;
  seller_account_id: string;
  payer: string;
  nonce: string;
  valid_after: bigint;
  valid_before: bigint;
  amount: bigint;
  seller_amount: bigint;
  fee_amount: bigint;
  status: X402PaymentStatus;
  tx_hash: string | null;
  replica_id: string | null;
  created_at: bigint;
}

const COLUMNS = `call_id, skill_id, seller_account_id, payer, nonce, valid_after, valid_before, amount, seller_amount,
                 fee_amount, status, tx_hash, replica_id, created_at`;

/**
 * The x402 payments' table. A payment is reserved before its call is forwarded, and the (payer, nonce) pair is
 * unique, so one authorization pays for one call at most, on every replica sharing the database, before the chain
 * has seen it. Each state change is one conditional UPDATE: a payment moves on only from the state it was read in.
 */
export class X402PaymentsStore {
  constructor(readonly db: Database) {}

  /** Records `payment` as reserved; false when its authorization (payer, nonce) was already presented. */
  async reserve(payment: X402Payment, replicaId: string | null, nowMs: number, tx?: Sql): Promise<boolean> {
    try {
      await (tx ?? this.db).run(
        `INSERT INTO x402_payments (call_id, skill_id, seller_account_id, payer, nonce, valid_after, valid_before, amount,
                                    seller_amount, fee_amount, status, replica_id, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'reserved', ?, ?)`,
        [
          payment.callId,
          payment.skillId,
          payment.sellerAccountId,
          payment.payer,
          payment.nonce,
          payment.validAfter,
          payment.validBefore,
          payment.amountMicros,
          payment.sellerMicros,
          payment.feeMicros,
          replicaId,
          nowMs,
        ],
      );
      return true;
    } catch (error) {
      if (isUniqueViolation(error)) return false;
      throw error;
    }
  }

  /** reserved → settling, just before the settlement is sent; false if it was no longer reserved. */
  async markSettling(callId: string, tx?: Sql): Promise<boolean> {
    const moved = await (tx ?? this.db).value<string>(
      "UPDATE x402_payments SET status = 'settling' WHERE call_id = ? AND status = 'reserved' RETURNING call_id",
      [callId],
    );
    return moved !== undefined;
  }

  /** settling (or reserved, found settled by recovery) → settled, with its transaction and ledger entry. */
  async markSettled(callId: string, txHash: string, entryId: bigint, nowMs: number, tx: Sql): Promise<boolean> {
    const moved = await tx.value<string>(
      `UPDATE x402_payments SET status = 'settled', tx_hash = ?, entry_id = ?, closed_at = ?
       WHERE call_id = ? AND status IN ('reserved', 'settling') RETURNING call_id`,
      [txHash, entryId, nowMs, callId],
    );
    return moved !== undefined;
  }

  /**
   * Closes an unsettled payment: `released` (nothing was sent: the call failed or was refused) or `failed` (the
   * escrow refused the settlement). False if it was already closed.
   */
  async close(callId: string, status: "released" | "failed", nowMs: number, txHash: string | null = null, tx?: Sql): Promise<boolean> {
    const moved = await (tx ?? this.db).value<string>(
      `UPDATE x402_payments SET status = ?, tx_hash = COALESCE(CAST(? AS TEXT), tx_hash), closed_at = ?
       WHERE call_id = ? AND status IN ('reserved', 'settling') RETURNING call_id`,
      [status, txHash, nowMs, callId],
    );
    return moved !== undefined;
  }

  async get(callId: string, sql: Sql = this.db): Promise<X402PaymentRow | undefined> {
    const row = await sql.one<Row>(`SELECT ${COLUMNS} FROM x402_payments WHERE call_id = ?`, [callId]);
    return row && toPayment(row);
  }

  /** Payments still open (reserved or settling) that were taken before `beforeMs`, oldest first. */
  async open(beforeMs: number, limit = 100): Promise<X402PaymentRow[]> {
    const rows = await this.db.all<Row>(
      `SELECT ${COLUMNS} FROM x402_payments WHERE status IN ('reserved', 'settling') AND created_at < ?
       ORDER BY created_at LIMIT ?`,
      [beforeMs, limit],
    );
    return rows.map(toPayment);
  }

  /** What settled x402 payments credited, per seller account and in all to the platform (for reconciliation). */
  async settledTotals(sql: Sql = this.db): Promise<{ bySeller: Map<string, bigint>; feeMicros: bigint }> {
    const rows = await sql.all<{ seller_account_id: string; seller: bigint; fee: bigint }>(
      `SELECT seller_account_id, SUM(seller_amount) AS seller, SUM(fee_amount) AS fee
       FROM x402_payments WHERE status = 'settled' GROUP BY seller_account_id`,
    );
    const bySeller = new Map<string, bigint>();
    let feeMicros = 0n;
    for (const row of rows) {
      bySeller.set(row.seller_account_id, BigInt(row.seller));
      feeMicros += BigInt(row.fee);
    }
    return { bySeller, feeMicros };
  }
}

function toPayment(row: Row): X402PaymentRow {
  return {
    callId: row.call_id,
    skillId: row.skill_id,
    sellerAccountId: row.seller_account_id,
    payer: row.payer,
    nonce: row.nonce,
    validAfter: BigInt(row.valid_after),
    validBefore: BigInt(row.valid_before),
    amountMicros: BigInt(row.amount),
    sellerMicros: BigInt(row.seller_amount),
    feeMicros: BigInt(row.fee_amount),
    status: row.status,
    txHash: row.tx_hash,
    replicaId: row.replica_id,
    createdAtMs: Number(row.created_at),
  };
}
