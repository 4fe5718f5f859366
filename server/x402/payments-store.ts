import type { Address } from "viem";
import { type Database, isUniqueViolation, type Sql } from "../db/sql";
import type { PendingX402 } from "./escrow-settlement";

/** Where an x402 payment stands (server/x402/schema.ts says what each means). */
export type X402PaymentStatus =
  | "reserved"
  | "collecting"
  | "collected"
  | "completing"
  | "refunding"
  | "settled"
  | "refunded"
  | "released"
  | "failed"
  /** A payment of the one-step settlement before version 22 (settleX402), sent but not known: recovery resolves it. */
  | "settling";

/** The states a payment is open in (recovery looks at each). */
export const OPEN_STATUSES = ["reserved", "collecting", "collected", "completing", "refunding", "settling"] as const;
export type OpenStatus = (typeof OPEN_STATUSES)[number];
const OPEN_SQL = OPEN_STATUSES.map((status) => `'${status}'`).join(", ");

/**
 * The states whose money has not left the payer's wallet yet, or may not have: what its balance must still cover. The
 * index x402_payments_uncollected_by_payer (./schema.ts, version 30) names the same list in the same order.
 */
const UNCOLLECTED_SQL = "'reserved', 'collecting', 'settling'";

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
  /** The collection's transaction (version 18's settlement's, for a payment settled then). */
  txHash: string | null;
  /** The chain's head just before the collection was sent (collecting and later); null while reserved. */
  settleBlock: bigint | null;
  replicaId: string | null;
  createdAtMs: number;
  /** The pending payment in the escrow, once collected: what completeX402 and refundX402 are given. */
  pending: PendingX402 | null;
  /** The completion's or the refund's transaction. */
  closeTx: string | null;
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
  seller_address: string | null;
  reclaimable_at: bigint | null;
  close_tx: string | null;
}

const COLUMNS = `call_id, skill_id, seller_account_id, payer, nonce, valid_after, valid_before, amount, seller_amount,
                 fee_amount, status, tx_hash, settle_block, replica_id, created_at, seller_address, reclaimable_at, close_tx`;

/**
 * The x402 payments' table. A payment is reserved before its call is forwarded, and the (payer, nonce) pair is
 * unique, so one authorization pays for one call at most, on every replica sharing the database, before the chain
 * has seen it. Each state change is one conditional UPDATE: a payment moves on only from the state it was read in:
 *
 *   reserved ─▶ collecting ─▶ collected ─┬─▶ settled      (completeX402 mined; or completing, then recovery)
 *      │            │                    └─▶ refunded     (refundX402 mined; or refunding, then recovery)
 *      ▼            ▼
 *   released     failed / released       (nothing moved)
 */
export class X402PaymentsStore {
  constructor(readonly db: Database) {}

  /**
   * Records `payment` as reserved, unless its authorization (payer, nonce) was already presented (`reused`), or the
   * payer's payments not yet collected (reserved or collecting: a collected one already left its balance) and this one would come to more than `balanceMicros`, the payer's
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
            `SELECT COALESCE(SUM(amount), 0) FROM x402_payments WHERE payer = ? AND status IN (${UNCOLLECTED_SQL})`,
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
   * reserved → collecting, just before the collection is sent, with the chain's head then (where recovery looks for
   * its events); false if it was no longer reserved. Durable before it answers: a collection must never be on the
   * chain while the row that lets recovery find it is not on disk.
   */
  async markCollecting(callId: string, fromBlock: bigint): Promise<boolean> {
    const moved = await this.db.transaction(
      (tx) =>
        tx.value<string>(
          "UPDATE x402_payments SET status = 'collecting', settle_block = ? WHERE call_id = ? AND status = 'reserved' RETURNING call_id",
          [fromBlock, callId],
        ),
      { durable: true },
    );
    return moved !== undefined;
  }

