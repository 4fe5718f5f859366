import type { Db } from "../db/db";

/** An API key's stored record: its SHA-256 stays in the table. */
export interface StoredApiKey {
  id: string;
  accountId: string;
  name: string;
  prefix: string;
  rateLimitPerMin: number | null;
  /** The owning account's own daily call cap, if it has one (cached with the key). */
  accountDailyCallCap: number | null;
  createdAtMs: number;
  revokedAtMs: number | null;
  /** When the key last authenticated a request, to LAST_USED_RESOLUTION_MS; null if never. */
  lastUsedAtMs: number | null;
}

/**
 * The `api_keys` table (./api-keys.ts), read with its account's daily call cap. Only a key's
 * SHA-256 and visible prefix are stored; writes run inside the caller's ledger operation.
 */
export interface ApiKeysStore {
  insert(k: {
    id: string;
    accountId: string;
    name: string;
    prefix: string;
    hash: string;
    rateLimitPerMin: number | null;
    createdAtMs: number;
  }): void;
  byId(id: string): StoredApiKey | undefined;
  byHash(hash: string): StoredApiKey | undefined;
  /** The account's keys, revoked ones included, oldest first. */
  ofAccount(accountId: string): StoredApiKey[];
  /** Marks a live key revoked; false if it was unknown or revoked already. */
  revoke(id: string, atMs: number): boolean;
  /** Records a use; a time earlier than the stored one (a slower writer) never moves it back. */
  recordLastUse(id: string, atMs: number): void;
}

interface KeyRow {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  rate_limit_per_min: bigint | null;
  daily_call_cap: bigint | null;
  created_at: bigint;
  revoked_at: bigint | null;
  last_used_at: bigint | null;
}

const SELECT_KEY = "SELECT k.*, a.daily_call_cap FROM api_keys k JOIN accounts a ON a.id = k.account_id";

function toRecord(row: KeyRow): StoredApiKey {
  return {
    id: row.id,
    accountId: row.account_id,
    name: row.name,
    prefix: row.prefix,
    rateLimitPerMin: row.rate_limit_per_min === null ? null : Number(row.rate_limit_per_min),
    accountDailyCallCap: row.daily_call_cap === null ? null : Number(row.daily_call_cap),
    createdAtMs: Number(row.created_at),
    revokedAtMs: row.revoked_at === null ? null : Number(row.revoked_at),
    lastUsedAtMs: row.last_used_at === null ? null : Number(row.last_used_at),
  };
}

/** ApiKeysStore on the gateway's SQLite database. */
export class SqliteApiKeysStore implements ApiKeysStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      insert: db.prepare(
        "INSERT INTO api_keys (id, account_id, name, prefix, hash, rate_limit_per_min, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      ),
      byHash: db.prepare(`${SELECT_KEY} WHERE k.hash = ?`),
      byId: db.prepare(`${SELECT_KEY} WHERE k.id = ?`),
      byAccount: db.prepare(`${SELECT_KEY} WHERE k.account_id = ? ORDER BY k.created_at`),
      revoke: db.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"),
      lastUsed: db.prepare("UPDATE api_keys SET last_used_at = max(COALESCE(last_used_at, 0), ?) WHERE id = ?"),
    };
  }

  insert(k: {
    id: string;
    accountId: string;
    name: string;
    prefix: string;
    hash: string;
    rateLimitPerMin: number | null;
    createdAtMs: number;
  }): void {
    this.stmt.insert.run(k.id, k.accountId, k.name, k.prefix, k.hash, k.rateLimitPerMin, k.createdAtMs);
  }

  byId(id: string): StoredApiKey | undefined {
    const row = this.stmt.byId.get(id) as KeyRow | undefined;
    return row && toRecord(row);
  }

  byHash(hash: string): StoredApiKey | undefined {
    const row = this.stmt.byHash.get(hash) as KeyRow | undefined;
    return row && toRecord(row);
  }

  ofAccount(accountId: string): StoredApiKey[] {
    return (this.stmt.byAccount.all(accountId) as KeyRow[]).map(toRecord);
  }

  revoke(id: string, atMs: number): boolean {
    return this.stmt.revoke.run(atMs, id).changes === 1;
  }

  recordLastUse(id: string, atMs: number): void {
    this.stmt.lastUsed.run(atMs, id);
  }
}
