import { DeferredWrites } from "../db/deferred-writes";
import { type Sql, isDatabaseUnavailable } from "../db/sql";
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
 *
 * The reservation is one INSERT that the table's primary key makes exclusive, so two requests
 * with the same key, on one gateway or on replicas sharing a PostgreSQL, never both run: one
 * reserves the key, the other is told it is in progress (or gets the stored response).
 */
export class IdempotencyKeys {
  /** Keys to give up that the database did not take when they were due: given up once it answers again. */
  private readonly deferred: DeferredWrites;

  constructor(
    /** The keys' table (a call's end writes a key's fate with its line: ./call-write.ts). */
    readonly store: IdempotencyStore,
    private readonly ttlMs: number,
    log?: (message: string, error?: unknown) => void,
  ) {
    this.deferred = new DeferredWrites({ log });
  }

  /** Reserves the key for this request if it is free (or expired); otherwise says what holds it. */
  async begin(accountId: string, key: string, requestHash: string, nowMs = Date.now()): Promise<IdempotencyBegin> {
    let claim: Awaited<ReturnType<IdempotencyStore["claim"]>>;
    try {
      claim = await this.store.claim(accountId, key, requestHash, nowMs, nowMs - this.ttlMs);
    } catch (error) {
      // A claim whose COMMIT the database did not answer may commit all the same, and hold the key in progress with
      // no call to end it: this claim (its request hash and time, which no later claim shares) is given up once the
      // database answers. A later claim of the key, made after this one failed, is not touched.
      if (isDatabaseUnavailable(error) && error.mayHaveCommitted) {
        this.deferred.defer(`claim of idempotency key ${key}`, () => this.store.abandonClaim(accountId, key, requestHash, nowMs));
      }
      throw error;
    }
    if (claim.kind === "claimed") return { kind: "new" };
    const row = claim.record;
    if (row.requestHash !== requestHash) return { kind: "mismatch" };
    if (row.state === "in_progress") return { kind: "in_progress" };
    return { kind: "replay", status: Number(row.statusCode), body: row.responseBody ?? "" };
  }

  /**
   * Frees a reserved key whose outcome is not kept, so a retry runs again. Outside a transaction, a database that
   * does not answer does not fail it: the key is freed once the database answers again (until then a retry is told
   * the key is in use). A key completed meanwhile (its call's charge committed after all) stays completed.
   */
  async abandon(accountId: string, key: string, tx?: Sql): Promise<void> {
    try {
      await this.store.abandon(accountId, key, tx);
    } catch (error) {
      if (tx !== undefined || !isDatabaseUnavailable(error)) throw error;
      this.deferred.defer(`release of idempotency key ${key}`, () => this.store.abandon(accountId, key));
    }
  }

  /** How many keys wait for the database to be given up (`abandon` and `begin` above). */
  get abandonsWaiting(): number {
    return this.deferred.size;
  }

  /** Tries the waiting abandons once more, then stops retrying them (the gateway's close). */
  async closeDeferred(): Promise<void> {
    await this.deferred.flush();
    this.deferred.close();
  }

  /** Deletes keys older than the TTL. */
  purgeExpired(nowMs = Date.now()): Promise<number> {
    return this.store.purgeCreatedBefore(nowMs - this.ttlMs);
  }

  /**
   * At startup of a single gateway: a key still in progress belongs to a call whose hold is being released
   * (Ledger.recoverOpenHolds), so it is freed too (every key in progress, `before` omitted). With several
   * replicas the settlement leader frees only the keys reserved before `before` (ms since the epoch), set
   * longer ago than any call can last (server/replication.ts), so the keys of calls still running on a
   * live replica are left alone.
   */
  recoverInProgress(options: { before?: number } = {}, tx?: Sql): Promise<number> {
    return this.store.dropInProgress(options.before, tx);
  }
}
