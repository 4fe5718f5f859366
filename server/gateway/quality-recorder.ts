import { isDatabaseUnavailable } from "../db/sql";
import {
  HOUR_MS,
  QUALITY_WINDOW_HOURS,
  type QualityCount,
  type QualityResult,
  type QualitySummary,
  type QualityTotals,
  addCount,
  emptyTotals,
  hourOf,
  latencyBucket,
  summaryOf,
} from "./quality";
import type { QualityStore } from "./quality-store";

const DAY_MS = 24 * HOUR_MS;

/** How long the public figures of every skill are reused before they are read again from the roll-up. */
export const QUALITY_REFRESH_MS = 60_000;

/** How long the roll-up keeps an hour's counts: the seller's stats reach back at most QUALITY_STATS_MAX_DAYS. */
export const QUALITY_RETENTION_DAYS = 35;

/** The most days GET /v1/seller/skills/:id/stats covers. */
export const QUALITY_STATS_MAX_DAYS = 30;

/** One UTC day of a skill's calls, as its seller sees them. */
export interface QualityDay {
  /** The day's first millisecond (UTC). */
  dayMs: number;
  totals: QualityTotals;
}

/** A skill's figures over its seller's chosen days: the totals, and each day's (days without calls included). */
export interface SkillStats {
  fromMs: number;
  days: QualityDay[];
  totals: QualityTotals;
}

/**
 * The roll-up's writer and reader. Each call the pipeline has committed is counted here in memory (an addition in a
 * map: nothing on the call's path touches the database) and the counts are added to the store every `flushMs`, when
 * `maxKeys` distinct counts wait, before any read of the figures, and at close. Replicas each flush their own counts;
 * the store adds them up. A crash loses at most the last `flushMs` of counts: a statistic, not money.
 *
 * The public figures of every skill are read from the roll-up at most every `refreshMs` (one grouped read of the
 * last 7 days' rows, never the calls log) and shared by every request meanwhile.
 */
export class QualityRecorder {
  private waiting = new Map<string, QualityCount>();
  private flushing: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  private cached: { atMs: number; figures: Promise<Map<string, QualitySummary | null>> } | undefined;
  private prunedAtMs = 0;
  private lastRead: Map<string, QualitySummary | null> | undefined;

  constructor(
    private readonly store: QualityStore,
    private readonly options: {
      flushMs?: number;
      maxKeys?: number;
      refreshMs?: number;
      now?: () => number;
      log?: (message: string, error?: unknown) => void;
    } = {},
  ) {
    this.timer = setInterval(() => void this.flush(), options.flushMs ?? 5_000);
    this.timer.unref();
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  /** Counts one call whose line is committed: its result, how long it took, what it captured. */
  count(call: { skillId: string; result: QualityResult; latencyMs: number; chargedMicros: bigint }, atMs = this.now()): void {
    const hourMs = hourOf(atMs);
    const bucket = latencyBucket(call.latencyMs * 1000);
    const key = `${call.skillId}\u0000${hourMs}\u0000${call.result}\u0000${bucket}`;
    const counted = this.waiting.get(key);
    if (counted) {
      counted.calls++;
      counted.chargedMicros += call.chargedMicros;
    } else {
      this.waiting.set(key, { skillId: call.skillId, hourMs, result: call.result, bucket, calls: 1, chargedMicros: call.chargedMicros });
    }
    if (this.waiting.size >= (this.options.maxKeys ?? 10_000)) void this.flush();
  }

  /**
   * Adds what is waiting to the store; one flush at a time, each after the one before it. Counts the database did not
   * take (it did not answer, and did not commit them) wait for the next flush; others are dropped, said in the log.
   */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.waiting.size === 0) return;
      const counts = [...this.waiting.values()];
      this.waiting = new Map();
      try {
        await this.store.add(counts);
      } catch (error) {
        if (isDatabaseUnavailable(error) && !error.mayHaveCommitted) {
          for (const c of counts) this.merge(c);
          return;
        }
        this.options.log?.(`could not add ${counts.length} counts to the skills' quality roll-up; they are dropped`, error);
        return;
      }
      await this.pruneHourly();
    });
    return this.flushing;
  }

  /** Puts a count that was not written back among the waiting ones. */
  private merge(c: QualityCount): void {
    const key = `${c.skillId}\u0000${c.hourMs}\u0000${c.result}\u0000${c.bucket}`;
    const counted = this.waiting.get(key);
    if (counted) {
      counted.calls += c.calls;
      counted.chargedMicros += c.chargedMicros;
    } else this.waiting.set(key, c);
  }

  /** At most once an hour per replica: the hours past QUALITY_RETENTION_DAYS go. */
  private async pruneHourly(): Promise<void> {
    const now = this.now();
    if (now - this.prunedAtMs < HOUR_MS) return;
    this.prunedAtMs = now;
    try {
      await this.store.prune(hourOf(now) - QUALITY_RETENTION_DAYS * DAY_MS);
    } catch (error) {
      this.options.log?.("could not prune the skills' quality roll-up", error);
    }
  }

  /**
   * Every skill's public figures over the last 7 days (QUALITY_WINDOW_HOURS), by skill id: null for a skill with
   * too few calls to say (QUALITY_MIN_CALLS), absent for one without any. Read again at most every `refreshMs`.
   */
  summaries(): Promise<Map<string, QualitySummary | null>> {
    const now = this.now();
    if (this.cached && now - this.cached.atMs < (this.options.refreshMs ?? QUALITY_REFRESH_MS)) return this.cached.figures;
    // A read that fails (the database does not answer) keeps the figures read last, or none: the marketplace is served
    // from memory, and does not fail for want of its figures. It is tried again after `refreshMs`.
    const figures = this.readSummaries(now).then(
      (read) => (this.lastRead = read),
      (error) => {
        this.options.log?.("could not read the skills' quality figures; the last ones read are shown", error);
        return this.lastRead ?? new Map<string, QualitySummary | null>();
      },
    );
    this.cached = { atMs: now, figures };
    return figures;
  }

  /** Forgets the public figures read last, so that the next request reads them again (after its own flush). */
  refresh(): void {
    this.cached = undefined;
  }

  private async readSummaries(now: number): Promise<Map<string, QualitySummary | null>> {
    await this.flush();
    const totals = new Map<string, QualityTotals>();
    for (const count of await this.store.sinceBySkill(hourOf(now) - (QUALITY_WINDOW_HOURS - 1) * HOUR_MS)) {
      let t = totals.get(count.skillId);
      if (!t) totals.set(count.skillId, (t = emptyTotals()));
      addCount(t, count);
    }
    return new Map([...totals].map(([skillId, t]) => [skillId, summaryOf(t)]));
  }

  /** One skill's figures over the last `days` UTC days, today included, this replica's waiting counts written first. */
  async stats(skillId: string, days: number): Promise<SkillStats> {
    await this.flush();
    const todayMs = Math.floor(this.now() / DAY_MS) * DAY_MS;
    const fromMs = todayMs - (days - 1) * DAY_MS;
    const perDay: QualityDay[] = Array.from({ length: days }, (_, i) => ({ dayMs: fromMs + i * DAY_MS, totals: emptyTotals() }));
    const totals = emptyTotals();
    for (const count of await this.store.ofSkill(skillId, fromMs)) {
      addCount(totals, count);
      const day = perDay[Math.floor((count.hourMs - fromMs) / DAY_MS)];
      if (day) addCount(day.totals, count);
    }
    return { fromMs, days: perDay, totals };
  }

  /** Stops the timer and writes what is waiting. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