  /** collecting → collected: the collection was mined in `txHash`, and the escrow holds `pending`. */
  async markCollected(callId: string, txHash: string, pending: PendingX402, sql: Sql = this.db): Promise<boolean> {
    const moved = await sql.value<string>(
      `UPDATE x402_payments SET status = 'collected', tx_hash = ?, seller_address = ?, reclaimable_at = ?
       WHERE call_id = ? AND status = 'collecting' RETURNING call_id`,
      [txHash.toLowerCase(), pending.seller.toLowerCase(), pending.reclaimableAt, callId],
    );
    return moved !== undefined;
  }

  /**
   * collected → completing or refunding: the completion or the refund was sent and its fate is not known, so the
   * payment's fate is decided (recovery sends it again, or finds it). False if it was not collected.
   */
  async markDecided(callId: string, status: "completing" | "refunding", tx: Sql): Promise<boolean> {
    const moved = await tx.value<string>(
      "UPDATE x402_payments SET status = ? WHERE call_id = ? AND status = 'collected' RETURNING call_id",
      [status, callId],
    );
    return moved !== undefined;
  }

  /**
   * → settled, with the ledger entry that records it: from collected or completing, `closeTx` the completion; or a
   * payment of version 18 (reserved or settling) found settled by recovery, `closeTx` null and `txHash` its settlement.
   */
  async markSettled(callId: string, txHash: string, closeTx: string | null, entryId: bigint, nowMs: number, tx: Sql): Promise<boolean> {
    const moved = await tx.value<string>(
      closeTx === null
        ? `UPDATE x402_payments SET status = 'settled', tx_hash = ?, entry_id = ?, closed_at = ?
           WHERE call_id = ? AND status IN ('reserved', 'settling') RETURNING call_id`
        : `UPDATE x402_payments SET status = 'settled', close_tx = ?, entry_id = ?, closed_at = ?
           WHERE call_id = ? AND tx_hash = ? AND status IN ('collected', 'completing') RETURNING call_id`,
      closeTx === null ? [txHash, entryId, nowMs, callId] : [closeTx.toLowerCase(), entryId, nowMs, callId, txHash.toLowerCase()],
    );
    return moved !== undefined;
  }

  /** collected or refunding → refunded: the value went back to the payer in `closeTx`. */
  async markRefunded(callId: string, closeTx: string, nowMs: number, tx: Sql = this.db): Promise<boolean> {
    const moved = await tx.value<string>(
      `UPDATE x402_payments SET status = 'refunded', close_tx = ?, closed_at = ?
       WHERE call_id = ? AND status IN ('collected', 'refunding') RETURNING call_id`,
      [closeTx.toLowerCase(), nowMs, callId],
    );
    return moved !== undefined;
  }

  /**
   * Closes a payment that moved no money: `released` (nothing was sent, or what was sent can never land) or `failed`
   * (the chain refused it). `from` is the state it must be in: a payment whose collection may have been sent
   * ('collecting', or version 18's 'settling') is closed only by what decided it was not mined (a refusal, or
   * recovery). False if it was not in that state.
   */
  async close(
    callId: string,
    from: "reserved" | "collecting" | "settling",
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
   * Payments still open (OPEN_STATUSES) that were taken before `beforeMs`, in (created_at, call_id) order,
   * a page at a time: `after` is the last row of the previous page.
   */
  async open(beforeMs: number, after?: { createdAtMs: number; callId: string }, limit = 100): Promise<X402PaymentRow[]> {
    const rows = await this.db.all<Row>(
      `SELECT ${COLUMNS} FROM x402_payments
       WHERE status IN (${OPEN_SQL}) AND created_at < ?
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
    pending:
      row.seller_address === null || row.reclaimable_at === null
        ? null
        : {
            payer: row.payer as Address,
            seller: row.seller_address as Address,
            value: BigInt(row.amount),
            platformFee: BigInt(row.fee_amount),
            reclaimableAt: BigInt(row.reclaimable_at),
          },
    closeTx: row.close_tx,
  };
}
