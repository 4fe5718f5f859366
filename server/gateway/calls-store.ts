import { type Database, type Sql, type SqlParam, within } from "../db/sql";

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
  /** The backend answered 2xx with a body its skill's output schema refuses: not charged, the seller's failure. */
  | "skill_bad_output"
  /** A usage-priced skill's backend answered 2xx without a valid signed charge (X-Skill-Charge): not charged. */
  | "skill_bad_charge"
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
  apiKeyId: string;
  /** The key's name and prefix; null for a call made without a key of the account (x402). */
  apiKeyName: string | null;
  apiKeyPrefix: string | null;
  /** The key's metadata as it stands now (identity's api_keys.metadata, JSON text); null without one, or without a key. */
  apiKeyMetadata: string | null;
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

/** A call whose answer broke its skill's output schema, as the skill's seller sees it (no buyer, no data). */
export interface OutputFailure {
  callId: string;
  endpoint: Endpoint;
  /** The first problem found: the place in the seller's schema and the keyword that failed. */
  problem: string;
  createdAtMs: number;
}

/** What some of an account's calls spent, and how many they were. */
export interface SpendTotal {
  spendMicros: bigint;
  calls: number;
}

/** One UTC day of an account's calls. */
export interface DailySpend extends SpendTotal {
  /** Days since 1970-01-01 (UTC). */
  day: number;
}

/** One API key's calls and spend: today, this month (both UTC) and since it was made. */
export interface KeySpend {
  apiKeyId: string;
  today: SpendTotal;
  month: SpendTotal;
  total: SpendTotal;
}

/** Which of an account's calls a usage read covers; each field given narrows it. */
export interface UsageFilter {
  /** Only the calls made with this API key. */
  apiKeyId?: string;
  /** Only the calls of this skill, named by its UUID or its slug. */
  skill?: string;
  /** Only the calls made at or after this time (epoch ms). */
  fromMs?: number;
  /** Only the calls made before this time (epoch ms). */
  untilMs?: number;
}

/**
 * A page of usage's columns. The sums (daily, total, byKey) read usage_by_day instead, which counts every call but the
 * outcomes refused by a key's own limits before they reached a skill (its trigger: schema version 31); a page lists
 * those too.
 */
const USAGE_SELECT = `SELECT c.id, c.api_key_id, k.name AS key_name, k.prefix AS key_prefix, k.metadata AS key_metadata, c.skill_id, s.slug, s.name, c.endpoint,
         c.http_status, c.outcome, c.charged_micros, c.latency_us, c.created_at, h.batch_number, b.status AS batch_status, c.rowid AS row_id
  FROM calls c LEFT JOIN skills s ON s.id = c.skill_id
  LEFT JOIN api_keys k ON k.id = c.api_key_id
  LEFT JOIN holds h ON h.id = c.hold_id
  LEFT JOIN settlement_batches b ON b.number = h.batch_number`;

/**
 * A page of usage (`CallsStore.recent`): the account's calls narrowed by `filter`, before `beforeMs`, newest first. A
 * key named is found through calls_by_key (schema version 32), its calls only (test/gateway/gateway-stores.test.ts
 * reads the plan).
 */
export function usagePage(
  accountId: string,
  filter: UsageFilter,
  beforeMs: number,
  limit: number,
): { sql: string; params: SqlParam[]; where: { sql: string; params: SqlParam[] } } {
  const where = whereOf(accountId, filter);
  return {
    sql: `${USAGE_SELECT} WHERE ${where.sql} AND c.created_at < ? ORDER BY c.created_at DESC, c.rowid DESC LIMIT ?`,
    params: [...where.params, beforeMs, limit],
    where,
  };
}

/**
 * The WHERE clause of a usage read (calls aliased `c`): the account's calls, narrowed by `filter`.
 * A skill is matched by its UUID or by the slug of the skill row with that UUID, so a skill no
 * longer listed is still found by its slug.
 */
