import type { IdempotencyStore } from "./idempotency-store";

export type IdempotencyBegin =
  { kind: "new" } | { kind: "replay"; status: number; body: string } | { kind: "in_progress" } | { kind: "mismatch" };

/** Allowed Idempotency-Key values: 1 to 255 visible ASCII characters. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/**
 * Idempotency keys, in the Stripe manner: (account, key) → request hash, state, and the
 * response. A key is reserved when a call starts, and completed in the same transaction
 * as the charge it reports, so a retry can never see a charge without its response or a
 * response without its charge. A retry with the same key and body gets the stored
 * response; another body under the same key is refused. Outcomes that charge nothing and
 * are worth retrying (5xx, 402, 429) give the key up, so the retry runs afresh.
 */
export class IdempotencyKeys {
  constructor(
    private readonly store: IdempotencyStore,
    private readonly ttlMs: number,
  ) {}

  /** Looks the key up and, if it is free (or expired), reserves it for this request. */
  begin(accountId: string, key: string, requestHash: string, nowMs = Date.now()): IdempotencyBegin {
    const row = this.store.get(accountId, key);
    if (row && row.createdAtMs >= nowMs - this.ttlMs) {
      if (row.requestHash !== requestHash) return { kind: "mismatch" };
      if (row.state === "in_progress") return { kind: "in_progress" };
      return { kind: "replay", status: Number(row.statusCode), body: row.responseBody ?? "" };
    }
    this.store.reserve(accountId, key, requestHash, nowMs);
    return { kind: "new" };
  }

  /** Stores the response; call it inside the transaction that captures the charge. */
  complete(accountId: string, key: string, status: number, body: string): void {
    this.store.complete(accountId, key, status, body);
  }

  /** Frees a reserved key whose outcome is not kept, so a retry runs again. */
  abandon(accountId: string, key: string): void {
    this.store.abandon(accountId, key);
  }

  /** Deletes keys older than the TTL. */
  purgeExpired(nowMs = Date.now()): number {
    return this.store.purgeCreatedBefore(nowMs - this.ttlMs);
  }

  /** At startup: a key still in progress belongs to a call whose hold is being released, so it is freed too. */
  recoverInProgress(): number {
    return this.store.dropInProgress();
  }
}
