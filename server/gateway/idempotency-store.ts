import { type Database, type Sql, type SqlParam, within } from "../db/sql";

/** A stored idempotency key: the request it was first used for, and the response once there is one. */
export interface IdempotencyRecord {
  requestHash: string;
  state: "in_progress" | "completed";
  statusCode: number | null;
  responseBody: string | null;
  createdAtMs: number;
}

/** What claiming a key came to: this request holds it now, or a live row of an earlier request does. */
export type IdempotencyClaim = { kind: "claimed" } | { kind: "held"; record: IdempotencyRecord };

interface Row {
  request_hash: string;
  state: "in_progress" | "completed";
  status_code: bigint | null;
  response_body: string | null;
  created_at: bigint;
}

/**
 * The `idempotency_keys` table (./idempotency.ts), one row per (account, key). The primary key
 * makes a claim exclusive: of two requests racing with one key, on one replica or on several
 * sharing a PostgreSQL, exactly one inserts the row and the other reads it. A key is completed
 * in the same transaction as the charge its response reports.
 */
export class IdempotencyStore {
  constructor(private readonly db: Database) {}

  async get(accountId: string, key: string, sql: Sql = this.db): Promise<IdempotencyRecord | undefined> {
    const row = await sql.one<Row>(
      "SELECT request_hash, state, status_code, response_body, created_at FROM idempotency_keys WHERE account_id = ? AND key = ?",
      [accountId, key],
    );
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

  /**
   * Claims the key for a request (state in_progress, no response), or says which live row holds it:
   * one atomic step. The row is inserted when the key is free, or replaces a row created before
   * `staleBeforeMs` (an expired key); any other row is left as it is and returned. The INSERT is what
   * makes the claim exclusive: a concurrent claim of the same key waits for this one's commit
   * (PostgreSQL) or its turn (SQLite), then finds the row and does not replace it.
   */
  claim(accountId: string, key: string, requestHash: string, nowMs: number, staleBeforeMs: number, tx?: Sql): Promise<IdempotencyClaim> {
    return within(this.db, tx, async (tx) => {
      // PostgreSQL locks the conflicting row even when the WHERE leaves it unchanged, so it cannot
      // vanish before it is read back below; a second attempt is only a guard.
      for (let attempt = 1; attempt <= 3; attempt++) {
        const claimed = await tx.run(
          `INSERT INTO idempotency_keys (account_id, key, request_hash, state, created_at) VALUES (?, ?, ?, 'in_progress', ?)
           ON CONFLICT (account_id, key) DO UPDATE SET request_hash = excluded.request_hash, state = 'in_progress',
             status_code = NULL, response_body = NULL, created_at = excluded.created_at
           WHERE idempotency_keys.created_at < ?`,
          [accountId, key, requestHash, nowMs, staleBeforeMs],
        );
        if (claimed === 1) return { kind: "claimed" as const };
        const record = await this.get(accountId, key, tx);
        if (record) return { kind: "held" as const, record };
      }
      throw new Error(`idempotency key ${key} could neither be claimed nor read`);
    });
  }

  /** Stores the response of a key in progress; pass the transaction of the charge it reports. Returns how many rows it changed. */
  complete(accountId: string, key: string, statusCode: number, responseBody: string, tx?: Sql): Promise<number> {
    return this.write(
      tx,
      "UPDATE idempotency_keys SET state = 'completed', status_code = ?, response_body = ? WHERE account_id = ? AND key = ? AND state = 'in_progress'",
      [statusCode, responseBody, accountId, key],
    );
  }

  /** Frees a key still in progress. */
  async abandon(accountId: string, key: string, tx?: Sql): Promise<void> {
    await this.write(tx, "DELETE FROM idempotency_keys WHERE account_id = ? AND key = ? AND state = 'in_progress'", [accountId, key]);
  }

  /**
   * Frees the key if it is still in progress under the one claim made with `requestHash` at `createdAtMs` (a claim
   * whose own outcome is unknown): a claim made since, by another request, is left alone. `not_yet` when the key has
   * no row at all (./../db/deferred-writes.ts tries again).
   */
  async abandonClaim(accountId: string, key: string, requestHash: string, createdAtMs: number, tx?: Sql): Promise<"done" | "not_yet"> {
    return within(this.db, tx, async (tx) => {
      const deleted = await tx.run(
        "DELETE FROM idempotency_keys WHERE account_id = ? AND key = ? AND state = 'in_progress' AND request_hash = ? AND created_at = ?",
        [accountId, key, requestHash, createdAtMs],
      );
      // No row at all: the claim may yet commit (its COMMIT still on its way to the server). Any other row is another claim's.
      if (deleted === 0 && (await this.get(accountId, key, tx)) === undefined) return "not_yet";
      return "done";
    });
  }

  /** Deletes keys created before `beforeMs`; returns how many. */
  purgeCreatedBefore(beforeMs: number, tx?: Sql): Promise<number> {
    return this.write(tx, "DELETE FROM idempotency_keys WHERE created_at < ?", [beforeMs]);
  }

  /** Deletes the keys in progress created before `beforeMs` (every one when omitted); returns how many. */
  dropInProgress(beforeMs = Number.MAX_SAFE_INTEGER, tx?: Sql): Promise<number> {
    return this.write(tx, "DELETE FROM idempotency_keys WHERE state = 'in_progress' AND created_at < ?", [beforeMs]);
  }

  /**
   * One statement that writes, in the caller's transaction or in one of its own: on SQLite a write
   * outside any transaction would land in whichever operation of the group commit holds the turn.
   */
  private write(tx: Sql | undefined, sql: string, params: SqlParam[]): Promise<number> {
    return within(this.db, tx, (tx) => tx.run(sql, params));
  }
}
