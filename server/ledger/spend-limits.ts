import { type Database, type Sql, within } from "../db/sql";

/**
 * Spending limits of API keys (issue 15): a key may spend at most `limitMicros` per UTC day, per UTC month, or in
 * total. The ledger keeps them, not identity/, because a hold checks the limit in its own transaction: the count
 * and the balance move together or not at all, on one replica or several (./ledger.ts hold and release).
 *
 * One row per key that has ever had a limit (key_spend_limits): the limit (NULL once removed), its period, and the
 * count of the period now running: when it began (`period_start`), which of the key's periods it is (`period_seq`,
 * one more at every rollover and every change of period), and what holds not released have taken in it
 * (`spent_micros`). A hold that counts names the key and the period_seq it was counted in; a release gives its
 * amount back only to that same period, and a capture keeps it. The ledger's invariants check that each key's count
 * is the sum of its counted holds not released (./invariants.ts).
 *
 * Spending counts while a limit is set: a key's first limit starts its count at zero, a change of amount keeps the
 * count, a change of period starts the new period's count at zero, and a removed limit stops counting (a limit set
 * again on the same period goes on from the count it had).
 *
 * The key id is opaque here (identity/ owns the keys); the table has no foreign key to api_keys for that reason.
 */

/** The periods a limit counts over, in UTC: a day rolls over at 00:00, a month at 00:00 on the 1st; `total` never. */
export type SpendPeriod = "day" | "month" | "total";
export const SPEND_PERIODS: readonly SpendPeriod[] = ["day", "month", "total"];

export interface SpendLimit {
  /** Positive, in base units. */
  limitMicros: bigint;
  period: SpendPeriod;
}

/** A key's limit as it stands at a moment. */
export interface SpendLimitStatus extends SpendLimit {
  /** Taken by the key's calls in the current period: captured, or held by calls in flight. */
  spentMicros: bigint;
  /** When the current period began (ms since the epoch); 0 for `total`. */
  periodStartMs: number;
  /** When the current period ends and the count starts again from zero; null for `total`. */
  resetsAtMs: number | null;
}

/** What counting a hold against its key's limit came to. */
export type SpendTakeResult =
  | {
      ok: true;
      /** The key's period the amount was counted in; null when the key has no limit (nothing counted). */
      periodSeq: bigint | null;
    }
  | ({ ok: false } & SpendLimitStatus);

const DAY_MS = 86_400_000;

/** The start (ms since the epoch) of the `period` that contains `nowMs`, in UTC; 0 for `total`. */
export function periodStartMs(period: SpendPeriod, nowMs: number): number {
  if (!Number.isFinite(nowMs)) throw new RangeError(`not a time: ${nowMs}`);
  switch (period) {
    case "day":
      return Math.floor(nowMs / DAY_MS) * DAY_MS;
    case "month": {
      const now = new Date(nowMs);
      return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
    }
    case "total":
      return 0;
  }
}

/** When the `period` that began at `startMs` ends (the next one's start), in UTC; null for `total`, which never ends. */
export function periodEndMs(period: SpendPeriod, startMs: number): number | null {
  switch (period) {
    case "day":
      return startMs + DAY_MS;
    case "month": {
      const start = new Date(startMs);
      // Date.UTC carries month 12 into January of the next year.
      return Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1);
    }
    case "total":
      return null;
  }
}

/** A row of `key_spend_limits`, as read by COLUMNS. */
export interface LimitRow {
  key_id: string;
  limit_micros: bigint | null;
  period: SpendPeriod;
  period_start: bigint;
  period_seq: bigint;
  spent_micros: bigint;
}

/** The columns of `key_spend_limits` a LimitRow holds. */
export const COLUMNS = "key_id, limit_micros, period, period_start, period_seq, spent_micros";

/**
 * The period a row's count belongs to at `nowMs`: the row's own when it is still running (or ahead: another
 * replica's clock ran ahead and rolled it over first, and its count is the one to keep), else the next one, empty.
 */
function currentPeriod(row: LimitRow, nowMs: number): { startMs: number; seq: bigint; spentMicros: bigint } {
  const startMs = periodStartMs(row.period, nowMs);
  if (Number(row.period_start) >= startMs) return { startMs: Number(row.period_start), seq: row.period_seq, spentMicros: row.spent_micros };
  return { startMs, seq: row.period_seq + 1n, spentMicros: 0n };
}

/** A row's limit as it stands at `nowMs` (its period rolled over when a new one has begun). */
export function statusOf(row: LimitRow & { limit_micros: bigint }, nowMs: number): SpendLimitStatus {
  const { startMs, spentMicros } = currentPeriod(row, nowMs);
  return {
    limitMicros: row.limit_micros,
    period: row.period,
    spentMicros,
    periodStartMs: startMs,
    resetsAtMs: periodEndMs(row.period, startMs),
  };
}

