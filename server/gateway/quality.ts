import type { ErrorCode } from "../errors";

/**
 * A skill's measured quality (issue 27 §3), from the gateway's own calls: the rules and the arithmetic, pure. The
 * counts are kept per skill, UTC hour, result and latency bucket (./quality-store.ts, filled by ./quality-recorder.ts);
 * everything here folds such counts into the figures the marketplace and the seller see.
 */

/** A call's result as the roll-up keeps it: `success`, or the error code the call ended with. */
export type QualityResult = "success" | ErrorCode;

/** Whose doing a failed call was. */
export type Fault = "seller" | "buyer" | "gateway";

/**
 * The failures that are the seller's: its backend failed, timed out, could not be reached or answered what it
 * promised not to or a charge it could not prove (every 502 of a call). The success rate counts them against the skill. A test
 * (test/gateway/quality.test.ts) holds this list to the codes whose status is 502.
 */
export const SELLER_FAULTS: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "skill_error",
  "skill_timeout",
  "skill_unreachable",
  "skill_invalid_response",
  "skill_backend_forbidden",
  "skill_bad_output",
  "skill_bad_charge",
]);

/**
 * The failures that are the gateway's own (a fault of ours, an x402 payment the chain would not collect): neither
 * the buyer's nor the seller's, so they do not count for or against the skill either.
 */
const GATEWAY_FAULTS: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "internal_error",
  "payment_settlement_failed",
  "limits_unavailable",
  "database_unavailable",
]);

/**
 * Whose doing a failed call was: the seller's (SELLER_FAULTS), the gateway's (GATEWAY_FAULTS), or else the buyer's:
 * input the skill's schema or its backend refused (a 400, `skill_rejected_input`), no money (402), the caller's own
 * limits (429), any other refusal a caller causes.
 */
export function faultOf(code: ErrorCode): Fault {
  if (SELLER_FAULTS.has(code)) return "seller";
  if (GATEWAY_FAULTS.has(code)) return "gateway";
  return "buyer";
}

/** Whether a call counts for the skill's quality: a success or the seller's failure (the buyer's and ours do not). */
export function isRated(result: QualityResult): boolean {
  return result === "success" || faultOf(result) === "seller";
}

/**
 * The latency buckets' upper bounds, in microseconds: fixed and log-scale, ten per decade (1, 1.25, 1.6, 2, 2.5, 3.2,
 * 4, 5, 6.3, 8, then ×10) from 1 ms to 125 s (a skill's longest timeout is 120 s). Bucket i holds the latencies above
 * bound i-1 and at most bound i; one more bucket past the last holds anything longer. Never change them: stored
 * counts name buckets by index.
 */
export const LATENCY_BOUNDS_US: readonly number[] = (() => {
  const steps = [1000, 1250, 1600, 2000, 2500, 3200, 4000, 5000, 6300, 8000];
  const bounds: number[] = [];
  for (let decade = 1; decade <= 10_000; decade *= 10) for (const step of steps) bounds.push(step * decade);
  bounds.push(100_000_000, 125_000_000);
  return bounds;
})();

/** The bucket of a latency, in microseconds. */
export function latencyBucket(latencyUs: number): number {
  let low = 0;
  let high = LATENCY_BOUNDS_US.length;
  // The first bound at or above the latency (the overflow bucket, LATENCY_BOUNDS_US.length, when none is).
  while (low < high) {
    const mid = (low + high) >> 1;
    if (LATENCY_BOUNDS_US[mid] >= latencyUs) high = mid;
    else low = mid + 1;
  }
  return low;
}

/** What a bucket's latencies are at most, in milliseconds (the overflow bucket says the last bound). */
export function bucketBoundMs(bucket: number): number {
  return LATENCY_BOUNDS_US[Math.min(bucket, LATENCY_BOUNDS_US.length - 1)] / 1000;
}

