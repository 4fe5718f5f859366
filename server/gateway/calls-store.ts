import type { Db } from "../db/db";

/** Which of the spec's two call endpoints was called: `call` (POST /v1/call) or `skill_call` (POST /v1/skills/:skillId/call). */
export type Endpoint = "call" | "skill_call";

/** Why a call ended the way it did; stored with each call and shown in usage. */
export type CallOutcome =
  | "success"
  | "skill_rejected_input"
  | "skill_error"
  | "insufficient_balance"
  | "invalid_input"
  | "rate_limited"
  | "daily_limit_reached"
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
 * cap counts. A call is recorded inside the same ledger operation as the capture or release it
 * reports. Usage reads join the skill's name and the charge's settlement batch.
 */
export interface CallsStore {
  /** Writes a call; run it inside the same ledger operation as the capture or release it reports. */
  record(c: CallRecord): void;
  /** The account's calls, newest first, before `beforeMs`; a page never ends inside a millisecond. */
  recent(accountId: string, limit: number, beforeMs?: number): UsageRow[];
  /** The account's calls and spend per UTC day since `sinceMs`. */
  daily(accountId: string, sinceMs: number): DailySpend[];
  /** The account that made a call, if the call exists. */
  ownerOf(callId: string): string | undefined;
  /** Calls the account made since `sinceMs` that were admitted past the rate limits. */
  countSince(accountId: string, sinceMs: number): number;
}

/** CallsStore on the gateway's SQLite database. */
export class SqliteCallsStore implements CallsStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      insert: db.prepare(
        `INSERT INTO calls (id, account_id, api_key_id, skill_id, endpoint, http_status, outcome, charged_micros, hold_id, latency_us, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      recent: db.prepare(`${USAGE_SELECT} WHERE c.account_id = ? AND c.created_at < ? ORDER BY c.created_at DESC, c.rowid DESC LIMIT ?`),
      // The rest of a page's last millisecond (see recent()).
      restOfMs: db.prepare(`${USAGE_SELECT} WHERE c.account_id = ? AND c.created_at = ? AND c.rowid < ? ORDER BY c.rowid DESC`),
      // Calls per UTC day (ms / 86,400,000, integer division), charged or not; the 429s never
      // reached a skill, so they are not counted as calls.
      daily: db.prepare(
        `SELECT created_at / 86400000 AS day, SUM(charged_micros) AS spend, COUNT(*) AS calls
         FROM calls WHERE account_id = ? AND created_at >= ? AND outcome NOT IN ('rate_limited', 'daily_limit_reached')
         GROUP BY day ORDER BY day`,
      ),
      ownerOf: db.prepare("SELECT account_id FROM calls WHERE id = ?").pluck(),
      countSince: db
        .prepare(
          `SELECT COUNT(*) FROM calls WHERE account_id = ? AND created_at >= ?
           AND outcome NOT IN ('rate_limited', 'daily_limit_reached')`,
        )
        .pluck(),
    };
  }

  /** Writes a call; run it inside the same ledger operation as the capture or release it reports. */
  record(c: CallRecord): void {
    this.stmt.insert.run(
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
    );
  }

  /**
   * The account's calls, newest first; `beforeMs` pages back through older ones. The next page
   * starts strictly before the last row's millisecond, so a page never ends inside one: when
   * the `limit`th row shares its millisecond with older calls, those come on this page too
   * (it is longer than `limit`), instead of being skipped by the next.
   */
  recent(accountId: string, limit: number, beforeMs = Number.MAX_SAFE_INTEGER): UsageRow[] {
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
    const rows = this.stmt.recent.all(accountId, beforeMs, limit) as Row[];
    const last = rows.at(-1);
    if (last && rows.length === limit) rows.push(...(this.stmt.restOfMs.all(accountId, last.created_at, last.row_id) as Row[]));
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

  /** The account's calls and spend per UTC day since `sinceMs`; days without calls are absent. */
  daily(accountId: string, sinceMs: number): DailySpend[] {
    return (this.stmt.daily.all(accountId, sinceMs) as Array<{ day: bigint; spend: bigint; calls: bigint }>).map((r) => ({
      day: Number(r.day),
      spendMicros: r.spend,
      calls: Number(r.calls),
    }));
  }

  /** The account that made a call, if the call exists. */
  ownerOf(callId: string): string | undefined {
    return this.stmt.ownerOf.get(callId) as string | undefined;
  }

  /** Calls the account made since `sinceMs` that were admitted past the rate limits. */
  countSince(accountId: string, sinceMs: number): number {
    return Number(this.stmt.countSince.get(accountId, sinceMs) as bigint);
  }
}
