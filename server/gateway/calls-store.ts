import { type Database, type Sql, within } from "../db/sql";

/**
 * Which call endpoint was called: the spec's `call` (POST /v1/call) or `skill_call` (POST /v1/skills/:skillId/call),
 * or `x402` (POST /x402/skills/:skillId/call, paid per call with an x402 authorization: server/x402/).
 */
export type Endpoint = "call" | "skill_call" | "x402";

/** Why a call ended the way it did; stored with each call and shown in usage. */
export type CallOutcome =
  | "success"
  | "skill_rejected_input"
  | "skill_error"
  | "insufficient_balance"
  | "key_spend_limit_reached"
  | "invalid_input"
  | "rate_limited"
  | "daily_limit_reached"
  | "payment_settlement_failed"
  | "internal_error";

export interface CallRecord {
  id: string;
  accountId: string;
  apiKeyId: string;
  skillId: string;
  endpoint: Endpoint;
  httpStatus: number;
  outcome: CallOutcome;
  chargedMicros: bigint;
  holdId: string | null;
  latencyUs: number;
  createdAtMs: number;
}

export interface UsageRow {
  id: string;
  skillId: string;
  skillSlug: string | null;
  endpoint: Endpoint;
  httpStatus: number;
  outcome: CallOutcome;
  chargedMicros: bigint;
  latencyUs: number;
  createdAtMs: number;
  skillName: string | null;
  /** The settlement batch the charge is in; null until the settler takes it (and for calls not charged). */
  batchNumber: number | null;
  batchStatus: "pending" | "settled" | null;
}

/** One UTC day of an account's calls. */
export interface DailySpend {
  /** Days since 1970-01-01 (UTC). */
  day: number;
  spendMicros: bigint;
  calls: number;
}

const USAGE_SELECT = `SELECT c.id, c.skill_id, s.slug, s.name, c.endpoint, c.http_status, c.outcome, c.charged_micros, c.latency_us, c.created_at,
         h.batch_number, b.status AS batch_status, c.rowid AS row_id
  FROM calls c LEFT JOIN skills s ON s.id = c.skill_id
  LEFT JOIN holds h ON h.id = c.hold_id
  LEFT JOIN settlement_batches b ON b.number = h.batch_number`;

/**
 * The `calls` table: the log of calls made by each account, what usage shows and what the daily
 * cap counts. A call is recorded inside the same transaction as the capture or release it
 * reports. Usage reads join the skill's name and the charge's settlement batch.
 */
export class CallsStore {
  constructor(private readonly db: Database) {}

  /** Writes a call; pass the transaction of the capture or release it reports (without one, it runs in its own). */
  async record(c: CallRecord, tx?: Sql): Promise<void> {
    await within(this.db, tx, (tx) =>
      tx.run(
        `INSERT INTO calls (id, account_id, api_key_id, skill_id, endpoint, http_status, outcome, charged_micros, hold_id, latency_us, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          c.id,
          c.accountId,
          c.apiKeyId,
          c.skillId,
          c.endpoint,
          c.httpStatus,
          c.outcome,
          c.chargedMicros,
          c.holdId,
          Math.round(c.latencyUs),
          c.createdAtMs,
        ],
      ),
    );
  }

  /**
   * The account's calls, newest first; `beforeMs` pages back through older ones. The next page
   * starts strictly before the last row's millisecond, so a page never ends inside one: when
   * the `limit`th row shares its millisecond with older calls, those come on this page too
   * (it is longer than `limit`), instead of being skipped by the next.
   */
  async recent(accountId: string, limit: number, beforeMs = Number.MAX_SAFE_INTEGER): Promise<UsageRow[]> {
    type Row = {
      id: string;
      skill_id: string;
      slug: string | null;
      name: string | null;
      endpoint: Endpoint;
      http_status: bigint;
      outcome: CallOutcome;
      charged_micros: bigint;
      latency_us: bigint;
      created_at: bigint;
      batch_number: bigint | null;
      batch_status: "pending" | "settled" | null;
      row_id: bigint;
    };
    const rows = await this.db.all<Row>(
      `${USAGE_SELECT} WHERE c.account_id = ? AND c.created_at < ? ORDER BY c.created_at DESC, c.rowid DESC LIMIT ?`,
      [accountId, beforeMs, limit],
    );
    const last = rows.at(-1);
    if (last && rows.length === limit) {
      // The rest of the page's last millisecond.
      rows.push(
        ...(await this.db.all<Row>(`${USAGE_SELECT} WHERE c.account_id = ? AND c.created_at = ? AND c.rowid < ? ORDER BY c.rowid DESC`, [
          accountId,
          last.created_at,
          last.row_id,
        ])),
      );
    }
    return rows.map((r) => ({
      id: r.id,
      skillId: r.skill_id,
      skillSlug: r.slug,
      endpoint: r.endpoint,
      httpStatus: Number(r.http_status),
      outcome: r.outcome,
      chargedMicros: r.charged_micros,
      latencyUs: Number(r.latency_us),
      createdAtMs: Number(r.created_at),
      skillName: r.name,
      batchNumber: r.batch_number === null ? null : Number(r.batch_number),
      batchStatus: r.batch_status,
    }));
  }

  /**
   * The account's calls and spend per UTC day since `sinceMs`; days without calls are absent.
   * A day is ms / 86,400,000 in integer division, and counts calls charged or not; the 429s never
   * reached a skill, so they are not counted as calls.
   */
  async daily(accountId: string, sinceMs: number): Promise<DailySpend[]> {
    const rows = await this.db.all<{ day: bigint; spend: bigint; calls: bigint }>(
      `SELECT created_at / 86400000 AS day, SUM(charged_micros) AS spend, COUNT(*) AS calls
       FROM calls WHERE account_id = ? AND created_at >= ? AND outcome NOT IN ('rate_limited', 'daily_limit_reached')
       GROUP BY created_at / 86400000 ORDER BY day`,
      [accountId, sinceMs],
    );
    return rows.map((r) => ({ day: Number(r.day), spendMicros: r.spend, calls: Number(r.calls) }));
  }

  /** The account that made a call, if the call exists. */
  ownerOf(callId: string): Promise<string | undefined> {
    return this.db.value<string>("SELECT account_id FROM calls WHERE id = ?", [callId]);
  }

  /** Calls the account made since `sinceMs` that were admitted past the rate limits. */
  async countSince(accountId: string, sinceMs: number): Promise<number> {
    const count = await this.db.value<bigint>(
      `SELECT COUNT(*) FROM calls WHERE account_id = ? AND created_at >= ?
       AND outcome NOT IN ('rate_limited', 'daily_limit_reached')`,
      [accountId, sinceMs],
    );
    return Number(count);
  }
}