/**
 * The p-th percentile (0 < p ≤ 100) of a latency histogram (calls per bucket), by nearest rank: the bound of the
 * bucket holding the ⌈p·n/100⌉-th fastest call. So "p95 400 ms" says 95% of the calls answered within 400 ms. Null
 * for an empty histogram.
 */
export function percentileMs(histogram: ReadonlyMap<number, number>, p: number): number | null {
  let total = 0;
  for (const calls of histogram.values()) total += calls;
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil((p * total) / 100));
  let seen = 0;
  for (const bucket of [...histogram.keys()].sort((a, b) => a - b)) {
    seen += histogram.get(bucket)!;
    if (seen >= rank) return bucketBoundMs(bucket);
  }
  return bucketBoundMs(LATENCY_BOUNDS_US.length);
}

/** One row of the roll-up: how many calls of one skill, in one hour, ended with one result in one latency bucket. */
export interface QualityCount {
  skillId: string;
  /** The hour's first millisecond since the epoch (UTC). */
  hourMs: number;
  result: QualityResult;
  bucket: number;
  calls: number;
  /** What the calls captured, base units (a failure captures nothing). */
  chargedMicros: bigint;
}

/** How many calls of the last 7 days a skill needs before its quality is shown: below this it is null. */
export const QUALITY_MIN_CALLS = 20;

/** The window of the public figures: the last 168 hourly buckets, the current one included. */
export const QUALITY_WINDOW_HOURS = 7 * 24;

export const HOUR_MS = 3_600_000;

/** The public figures of a skill (GET /v1/skills's `quality`), over the last 7 days. */
export interface QualitySummary {
  /** The calls the skill is judged on: successes and the seller's failures (not the buyer's or the gateway's). */
  calls: number;
  /** Successes over those calls, rounded down to 4 decimals (0.992 is 99.2%). */
  successRate: number;
  p50Ms: number;
  p95Ms: number;
}

/** Everything the counts of some calls say, before any threshold. */
export interface QualityTotals {
  /** Every call counted, whoever's doing its result was. */
  calls: number;
  successes: number;
  /** Calls by error code, with whose fault each code is. */
  failures: Map<ErrorCode, number>;
  /** Successes and the seller's failures: the success rate's denominator. */
  rated: number;
  /** The rated calls' latencies, by bucket. */
  latency: Map<number, number>;
  chargedMicros: bigint;
}

export function emptyTotals(): QualityTotals {
  return { calls: 0, successes: 0, failures: new Map(), rated: 0, latency: new Map(), chargedMicros: 0n };
}

/** Adds one count to `totals`. */
export function addCount(totals: QualityTotals, count: Pick<QualityCount, "result" | "bucket" | "calls" | "chargedMicros">): void {
  totals.calls += count.calls;
  totals.chargedMicros += count.chargedMicros;
  if (count.result === "success") totals.successes += count.calls;
  else totals.failures.set(count.result, (totals.failures.get(count.result) ?? 0) + count.calls);
  if (isRated(count.result)) {
    totals.rated += count.calls;
    totals.latency.set(count.bucket, (totals.latency.get(count.bucket) ?? 0) + count.calls);
  }
}

/** The success rate of some totals, rounded down to 4 decimals; null without a rated call. */
export function successRate(totals: QualityTotals): number | null {
  if (totals.rated === 0) return null;
  return Math.floor((totals.successes * 10_000) / totals.rated) / 10_000;
}

/** The public figures of some totals: null below QUALITY_MIN_CALLS rated calls (too few to say). */
export function summaryOf(totals: QualityTotals): QualitySummary | null {
  if (totals.rated < QUALITY_MIN_CALLS) return null;
  return {
    calls: totals.rated,
    successRate: successRate(totals)!,
    p50Ms: percentileMs(totals.latency, 50)!,
    p95Ms: percentileMs(totals.latency, 95)!,
  };
}

/** The first millisecond of the UTC hour holding `atMs`. */
export function hourOf(atMs: number): number {
  return Math.floor(atMs / HOUR_MS) * HOUR_MS;
}
