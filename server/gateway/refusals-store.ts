import type { Database, Sql } from "../db/sql";
import { type UsageFilter, whereOf } from "./calls-store";

/** The refusals of the caller's own limits, which are counted, not logged one by one. */
export type LimitRefusal = "rate_limited" | "daily_limit_reached";

/** How many calls of one key, for one skill, a limit refused in one UTC minute. */
export interface RefusalCount {
  accountId: string;
  apiKeyId: string;
  skillId: string;
  outcome: LimitRefusal;
  /** The minute's first millisecond since the epoch. */
  minuteMs: number;
  count: number;
}

/**
 * The `call_refusals` table: calls a key's own limits refused (its rate limits, its account's daily cap), counted per
 * key, skill, outcome and minute instead of a line each in the calls log, so a flood of refused calls costs rows in
 * proportion to minutes, not to calls (./refusal-counter.ts adds them up in memory and flushes them here).
 */
export class RefusalsStore {
  constructor(private readonly db: Database) {}

  /**
   * Adds `counts` to the stored ones, in one transaction. Rows are written in key order, so two replicas flushing
   * the same keys at once lock them in the same order and wait for each other instead of deadlocking.
   */
  async add(counts: readonly RefusalCount[], tx?: Sql): Promise<void> {
    if (counts.length === 0) return;
    const sorted = [...counts].sort((a, b) => compareKeys(keyOf(a), keyOf(b)));
    const write = async (sql: Sql) => {
      for (const c of sorted) {
        await sql.run(
          `INSERT INTO call_refusals (account_id, api_key_id, skill_id, outcome, minute, count) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (account_id, api_key_id, skill_id, outcome, minute) DO UPDATE SET count = call_refusals.count + excluded.count`,
          [c.accountId, c.apiKeyId, c.skillId, c.outcome, c.minuteMs, c.count],
        );
      }
    };
    await (tx ? write(tx) : this.db.transaction(write));
  }

  /** The refused calls narrowed by `filter`, per UTC day (days since 1970-01-01). */
  async daily(accountId: string, filter: UsageFilter): Promise<Map<number, number>> {
    const where = whereOf(accountId, filter, { alias: "r", time: "minute" });
    const rows = await this.db.all<{ day: bigint; refused: bigint }>(
      `SELECT r.minute / 86400000 AS day, SUM(r.count) AS refused FROM call_refusals r WHERE ${where.sql}
       GROUP BY r.minute / 86400000`,
      where.params,
    );
    return new Map(rows.map((r) => [Number(r.day), Number(r.refused)]));
  }

  /** How many calls narrowed by `filter` were refused, in all. */
  async total(accountId: string, filter: UsageFilter): Promise<number> {
    const where = whereOf(accountId, filter, { alias: "r", time: "minute" });
    return Number((await this.db.value<bigint | null>(`SELECT SUM(r.count) FROM call_refusals r WHERE ${where.sql}`, where.params)) ?? 0);
  }
}

/** A count's row key, in the order of the table's primary key. */
const keyOf = (c: RefusalCount): readonly (string | number)[] => [c.accountId, c.apiKeyId, c.skillId, c.outcome, c.minuteMs];

function compareKeys(a: readonly (string | number)[], b: readonly (string | number)[]): number {
  for (let i = 0; i < a.length; i++) {
    if (a[i] < b[i]) return -1;
    if (a[i] > b[i]) return 1;
  }
  return 0;
}
