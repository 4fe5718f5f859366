import type { Db } from "../db/db";

export type IdempotencyBegin =
  { kind: "new" } | { kind: "replay"; status: number; body: string } | { kind: "in_progress" } | { kind: "mismatch" };

/** Allowed Idempotency-Key values: 1 to 255 visible ASCII characters. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

interface Row {
  request_hash: string;
  state: "in_progress" | "completed";
  status_code: bigint | null;
  response_body: string | null;
  created_at: bigint;
}

/**
 * Idempotency keys, in the Stripe manner: (account, key) → request hash, state, and the
 * response. A key is reserved when a call starts, and completed in the same transaction
 * as the charge it reports, so a retry can never see a charge without its response or a
 * response without its charge. A retry with the same key and body gets the stored
 * response; another body under the same key is refused. Outcomes that charge nothing and
 * are worth retrying (5xx, 402, 429) give the key up, so the retry runs afresh.
 */
export class IdempotencyStore {
  private readonly stmt;

  constructor(
    db: Db,
    private readonly ttlMs: number,
  ) {
    this.stmt = {
      get: db.prepare(
        "SELECT request_hash, state, status_code, response_body, created_at FROM idempotency_keys WHERE account_id = ? AND key = ?",
      ),
      reserve: db.prepare(
        `INSERT INTO idempotency_keys (account_id, key, request_hash, state, created_at) VALUES (?, ?, ?, 'in_progress', ?)
         ON CONFLICT (account_id, key) DO UPDATE SET request_hash = excluded.request_hash, state = 'in_progress',
           status_code = NULL, response_body = NULL, created_at = excluded.created_at`,
      ),
      complete: db.prepare(
        "UPDATE idempotency_keys SET state = 'completed', status_code = ?, response_body = ? WHERE account_id = ? AND key = ? AND state = 'in_progress'",
      ),
      abandon: db.prepare("DELETE FROM idempotency_keys WHERE account_id = ? AND key = ? AND state = 'in_progress'"),
      purge: db.prepare("DELETE FROM idempotency_keys WHERE created_at < ?"),
      dropInProgress: db.prepare("DELETE FROM idempotency_keys WHERE state = 'in_progress'"),
    };
  }

  /** Looks the key up and, if it is free (or expired), reserves it for this request. */
  begin(accountId: string, key: string, requestHash: string, nowMs = Date.now()): IdempotencyBegin {
    const row = this.stmt.get.get(accountId, key) as Row | undefined;
    if (row && Number(row.created_at) >= nowMs - this.ttlMs) {
      if (row.request_hash !== requestHash) return { kind: "mismatch" };
      if (row.state === "in_progress") return { kind: "in_progress" };
      return { kind: "replay", status: Number(row.status_code), body: row.response_body ?? "" };
    }
    this.stmt.reserve.run(accountId, key, requestHash, nowMs);
    return { kind: "new" };
  }

  /** Stores the response; call it inside the transaction that captures the charge. */
  complete(accountId: string, key: string, status: number, body: string): void {
    this.stmt.complete.run(status, body, accountId, key);
  }

  /** Frees a reserved key whose outcome is not kept, so a retry runs again. */
  abandon(accountId: string, key: string): void {
    this.stmt.abandon.run(accountId, key);
  }

  /** Deletes keys older than the TTL. */
  purgeExpired(nowMs = Date.now()): number {
    return this.stmt.purge.run(nowMs - this.ttlMs).changes;
  }

  /** At startup: a key still in progress belongs to a call whose hold is being released, so it is freed too. */
  recoverInProgress(): number {
    return this.stmt.dropInProgress.run().changes;
  }
}
