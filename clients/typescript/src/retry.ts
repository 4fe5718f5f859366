import { ConnectionError, RateLimitError, SkillGatewayError, TimeoutError } from "./errors";

/**
 * When to retry, and how long to wait first. A retry is safe for money because every call
 * carries one Idempotency-Key on all of its attempts: the gateway answers a repeat of a call
 * it completed with the stored response (charging nothing more), and frees the key after an
 * outcome that charged nothing (429, 500, 502), so that such a call runs again.
 */
export interface BackoffOptions {
  /** The wait before the first retry, before jitter. Default 500. */
  initialDelayMs: number;
  /** The longest wait between two attempts. Default 8000. */
  maxDelayMs: number;
  /**
   * A 429 whose Retry-After is longer than this is not retried but thrown at once (a daily
   * limit's Retry-After is hours away). Default 60000.
   */
  maxRetryAfterMs: number;
  /** A source of numbers in [0, 1) for the jitter. Default Math.random. */
  random: () => number;
}

export const DEFAULT_BACKOFF: BackoffOptions = {
  initialDelayMs: 500,
  maxDelayMs: 8_000,
  maxRetryAfterMs: 60_000,
  random: Math.random,
};

/**
 * The wait before retry number `retry` (0 for the first): exponential, capped, and jittered
 * between half and all of it, so that many clients failing together do not retry together.
 */
export function backoffDelayMs(retry: number, options: BackoffOptions): number {
  const ceilingMs = Math.min(options.maxDelayMs, options.initialDelayMs * 2 ** retry);
  return ceilingMs / 2 + (options.random() * ceilingMs) / 2;
}

/**
 * How long to wait before retrying after `error`, or null when it must not be retried.
 *
 * Retried: 429 (after its Retry-After), a connection failure, a timed-out attempt, and 409
 * `idempotency_key_in_use` (an earlier attempt of this very call is still running on the
 * gateway, typically after a timeout; once it ends, the retry gets its answer): all under the
 * call's one Idempotency-Key, so the gateway runs and charges it at most once.
 * A 500, or a 502 of the skill (`skill_timeout`, `skill_error`, `skill_invalid_response`,
 * `skill_unreachable`), is retried for a request that runs no skill, and for a skill call only
 * when `skillCall.retryFailures`: the seller may have done the work, and a retry does it again
 * (under the same X-Skill-Idempotency-Key, so a seller that keeps it can tell).
 * Never retried: 502 `skill_backend_forbidden` (the gateway's egress policy, which answers the
 * same), 400, 401, 402, 403, 404, 409 `price_above_max`, 422 and everything else.
 */
export function retryDelayMs(
  error: unknown,
  retry: number,
  options: BackoffOptions,
  skillCall?: { retryFailures: boolean },
): number | null {
  if (error instanceof RateLimitError) {
    if (error.retryAfterMs === undefined) return backoffDelayMs(retry, options);
    return error.retryAfterMs <= options.maxRetryAfterMs ? error.retryAfterMs : null;
  }
  if (error instanceof ConnectionError || error instanceof TimeoutError) return backoffDelayMs(retry, options);
  if (!(error instanceof SkillGatewayError)) return null;
  if (error.status === 502 && error.code === "skill_backend_forbidden") return null;
  if (error.status === 500 || error.status === 502) {
    return skillCall === undefined || skillCall.retryFailures ? backoffDelayMs(retry, options) : null;
  }
  if (error.status === 409 && error.code === "idempotency_key_in_use") return backoffDelayMs(retry, options);
  return null;
}

/** Retry-After in milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfterMs(value: string | null, nowMs: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const dateMs = Date.parse(trimmed);
  return Number.isNaN(dateMs) ? undefined : Math.max(0, dateMs - nowMs);
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
