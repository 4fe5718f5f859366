import type { Database } from "../db/sql";
import type { QualityCount, QualityResult } from "./quality";

/** A count read back: one skill's calls of one result in one latency bucket, in one hour or over a span. */
type Row = { skill_id: string; hour: bigint; result: string; latency_bucket: bigint; calls: bigint; charged_micros: bigint };

const toCount = (r: Row): QualityCount => ({
  skillId: r.skill_id,
  hourMs: Number(r.hour),
  result: r.result as QualityResult,
  bucket: Number(r.latency_bucket),
  calls: Number(r.calls),
  chargedMicros: r.charged_micros,
});

/**
 * The `skill_quality` table: the roll-up of every skill's calls, counted per UTC hour, result (`success` or the error
 * code) and latency bucket (./quality.ts), with what they captured. Counts are only ever added to (ON CONFLICT ...
 * DO UPDATE SET calls = calls + excluded.calls), so replicas flushing at once add up instead of overwriting; and the
 * figures are read from these rows, never from the calls log.
 */
export class QualityStore {
  constructor(private readonly db: Database) {}

  /**
   * Adds `counts` to the stored ones, in one transaction, in key order: two replicas flushing the same rows lock them
   * in the same order and wait for each other instead of deadlocking.
   */
  async add(counts: readonly QualityCount[]): Promise<void> {
    if (counts.length === 0) return;
    const sorted = [...counts].sort(compareCounts);
    await this.db.transaction(async (tx) => {
      for (const c of sorted) {
        await tx.run(
          `INSERT INTO skill_quality (skill_id, hour, result, latency_bucket, calls, charged_micros) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (skill_id, hour, result, latency_bucket) DO UPDATE
           SET calls = skill_quality.calls + excluded.calls, charged_micros = skill_quality.charged_micros + excluded.charged_micros`,
          [c.skillId, c.hourMs, c.result, c.bucket, c.calls, c.chargedMicros],
        );
      }
    });
  }

  /** Every skill's counts since `sinceMs` (an hour's first millisecond), summed over the hours. */
  async sinceBySkill(sinceMs: number): Promise<QualityCount[]> {
    const rows = await this.db.all<Row>(
      `SELECT skill_id, 0 AS hour, result, latency_bucket, SUM(calls) AS calls, SUM(charged_micros) AS charged_micros
       FROM skill_quality WHERE hour >= ? GROUP BY skill_id, result, latency_bucket`,
      [sinceMs],
    );
    return rows.map(toCount);
  }

  /** One skill's counts since `sinceMs`, hour by hour. */
  async ofSkill(skillId: string, sinceMs: number): Promise<QualityCount[]> {
    const rows = await this.db.all<Row>(
      `SELECT skill_id, hour, result, latency_bucket, calls, charged_micros FROM skill_quality
       WHERE skill_id = ? AND hour >= ? ORDER BY hour`,
      [skillId, sinceMs],
    );
    return rows.map(toCount);
  }

  /** Deletes the counts of the hours before `beforeMs`; resolves with how many rows went. */
  prune(beforeMs: number): Promise<number> {
    return this.db.run("DELETE FROM skill_quality WHERE hour < ?", [beforeMs]);
  }
}

function compareCounts(a: QualityCount, b: QualityCount): number {
  if (a.skillId !== b.skillId) return a.skillId < b.skillId ? -1 : 1;
  if (a.hourMs !== b.hourMs) return a.hourMs - b.hourMs;
  if (a.result !== b.result) return a.result < b.result ? -1 : 1;
  return a.bucket - b.bucket;
}