export function whereOf(
  accountId: string,
  filter: UsageFilter,
  /** The table's alias, and its column of when a row happened (ms since the epoch). */
  table = { alias: "c", time: "created_at" },
): { sql: string; params: SqlParam[] } {
  const t = table.alias;
  const clauses = [`${t}.account_id = ?`];
  const params: SqlParam[] = [accountId];
  if (filter.apiKeyId !== undefined) {
    clauses.push(`${t}.api_key_id = ?`);
    params.push(filter.apiKeyId);
  }
  if (filter.skill !== undefined) {
    clauses.push(`(${t}.skill_id = ? OR ${t}.skill_id IN (SELECT id FROM skills WHERE slug = ?))`);
    params.push(filter.skill, filter.skill);
  }
  if (filter.fromMs !== undefined) {
    clauses.push(`${t}.${table.time} >= ?`);
    params.push(filter.fromMs);
  }
  if (filter.untilMs !== undefined) {
    clauses.push(`${t}.${table.time} < ?`);
    params.push(filter.untilMs);
  }
  return { sql: clauses.join(" AND "), params };
}

const DAY_MS = 86_400_000;

/** A UTC day's number from its first millisecond; a time inside a day is refused (the days are read whole). */
function dayOf(ms: number): number {
  if (ms % DAY_MS !== 0) throw new RangeError(`usage is read by whole UTC days: ${ms} is not the start of one`);
  return ms / DAY_MS;
}

