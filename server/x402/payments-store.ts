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
  /** The chain's head just before the settlement was sent (settling and later); null while reserved. */
  settleBlock: bigint | null;
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
  settle_block: bigint | null;
  replica_id: string | null;
  created_at: bigint;
}

const COLUMNS = `call_id, skill_id, seller_account_id, payer, nonce, valid_after, valid_before, amount, seller_amount,
                 fee_amount, status, tx_hash, settle_block, replica_id, created_at`;

/**
 * The x402 payments' table. A payment is reserved before its call is forwarded, and the (payer, nonce) pair is
 * unique, so one authorization pays for one call at most, on every replica sharing the database, before the chain
 * has seen it. Each state change is one conditional UPDATE: a payment moves on only from the state it was read in.
 */
export class X402PaymentsStore {
  constructor(readonly db: Database) {}

  /**
   * Records `payment` as reserved, unless its authorization (payer, nonce) was already presented (`reused`), or the
   * payer's open payments (reserved or settling) and this one would come to more than `balanceMicros`, the payer's
   * USDC balance just read (`short`): one balance pays for as many calls at once as it covers, never more, on every
   * replica. The payer's reservations are taken one at a time: on PostgreSQL under a lock on the payer for the
   * transaction, on SQLite by its single writer. On success, what the payer's open payments come to with this one.
   */
  async reserve(
    payment: X402Payment,
    replicaId: string | null,
    nowMs: number,
    balanceMicros: bigint,
  ): Promise<{ kind: "reserved"; openMicros: bigint } | { kind: "reused" } | { kind: "short"; openMicros: bigint }> {
    try {
      return await this.db.transaction(async (tx) => {
        if (tx.engine === "postgres") await tx.run("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", [`x402 payer ${payment.payer}`]);
        // A reused authorization is told so first, whatever the payer's balance.
        if (await tx.value("SELECT call_id FROM x402_payments WHERE payer = ? AND nonce = ?", [payment.payer, payment.nonce])) {
          return { kind: "reused" } as const;
        }
        const open = BigInt(
          (await tx.value<bigint | number>(
            "SELECT COALESCE(SUM(amount), 0) FROM x402_payments WHERE payer = ? AND status IN ('reserved', 'settling')",
            [payment.payer],
          )) ?? 0,
        );
        const openMicros = open + payment.amountMicros;
        if (openMicros > balanceMicros) return { kind: "short", openMicros: open } as const;
        await tx.run(
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
        return { kind: "reserved", openMicros } as const;
      });
    } catch (error) {
      if (isUniqueViolation(error)) return { kind: "reused" };
      throw error;
    }
  }

  /**
   * reserved → settling, just before the settlement is sent, with the chain's head then (where recovery looks for
   * its event); false if it was no longer reserved. Durable before it answers: a settlement must never be on the
   * chain while the row that lets recovery find it is not on disk.
   */
  async markSettling(callId: string, settleBlock: bigint): Promise<boolean> {
    const moved = await this.db.transaction(
      (tx) =>
        tx.value<string>(
          "UPDATE x402_payments SET status = 'settling', settle_block = ? WHERE call_id = ? AND status = 'reserved' RETURNING call_id",
          [settleBlock, callId],
        ),
      { durable: true },
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
   * settlement was refused: nothing moved). `from` is the state it must be in: a payment whose settlement may have
   * been sent ('settling') is closed only by what decided it was not mined (a refusal, or recovery). False if it
   * was not in that state.
   */
  async close(
    callId: string,
    from: "reserved" | "settling",
    status: "released" | "failed",
    nowMs: number,
    txHash: string | null = null,
    tx?: Sql,
  ): Promise<boolean> {
    const moved = await (tx ?? this.db).value<string>(
      `UPDATE x402_payments SET status = ?, tx_hash = COALESCE(CAST(? AS TEXT), tx_hash), closed_at = ?
       WHERE call_id = ? AND status = ? RETURNING call_id`,
      [status, txHash, nowMs, callId, from],
    );
    return moved !== undefined;
  }

  async get(callId: string, sql: Sql = this.db): Promise<X402PaymentRow | undefined> {
    const row = await sql.one<Row>(`SELECT ${COLUMNS} FROM x402_payments WHERE call_id = ?`, [callId]);
    return row && toPayment(row);
  }

  /**
   * Payments still open (reserved or settling) that were taken before `beforeMs`, in (created_at, call_id) order,
   * a page at a time: `after` is the last row of the previous page.
   */
  async open(beforeMs: number, after?: { createdAtMs: number; callId: string }, limit = 100): Promise<X402PaymentRow[]> {
    const rows = await this.db.all<Row>(
      `SELECT ${COLUMNS} FROM x402_payments
       WHERE status IN ('reserved', 'settling') AND created_at < ?
         AND (created_at > ? OR (created_at = ? AND call_id > ?))
       ORDER BY created_at, call_id LIMIT ?`,
      [beforeMs, after?.createdAtMs ?? -1, after?.createdAtMs ?? -1, after?.callId ?? "", limit],
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
    settleBlock: row.settle_block === null ? null : BigInt(row.settle_block),
    replicaId: row.replica_id,
    createdAtMs: Number(row.created_at),
  };
}
