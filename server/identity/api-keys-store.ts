import { type Database, type Sql, within } from "../db/sql";
import { type KeyMetadata, metadataText, parseMetadata } from "./key-metadata";
import { type KeyScope, parseScopes, scopesText } from "./scopes";

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
  /** What the key may do (./scopes.ts), in the vocabulary's order; never empty. */
  scopes: KeyScope[];
  /** The skills the key may call, by slug or UUID as its maker named them; null for every skill. */
  allowedSkills: string[] | null;
  /** When the key stops authenticating (401 key_expired from then on); null for never. */
  expiresAtMs: number | null;
  /** What its maker says the key is for (./key-metadata.ts); {} for nothing. */
  metadata: KeyMetadata;
}

/** What PATCH /v1/keys/:id may change of a key's row (its spending limit is the ledger's: ../ledger/spend-limits.ts). */
export interface ApiKeyChanges {
  name?: string;
  scopes?: readonly KeyScope[];
  allowedSkills?: readonly string[] | null;
  expiresAtMs?: number | null;
  metadata?: KeyMetadata;
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
  scopes: string;
  allowed_skills: string | null;
  expires_at: bigint | null;
  metadata: string | null;
}

const SELECT_KEY =
  "SELECT k.id, k.account_id, k.name, k.prefix, k.rate_limit_per_min, a.daily_call_cap, k.created_at, k.revoked_at, k.last_used_at," +
  " k.scopes, k.allowed_skills, k.expires_at, k.metadata" +
  " FROM api_keys k JOIN accounts a ON a.id = k.account_id";

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
    scopes: parseScopes(row.scopes),
    allowedSkills: row.allowed_skills === null ? null : (JSON.parse(row.allowed_skills) as string[]),
    expiresAtMs: row.expires_at === null ? null : Number(row.expires_at),
    metadata: parseMetadata(row.metadata),
  };
}

/**
 * The `api_keys` table (./api-keys.ts), read with its account's daily call cap. Only a key's
 * SHA-256 and visible prefix are stored. Each write is one statement: given a `tx` it joins the
 * caller's transaction, without one it commits on its own.
 */
export class ApiKeysStore {
  constructor(private readonly db: Database) {}

  insert(
    k: {
      id: string;
      accountId: string;
      name: string;
      prefix: string;
      hash: string;
      rateLimitPerMin: number | null;
      createdAtMs: number;
      scopes: readonly KeyScope[];
      allowedSkills: readonly string[] | null;
      expiresAtMs: number | null;
      metadata: KeyMetadata;
    },
    tx?: Sql,
  ): Promise<void> {
    if (k.scopes.length === 0) throw new Error("a key needs at least one scope");
    return within(this.db, tx, async (tx) => {
      await tx.run(
        "INSERT INTO api_keys (id, account_id, name, prefix, hash, rate_limit_per_min, created_at, scopes, allowed_skills, expires_at, metadata)" +
          " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
          k.id,
          k.accountId,
          k.name,
          k.prefix,
          k.hash,
          k.rateLimitPerMin,
          k.createdAtMs,
          scopesText(k.scopes),
          k.allowedSkills === null ? null : JSON.stringify(k.allowedSkills),
          k.expiresAtMs,
          metadataText(k.metadata),
        ],
      );
    });
  }

  /**
   * The key's row read under its lock (PostgreSQL) until the transaction ends, for a change decided on what it reads:
   * a concurrent change or revocation of the same key waits for this one.
   */
  async byIdForUpdate(id: string, tx: Sql): Promise<StoredApiKey | undefined> {
    const locked = await tx.one<{ id: string }>(`SELECT id FROM api_keys WHERE id = ?${tx.dialect.forUpdate}`, [id]);
    return locked && this.byId(id, tx);
  }

  /** Writes the fields of `changes` that are set, on a live key; false if it is unknown or revoked. One UPDATE. */
  update(id: string, changes: ApiKeyChanges, tx?: Sql): Promise<boolean> {
    const sets: string[] = [];
    const params: (string | number | null)[] = [];
    const set = (column: string, value: string | number | null) => {
      sets.push(`${column} = ?`);
      params.push(value);
    };
    if (changes.name !== undefined) set("name", changes.name);
    if (changes.scopes !== undefined) {
      if (changes.scopes.length === 0) throw new Error("a key needs at least one scope");
      set("scopes", scopesText(changes.scopes));
    }
    if (changes.allowedSkills !== undefined)
      set("allowed_skills", changes.allowedSkills === null ? null : JSON.stringify(changes.allowedSkills));
    if (changes.expiresAtMs !== undefined) set("expires_at", changes.expiresAtMs);
    if (changes.metadata !== undefined) set("metadata", metadataText(changes.metadata));
    return within(this.db, tx, async (tx) => {
      if (sets.length === 0) return (await tx.value("SELECT 1 FROM api_keys WHERE id = ? AND revoked_at IS NULL", [id])) !== undefined;
      return (await tx.run(`UPDATE api_keys SET ${sets.join(", ")} WHERE id = ? AND revoked_at IS NULL`, [...params, id])) === 1;
    });
  }

  async byId(id: string, sql: Sql = this.db): Promise<StoredApiKey | undefined> {
    const row = await sql.one<KeyRow>(`${SELECT_KEY} WHERE k.id = ?`, [id]);
    return row && toRecord(row);
  }

  async byHash(hash: string, sql: Sql = this.db): Promise<StoredApiKey | undefined> {
    const row = await sql.one<KeyRow>(`${SELECT_KEY} WHERE k.hash = ?`, [hash]);
    return row && toRecord(row);
  }

  /** The account's keys, revoked ones included, oldest first. */
  async ofAccount(accountId: string, sql: Sql = this.db): Promise<StoredApiKey[]> {
    return (await sql.all<KeyRow>(`${SELECT_KEY} WHERE k.account_id = ? ORDER BY k.created_at, k.id`, [accountId])).map(toRecord);
  }

  /** Marks a live key revoked; false if it was unknown or revoked already. One conditional UPDATE: of two revocations, one says true. */
  revoke(id: string, atMs: number, tx?: Sql): Promise<boolean> {
    return within(
      this.db,
      tx,
      async (tx) => (await tx.run("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", [atMs, id])) === 1,
    );
  }

  /** Records a use; a time earlier than the stored one (a slower writer, another replica) never moves it back. */
  recordLastUse(id: string, atMs: number, tx?: Sql): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run(
        "UPDATE api_keys SET last_used_at = CASE WHEN last_used_at IS NULL OR last_used_at < ? THEN ? ELSE last_used_at END WHERE id = ?",
        [atMs, atMs, id],
      );
    });
  }
}
