import type { UsageFilter } from "./calls-store";
import type { LimitRefusal, RefusalCount, RefusalsStore } from "./refusals-store";

const MINUTE_MS = 60_000;

/**
 * Counts the calls a key's own limits refused, in memory, and writes the counts to the store every `flushMs` (and
 * when `maxKeys` distinct counts are waiting, and at close): a refused call costs an addition in a map, not a row
 * and a transaction, so a flood of them cannot grow the calls log or load the database. A crash loses at most the
 * counts of the last `flushMs`: they are a statistic, not money.
 */
export class RefusalCounter {
  private waiting = new Map<string, RefusalCount>();
  private flushing: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly store: RefusalsStore,
    private readonly options: { flushMs?: number; maxKeys?: number; log?: (message: string, error?: unknown) => void } = {},
  ) {
    this.timer = setInterval(() => void this.flush(), options.flushMs ?? 5_000);
    this.timer.unref();
  }

  /** Counts one refused call at `atMs`. */
  count(call: { accountId: string; apiKeyId: string; skillId: string; outcome: LimitRefusal }, atMs = Date.now()): void {
    const minuteMs = Math.floor(atMs / MINUTE_MS) * MINUTE_MS;
    const key = `${call.accountId}\u0000${call.apiKeyId}\u0000${call.skillId}\u0000${call.outcome}\u0000${minuteMs}`;
    const counted = this.waiting.get(key);
    if (counted) counted.count++;
    else this.waiting.set(key, { ...call, minuteMs, count: 1 });
    if (this.waiting.size >= (this.options.maxKeys ?? 10_000)) void this.flush();
  }

  /** Writes what is waiting; one flush at a time, each after the one before it. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.waiting.size === 0) return;
      const counts = [...this.waiting.values()];
      this.waiting = new Map();
      try {
        await this.store.add(counts);
      } catch (error) {
        this.options.log?.(`could not write ${counts.length} counts of refused calls; they are dropped`, error);
      }
    });
    return this.flushing;
  }

  /** The refused calls narrowed by `filter`, per UTC day, this replica's waiting counts written first. */
  async daily(accountId: string, filter: UsageFilter): Promise<Map<number, number>> {
    await this.flush();
    return this.store.daily(accountId, filter);
  }

  /** How many calls narrowed by `filter` were refused, this replica's waiting counts written first. */
  async total(accountId: string, filter: UsageFilter): Promise<number> {
    await this.flush();
    return this.store.total(accountId, filter);
  }

  /** Stops the timer and writes what is waiting. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
