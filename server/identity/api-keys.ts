import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { ApiKeysStore, StoredApiKey } from "./api-keys-store";
import { base58Encode, isBase58 } from "./base58";

export const KEY_PREFIX = "atom_";
const SECRET_BYTES = 32;
/** How much of a key is kept in clear to let a person recognise it in a list. */
const VISIBLE_CHARS = 12;
/** A key's last use is recorded to this resolution: at most one write per key per interval. */
export const LAST_USED_RESOLUTION_MS = 60_000;

/** A key as the gateway knows it (never the key itself). */
export type ApiKeyRecord = StoredApiKey;

export interface CreatedApiKey {
  /** The whole key. It is returned here once and never stored; only its SHA-256 is. */
  key: string;
  record: ApiKeyRecord;
}

export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** A cheap shape check before any lookup: `atom_` and a base58 secret of plausible length. */
export function looksLikeKey(key: string): boolean {
  const secret = key.slice(KEY_PREFIX.length);
  return key.startsWith(KEY_PREFIX) && secret.length >= 32 && secret.length <= 48 && isBase58(secret);
}

/**
 * API keys: `atom_` + base58 of 32 random bytes. Only the SHA-256 of the key and a short
 * visible prefix are stored. Authentication hashes the presented key and looks the hash
 * up; the positive answers are cached for `cacheTtlMs` so the call path does not touch
 * SQLite per request. A revocation made in this process takes effect at once; one made
 * by another process (a script) within the cache TTL.
 *
 * Each key's last use is noted in memory (a map lookup per request) at most once a minute,
 * and written by `flushLastUsed()`, which the gateway runs from a timer inside its group
 * commit: the call path never waits on that write.
 */
export class ApiKeys {
  private readonly cache = new Map<string, { record: ApiKeyRecord; expiresAtMs: number }>();
  /** Per key id: the last use noted (written or waiting to be). */
  private readonly lastUsedNoted = new Map<string, number>();
  /** Per key id: a last use not written yet. */
  private readonly lastUsedPending = new Map<string, number>();
  constructor(
    private readonly store: ApiKeysStore,
    private readonly cacheTtlMs = 5_000,
  ) {}

  create(accountId: string, options: { name?: string; rateLimitPerMin?: number | null } = {}): CreatedApiKey {
    const key = KEY_PREFIX + base58Encode(randomBytes(SECRET_BYTES));
    const id = randomUUID();
    this.store.insert({
      id,
      accountId,
      name: options.name ?? "",
      prefix: key.slice(0, VISIBLE_CHARS),
      hash: hashKey(key),
      rateLimitPerMin: options.rateLimitPerMin ?? null,
      createdAtMs: Date.now(),
    });
    return { key, record: this.get(id)! };
  }

  get(id: string): ApiKeyRecord | undefined {
    return this.store.byId(id);
  }

  /** The account's keys, revoked ones included, with last uses not yet written already shown. */
  listForAccount(accountId: string): ApiKeyRecord[] {
    return this.store.ofAccount(accountId).map((record) => {
      const pending = this.lastUsedPending.get(record.id);
      return pending === undefined ? record : { ...record, lastUsedAtMs: pending };
    });
  }

  /** Writes the last uses noted since the previous flush; run it inside a ledger commit. Returns how many. */
  flushLastUsed(): number {
    const pending = [...this.lastUsedPending];
    this.lastUsedPending.clear();
    for (const [id, atMs] of pending) this.store.recordLastUse(id, atMs);
    return pending.length;
  }

  private noteUse(record: ApiKeyRecord, nowMs: number): void {
    const noted = this.lastUsedNoted.get(record.id) ?? record.lastUsedAtMs;
    if (noted !== null && noted !== undefined && nowMs - noted < LAST_USED_RESOLUTION_MS) return;
    this.lastUsedNoted.set(record.id, nowMs);
    this.lastUsedPending.set(record.id, nowMs);
  }

  /** Returns the live key record for a presented key, or undefined if it is malformed, unknown or revoked. */
  authenticate(presented: string, nowMs = Date.now()): ApiKeyRecord | undefined {
    if (!looksLikeKey(presented)) return undefined;
    const hash = hashKey(presented);
    const cached = this.cache.get(hash);
    if (cached && cached.expiresAtMs > nowMs) {
      this.noteUse(cached.record, nowMs);
      return cached.record;
    }
    const record = this.store.byHash(hash);
    if (!record || record.revokedAtMs !== null) {
      this.cache.delete(hash);
      return undefined;
    }
    if (this.cacheTtlMs > 0) this.cache.set(hash, { record, expiresAtMs: nowMs + this.cacheTtlMs });
    this.noteUse(record, nowMs);
    return record;
  }

  /**
   * A live key of `accountId` picked by its id, for a call the account's own dashboard makes
   * with it (the "try it" form): counted as a use of the key like any call. Undefined for an
   * unknown, revoked or another account's key.
   */
  useOwn(id: string, accountId: string, nowMs = Date.now()): ApiKeyRecord | undefined {
    const record = this.get(id);
    if (!record || record.accountId !== accountId || record.revokedAtMs !== null) return undefined;
    this.noteUse(record, nowMs);
    return record;
  }

  /** Revokes a key; returns false if it was unknown or already revoked. */
  revoke(id: string): boolean {
    const changed = this.store.revoke(id, Date.now());
    for (const [hash, entry] of this.cache) if (entry.record.id === id) this.cache.delete(hash);
    this.lastUsedNoted.delete(id);
    return changed;
  }
}
