/**
 * Rate limiting by GCRA (the generic cell rate algorithm): each limit keeps one number per
 * key, the theoretical arrival time (TAT) of the next call. It allows `limit` calls at once
 * and refills one every `windowMs / limit`, so it behaves like a sliding window without
 * storing each call, and it knows exactly when the next call will be allowed.
 */

export interface RateRule {
  /** Identifies the counter, e.g. `key:<id>` or `skill:<id>:<account>`. */
  key: string;
  limit: number;
  windowMs: number;
}

export interface RateDecision {
  allowed: boolean;
  /** The rule that decided: the rejecting one, or else the first (the headline limit). */
  rule: RateRule;
  remaining: number;
  /** Milliseconds until the counter is back to its full allowance. */
  resetMs: number;
  /** Milliseconds to wait before a retry can succeed; 0 when allowed. */
  retryAfterMs: number;
}

/** What a daily cap decides: the call counts, or the ms until the next UTC day, when it may. */
export type DailyCapDecision = { allowed: true } | { allowed: false; retryAfterMs: number };

/**
 * The per-minute limits as the call service uses them: RateLimiter (this process's memory) or
 * RedisRateLimiter (./redis-rate-limit.ts, shared by every replica), which decide alike.
 */
export interface CallLimiter {
  /** Admits a call only if every rule allows it, and then counts it against all of them. */
  admit(rules: readonly RateRule[], nowMs?: number): Promise<RateDecision>;
}

/** The per-account cap on calls per UTC day as the call service uses it: DailyCap or RedisDailyCap. */
export interface CallDailyCap {
  /** Counts a call if the account is under `cap` today. */
  admit(accountId: string, cap: number, nowMs?: number): Promise<DailyCapDecision>;
}

/** How many calls an account made since the start of a UTC day, from the usage days the calls log keeps (CallsStore.countSince). */
export type CountSince = (accountId: string, sinceMs: number) => number | Promise<number>;

/** The limits in this process's memory: right for one gateway, or for limits each replica keeps alone. */
export class RateLimiter implements CallLimiter {
  private readonly tatMs = new Map<string, number>();
  private writesSincePrune = 0;

  /**
   * Admits a call only if every rule allows it, and then counts it against all of them.
   * A call rejected by one rule consumes none, so a per-skill rejection does not eat into
   * the caller's per-key allowance. The decision is made before the promise is returned, with
   * nothing awaited in between: concurrent calls are decided one after another.
   */
  async admit(rules: readonly RateRule[], nowMs = Date.now()): Promise<RateDecision> {
    if (rules.length === 0) throw new Error("admit needs at least one rule");
    const next: number[] = [];
    let headline: RateDecision | undefined;
    for (const rule of rules) {
      const intervalMs = rule.windowMs / rule.limit;
      const tat = Math.max(this.tatMs.get(rule.key) ?? nowMs, nowMs);
      const newTat = tat + intervalMs;
      const allowAtMs = newTat - rule.windowMs;
      if (nowMs < allowAtMs - 1e-9) {
        return { allowed: false, rule, remaining: 0, resetMs: tat - nowMs, retryAfterMs: allowAtMs - nowMs };
      }
      next.push(newTat);
      headline ??= {
        allowed: true,
        rule,
        remaining: Math.max(0, Math.floor((rule.windowMs - (newTat - nowMs)) / intervalMs + 1e-9)),
        resetMs: newTat - nowMs,
        retryAfterMs: 0,
      };
    }
    for (const [i, rule] of rules.entries()) this.tatMs.set(rule.key, next[i]);
    this.writesSincePrune += rules.length;
    if (this.writesSincePrune > 10_000) this.prune(nowMs);
    return headline!;
  }

  /** Forgets counters that have refilled completely: they are the same as absent. */
  prune(nowMs = Date.now()): void {
    this.writesSincePrune = 0;
    for (const [key, tat] of this.tatMs) if (tat <= nowMs) this.tatMs.delete(key);
  }

  get size(): number {
    return this.tatMs.size;
  }
}

/**
 * A per-account cap on calls per UTC day. The count of the day so far is loaded once from
 * the calls log's usage days (so a restart does not reset it) and then kept in memory.
 */
export class DailyCap implements CallDailyCap {
  private readonly counts = new Map<string, { day: number; count: number }>();

  constructor(private readonly countSince: CountSince) {}

  /** Counts a call if the account is under its cap; returns the ms until the next UTC day otherwise. */
  async admit(accountId: string, cap: number, nowMs = Date.now()): Promise<DailyCapDecision> {
    const day = Math.floor(nowMs / 86_400_000);
    let state = this.counts.get(accountId);
    if (!state || state.day !== day) {
      const count = await this.countSince(accountId, day * 86_400_000);
      // Another call of the account may have loaded the day while this one waited for the log: the
      // first load stands, with the calls it has counted since.
      state = this.counts.get(accountId);
      if (!state || state.day !== day) {
        state = { day, count };
        this.counts.set(accountId, state);
      }
    }
    if (state.count >= cap) return { allowed: false, retryAfterMs: (day + 1) * 86_400_000 - nowMs };
    state.count++;
    return { allowed: true };
  }
}
