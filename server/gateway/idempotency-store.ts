import type { Db } from "../db/db";

/** A stored idempotency key: the request it was first used for, and the response once there is one. */
export interface IdempotencyRecord {
  requestHash: string;
  state: "in_progress" | "completed";
  statusCode: number | null;
  responseBody: string | null;
  createdAtMs: number;
}

/**
 * The `idempotency_keys` table (./idempotency.ts), one row per (account, key). Every write runs
 * inside the caller's ledger operation: a key is completed in the same transaction as the charge
 * its response reports.
 */
export interface IdempotencyStore {
  get(accountId: string, key: string): IdempotencyRecord | undefined;
  /** Reserves the key for a request (replacing an expired row): state in_progress, no response. */
  reserve(accountId: string, key: string, requestHash: string, nowMs: number): void;
  /** Stores the response of a key in progress. */
  complete(accountId: string, key: string, statusCode: number, responseBody: string): void;
  /** Frees a key still in progress. */
  abandon(accountId: string, key: string): void;
  /** Deletes keys created before `beforeMs`; returns how many. */
  purgeCreatedBefore(beforeMs: number): number;
  /** Deletes every key in progress; returns how many. */
  dropInProgress(): number;
}

interface Row {
  request_hash: string;
  state: "in_progress" | "completed";
  status_code: bigint | null;
  response_body: string | null;
  created_at: bigint;
}

/** IdempotencyStore on the gateway's SQLite database. */
export class SqliteIdempotencyStore implements IdempotencyStore {
  private readonly stmt;

  constructor(db: Db) {
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

  get(accountId: string, key: string): IdempotencyRecord | undefined {
    const row = this.stmt.get.get(accountId, key) as Row | undefined;
    return (
      row && {
        requestHash: row.request_hash,
        state: row.state,
        statusCode: row.status_code === null ? null : Number(row.status_code),
        responseBody: row.response_body,
        createdAtMs: Number(row.created_at),
      }
    );
  }

  reserve(accountId: string, key: string, requestHash: string, nowMs: number): void {
    this.stmt.reserve.run(accountId, key, requestHash, nowMs);
  }

  complete(accountId: string, key: string, statusCode: number, responseBody: string): void {
    this.stmt.complete.run(statusCode, responseBody, accountId, key);
  }

  abandon(accountId: string, key: string): void {
    this.stmt.abandon.run(accountId, key);
  }

  purgeCreatedBefore(beforeMs: number): number {
    return this.stmt.purge.run(beforeMs).changes;
  }

  dropInProgress(): number {
    return this.stmt.dropInProgress.run().changes;
  }
}