/**
 * The `key_spend_limits` table. `set` and `statuses` serve the keys API (identity/api-keys.ts); `take` and `giveBack`
 * run inside the ledger's hold and release (./ledger.ts), in their transactions.
 */
export class SpendLimits {
  constructor(private readonly db: Database) {}

  /**
   * Sets, changes or (with null) removes a key's limit, as of `nowMs`. A new limit, or a new period, starts the
   * count at zero; a new amount on the same period keeps it, so a limit lowered below what was spent refuses the
   * next calls until the period ends, and a raised one lets them through at once.
   */
  set(keyId: string, limit: SpendLimit | null, nowMs: number, tx?: Sql): Promise<void> {
    if (limit !== null && limit.limitMicros <= 0n) throw new RangeError(`a spending limit must be positive, got ${limit.limitMicros}`);
    return within(this.db, tx, async (tx) => {
      if (limit === null) {
        await tx.run("UPDATE key_spend_limits SET limit_micros = NULL WHERE key_id = ?", [keyId]);
        return;
      }
      // Every SET expression reads the row as it was, so the CASEs compare the old period with the new one.
      await tx.run(
        `INSERT INTO key_spend_limits (${COLUMNS}) VALUES (?, ?, ?, ?, 0, 0)
         ON CONFLICT (key_id) DO UPDATE SET
           limit_micros = excluded.limit_micros,
           period_seq = CASE WHEN key_spend_limits.period = excluded.period THEN key_spend_limits.period_seq ELSE key_spend_limits.period_seq + 1 END,
           spent_micros = CASE WHEN key_spend_limits.period = excluded.period THEN key_spend_limits.spent_micros ELSE 0 END,
           period_start = CASE WHEN key_spend_limits.period = excluded.period THEN key_spend_limits.period_start ELSE excluded.period_start END,
           period = excluded.period`,
        [keyId, limit.limitMicros, limit.period, periodStartMs(limit.period, nowMs)],
      );
    });
  }

  /** The limits of those of `keyIds` that have one, as they stand at `nowMs`. */
  async statuses(keyIds: readonly string[], nowMs: number, sql: Sql = this.db): Promise<Map<string, SpendLimitStatus>> {
    const out = new Map<string, SpendLimitStatus>();
    if (keyIds.length === 0) return out;
    const rows = await sql.all<LimitRow>(
      `SELECT ${COLUMNS} FROM key_spend_limits WHERE key_id IN (${keyIds.map(() => "?").join(", ")}) AND limit_micros IS NOT NULL`,
      keyIds,
    );
    for (const row of rows) out.set(row.key_id, statusOf(row as LimitRow & { limit_micros: bigint }, nowMs));
    return out;
  }

  /**
   * Counts `amountMicros` against the key's limit in the period running at `nowMs` (rolling the count over when
   * that period is a new one), or says the limit does not allow it; a key without a limit counts nothing. Runs in
   * the hold's transaction, after the hold has locked the account's available balance: the key's row is read
   * under its own lock (PostgreSQL) and written by one conditional UPDATE that repeats what was read as its
   * condition, so two replicas holding for one key queue on the row and neither can count past the limit.
   */
  async take(tx: Sql, keyId: string, amountMicros: bigint, nowMs: number): Promise<SpendTakeResult> {
    const row = await tx.one<LimitRow>(`SELECT ${COLUMNS} FROM key_spend_limits WHERE key_id = ?${tx.dialect.forUpdate}`, [keyId]);
    if (!row || row.limit_micros === null) return { ok: true, periodSeq: null };
    const limitMicros = row.limit_micros;
    const period = currentPeriod(row, nowMs);
    const spentMicros = period.spentMicros + amountMicros;
    if (spentMicros > limitMicros) return { ok: false, ...statusOf({ ...row, limit_micros: limitMicros }, nowMs) };
    const changed = await tx.run(
      `UPDATE key_spend_limits SET spent_micros = ?, period_start = ?, period_seq = ?
       WHERE key_id = ? AND period_seq = ? AND spent_micros = ? AND limit_micros IS NOT NULL AND limit_micros >= ?`,
      [spentMicros, period.startMs, period.seq, keyId, row.period_seq, row.spent_micros, spentMicros],
    );
    // Only a lost row lock (a bug) lets the row change between the read and the write; the hold then rolls back.
    if (changed !== 1) throw new Error(`the spending limit of key ${keyId} changed while a hold counted against it`);
    return { ok: true, periodSeq: period.seq };
  }

  /**
   * Gives back what a released hold counted, to the period it was counted in; nothing when that period is over
   * (the key's count has rolled over or restarted since), since the amount belonged to it.
   */
  async giveBack(tx: Sql, keyId: string, periodSeq: bigint, amountMicros: bigint): Promise<void> {
    await tx.run("UPDATE key_spend_limits SET spent_micros = spent_micros - ? WHERE key_id = ? AND period_seq = ?", [
      amountMicros,
      keyId,
      periodSeq,
    ]);
  }
}