/** The WHERE clause of a read of usage_by_day (aliased `u`): whereOf's, its times whole days. */
function usageWhere(accountId: string, filter: UsageFilter): { sql: string; params: SqlParam[] } {
  const days = {
    ...filter,
    fromMs: filter.fromMs === undefined ? undefined : dayOf(filter.fromMs),
    untilMs: filter.untilMs === undefined ? undefined : dayOf(filter.untilMs),
  };
  return whereOf(accountId, days, { alias: "u", time: "day" });
}

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
   * Notes that call `callId` (already recorded, or recorded in `tx`) broke its skill's output schema, with the first
   * problem found: what the skill's seller is shown (`outputFailures`). Pass the transaction that records the call.
   */
  async recordOutputFailure(
    f: { callId: string; skillId: string; endpoint: Endpoint; problem: string; createdAtMs: number },
    tx?: Sql,
  ): Promise<void> {
    await within(this.db, tx, (tx) =>
      tx.run("INSERT INTO call_output_failures (call_id, skill_id, endpoint, problem, created_at) VALUES (?, ?, ?, ?, ?)", [
        f.callId,
        f.skillId,
        f.endpoint,
        f.problem,
        f.createdAtMs,
      ]),
    );
  }

  /** The skill's calls whose answers broke its output schema, newest first, at most `limit`; `beforeMs` pages back. */
  async outputFailures(skillId: string, limit: number, beforeMs = Number.MAX_SAFE_INTEGER): Promise<OutputFailure[]> {
    const rows = await this.db.all<{ call_id: string; endpoint: Endpoint; problem: string; created_at: bigint }>(
      `SELECT call_id, endpoint, problem, created_at FROM call_output_failures
       WHERE skill_id = ? AND created_at < ? ORDER BY created_at DESC, call_id DESC LIMIT ?`,
      [skillId, beforeMs, limit],
    );
    return rows.map((r) => ({ callId: r.call_id, endpoint: r.endpoint, problem: r.problem, createdAtMs: Number(r.created_at) }));
  }

  /**
   * The account's calls, newest first; `beforeMs` pages back through older ones. The next page
   * starts strictly before the last row's millisecond, so a page never ends inside one: when
   * the `limit`th row shares its millisecond with older calls, those come on this page too
   * (it is longer than `limit`), instead of being skipped by the next. `filter` narrows the calls.
   */
  async recent(accountId: string, limit: number, beforeMs = Number.MAX_SAFE_INTEGER, filter: UsageFilter = {}): Promise<UsageRow[]> {
    type Row = {
      id: string;
      api_key_id: string;
      key_name: string | null;
      key_prefix: string | null;
      key_metadata: string | null;
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
    const page = usagePage(accountId, filter, beforeMs, limit);
    const { where } = page;
    const rows = await this.db.all<Row>(page.sql, page.params);
    const last = rows.at(-1);
    if (last && rows.length === limit) {
      // The rest of the page's last millisecond.
      rows.push(
        ...(await this.db.all<Row>(`${USAGE_SELECT} WHERE ${where.sql} AND c.created_at = ? AND c.rowid < ? ORDER BY c.rowid DESC`, [
          ...where.params,
          last.created_at,
          last.row_id,
        ])),
      );
    }
    return rows.map((r) => ({
      id: r.id,
      apiKeyId: r.api_key_id,
      apiKeyName: r.key_name,
      apiKeyPrefix: r.key_prefix,
      apiKeyMetadata: r.key_metadata,
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
   * The account's calls and spend per UTC day, narrowed by `filter` (its times whole UTC days); days without calls
   * are absent. A day is ms / 86,400,000 in integer division, and counts calls charged or not; the 429s never
   * reached a skill, so they are not counted as calls. Read from the days the database keeps (usage_by_day: schema
   * version 31), not from the calls: the cost is the days and keys read, not the calls they hold.
   */
  async daily(accountId: string, filter: UsageFilter): Promise<DailySpend[]> {
    const where = usageWhere(accountId, filter);
    const rows = await this.db.all<{ day: bigint; spend: bigint; calls: bigint }>(
      `SELECT u.day, SUM(u.spend_micros) AS spend, SUM(u.calls) AS calls
       FROM usage_by_day u WHERE ${where.sql}
       GROUP BY u.day ORDER BY u.day`,
      where.params,
    );
    return rows.map((r) => ({ day: Number(r.day), spendMicros: r.spend, calls: Number(r.calls) }));
  }

  /** What the account's calls narrowed by `filter` (its times whole UTC days) spent, and how many they were (counted as `daily` counts). */
  async total(accountId: string, filter: UsageFilter): Promise<SpendTotal> {
    const where = usageWhere(accountId, filter);
    const row = await this.db.one<{ spend: bigint | null; calls: bigint | null }>(
      `SELECT SUM(u.spend_micros) AS spend, SUM(u.calls) AS calls FROM usage_by_day u WHERE ${where.sql}`,
      where.params,
    );
    return { spendMicros: row?.spend ?? 0n, calls: Number(row?.calls ?? 0n) };
  }

  /**
   * Each of the account's own API keys that made calls (revoked ones too), with its calls and spend since
   * `todayStartMs`, since `monthStartMs` (both the start of a UTC day) and in all, counted as `daily` counts. One pass
   * over the account's days.
   */
  async byKey(accountId: string, todayStartMs: number, monthStartMs: number): Promise<KeySpend[]> {
    const [today, month] = [dayOf(todayStartMs), dayOf(monthStartMs)];
    const rows = await this.db.all<{
      api_key_id: string;
      today_spend: bigint;
      today_calls: bigint;
      month_spend: bigint;
      month_calls: bigint;
      total_spend: bigint;
      total_calls: bigint;
    }>(
      `SELECT u.api_key_id,
         SUM(CASE WHEN u.day >= ? THEN u.spend_micros ELSE 0 END) AS today_spend,
         SUM(CASE WHEN u.day >= ? THEN u.calls ELSE 0 END) AS today_calls,
         SUM(CASE WHEN u.day >= ? THEN u.spend_micros ELSE 0 END) AS month_spend,
         SUM(CASE WHEN u.day >= ? THEN u.calls ELSE 0 END) AS month_calls,
         SUM(u.spend_micros) AS total_spend, SUM(u.calls) AS total_calls
       FROM usage_by_day u
       WHERE u.account_id = ? AND u.api_key_id IN (SELECT id FROM api_keys WHERE account_id = ?)
       GROUP BY u.api_key_id ORDER BY u.api_key_id`,
      [today, today, month, month, accountId, accountId],
    );
    return rows.map((r) => ({
      apiKeyId: r.api_key_id,
      today: { spendMicros: r.today_spend, calls: Number(r.today_calls) },
      month: { spendMicros: r.month_spend, calls: Number(r.month_calls) },
      total: { spendMicros: r.total_spend, calls: Number(r.total_calls) },
    }));
  }

  /** The account that made a call and the key it was made with (x402 for an x402 call), if the call exists. */
  async ownerOf(callId: string): Promise<{ accountId: string; apiKeyId: string } | undefined> {
    const row = await this.db.one<{ account_id: string; api_key_id: string }>("SELECT account_id, api_key_id FROM calls WHERE id = ?", [
      callId,
    ]);
    return row && { accountId: row.account_id, apiKeyId: row.api_key_id };
  }

  /** Calls the account made since `sinceMs` (the start of a UTC day) that were admitted past the rate limits. */
  async countSince(accountId: string, sinceMs: number): Promise<number> {
    return (await this.total(accountId, { fromMs: sinceMs })).calls;
  }
}
