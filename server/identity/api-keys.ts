import { createHash, randomBytes, randomUUID } from "node:crypto";
import { type Database, type Sql, within } from "../db/sql";
import { UUID_PATTERN } from "../db/ids";
import { type SpendLimit, SpendLimits, type SpendLimitStatus } from "../ledger/spend-limits";
import { type ApiKeyChanges, ApiKeysStore, type StoredApiKey } from "./api-keys-store";
import type { KeyMetadata } from "./key-metadata";
import { base58Encode, isBase58 } from "./base58";
import { DEFAULT_SCOPES, type KeyScope, isExpired } from "./scopes";
import type { TextRule } from "../text";

export const KEY_PREFIX = "atom_";
const SECRET_BYTES = 32;
/** How much of a key is kept in clear to let a person recognise it in a list. */
const VISIBLE_CHARS = 12;
/**
 * A key's name is a label its owner reads in lists, usage rows and CSV files: a name under the text policy
 * (../text.ts), at most 64 characters, and "" for none.
 */
export const KEY_NAME_RULE: TextRule = { field: "name", minChars: 0, maxChars: 64, kind: "name" };
/** A key's last use is recorded to this resolution: at most one write per key per interval. */
export const LAST_USED_RESOLUTION_MS = 60_000;

/** A key as the gateway knows it (never the key itself). */
export type ApiKeyRecord = StoredApiKey;

/** A presented key, checked: live, expired (with its record, for the message), or not a key the gateway knows. */
export type KeyCheck = { kind: "valid"; record: ApiKeyRecord } | { kind: "expired"; record: ApiKeyRecord } | { kind: "invalid" };

/** A key as a change to it is decided on: its record and its spending limit (null for none), read in one transaction. */
export interface KeyState {
  record: ApiKeyRecord;
  spendLimit: SpendLimitStatus | null;
}

/** Reads keys inside a change's transaction: `state(id)` is the key as that transaction sees it, undefined if unknown. */
export interface KeyReader {
  state(id: string): Promise<KeyState | undefined>;
}

/** A change to a key: the fields of its row that are set, and its spending limit (undefined: unchanged; null: removed). */
export interface KeyUpdate extends ApiKeyChanges {
  spendLimit?: SpendLimit | null;
}

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
 * the database per request. A revocation made through this instance takes effect at once;
 * one made elsewhere (another replica, a script) within the cache TTL, or at once when
 * whoever hears of it calls `forget(keyId)` (or `forgetAll()`) here.
 *
 * Each key's last use is noted in memory (a map lookup per request) at most once a minute,
 * and written by `flushLastUsed()`, which the gateway runs from a timer: the call path never
 * waits on that write.
 *
 * A key may carry a spending limit (per UTC day, per UTC month, or in total). The ledger keeps
 * and enforces it, in the same transaction as each call's hold (ledger/spend-limits.ts); here it
 * is set with the key, changed, removed and read. It is never cached: a changed limit applies to
 * the next hold on every replica.
 */
export class ApiKeys {
  private readonly store: ApiKeysStore;
  private readonly limits: SpendLimits;
  private readonly cache = new Map<string, { record: ApiKeyRecord; expiresAtMs: number }>();
  /**
   * Counts the forgets (`forget`, `forgetAll`, `revoke`). A lookup that began before one may
   * have read the key before its revocation: what it read is then used once but not cached.
   */
  private forgets = 0;
  /** Per key id: the last use noted (written or waiting to be). */
  private readonly lastUsedNoted = new Map<string, number>();
  /** Per key id: a last use not written yet. */
  private readonly lastUsedPending = new Map<string, number>();

  constructor(
    private readonly db: Database,
    private readonly cacheTtlMs = 5_000,
    /** Resolves once the holds already answered are committed (Ledger.caughtUp): what keys spent is read after. */
    private readonly caughtUp: () => Promise<void> = async () => {},
  ) {
    this.store = new ApiKeysStore(db);
    this.limits = new SpendLimits(db);
  }

  /**
   * Issues a key to the account, with its spending limit if one is given (counted from `nowMs`), its scopes (the least,
   * DEFAULT_SCOPES, unless others are given), the skills it may call (every one when absent or null) and its expiry.
   * Without `tx` it is durable before this resolves (the key is shown once and must then work);
   * with one, it is part of the caller's transaction.
   */
  create(
    accountId: string,
    options: {
      name?: string;
      rateLimitPerMin?: number | null;
      spendLimit?: SpendLimit | null;
      nowMs?: number;
      scopes?: readonly KeyScope[];
      allowedSkills?: readonly string[] | null;
      expiresAtMs?: number | null;
      metadata?: KeyMetadata;
      /**
       * Runs first in the key's transaction, and may throw to refuse it: what decides whether the key may be made
       * (the keys:manage key making it, read afresh: server/identity/key-authority.ts).
       */
      check?: (read: KeyReader) => Promise<void>;
    } = {},
    tx?: Sql,
  ): Promise<CreatedApiKey> {
    const key = KEY_PREFIX + base58Encode(randomBytes(SECRET_BYTES));
    const id = randomUUID();
    return within(
      this.db,
      tx,
      async (tx) => {
        await options.check?.(this.reader(options.nowMs ?? Date.now(), tx));
        await this.store.insert(
          {
            id,
            accountId,
            name: options.name ?? "",
            prefix: key.slice(0, VISIBLE_CHARS),
            hash: hashKey(key),
            rateLimitPerMin: options.rateLimitPerMin ?? null,
            createdAtMs: Date.now(),
            scopes: options.scopes ?? DEFAULT_SCOPES,
            allowedSkills: options.allowedSkills ?? null,
            expiresAtMs: options.expiresAtMs ?? null,
            metadata: options.metadata ?? {},
          },
          tx,
        );
        if (options.spendLimit) await this.limits.set(id, options.spendLimit, options.nowMs ?? Date.now(), tx);
        return { key, record: (await this.store.byId(id, tx))! };
      },
      { durable: true },
    );
  }

  /**
   * The key with this id, revoked or not. Key ids are UUIDs: an id of any other shape names no key and is never looked
   * up, so that both database engines answer it alike (PostgreSQL refuses bytes such as NUL that SQLite stores).
   */
  async get(id: string): Promise<ApiKeyRecord | undefined> {
    if (!UUID_PATTERN.test(id)) return undefined;
    return this.store.byId(id);
  }

  /** The account's keys, revoked ones included, with last uses not yet written already shown. */
  async listForAccount(accountId: string): Promise<ApiKeyRecord[]> {
    return (await this.store.ofAccount(accountId)).map((record) => {
      const pending = this.lastUsedPending.get(record.id);
      return pending === undefined ? record : { ...record, lastUsedAtMs: pending };
    });
  }

  /**
   * Sets, changes or (with null) removes the spending limit of a live key of `accountId`, durably; false for an
   * unknown, revoked or another account's key. What the next hold of the key is allowed follows at once.
   */
  setSpendLimit(id: string, accountId: string, limit: SpendLimit | null, nowMs = Date.now()): Promise<boolean> {
    return this.db.transaction(
      async (tx) => {
        const record = await this.store.byId(id, tx);
        if (!record || record.accountId !== accountId || record.revokedAtMs !== null) return false;
        await this.limits.set(id, limit, nowMs, tx);
        return true;
      },
      { durable: true },
    );
  }

  /**
   * Changes a live key of `accountId` (revoked, unknown and another account's keys: undefined), in one durable
   * transaction: `plan` reads the key as it stands (its row locked on PostgreSQL, so that two changes of one key queue)
   * and says what to change, or throws to refuse; the row and the spending limit are written together, or neither.
   * Then every replica's authentication cache forgets the key (here at once, the others through `onChanged`), as a
   * revocation does: a narrowed key stops doing what it no longer may within the same window as a revoked one.
   */
  async update(
    id: string,
    accountId: string,
    plan: (current: KeyState, read: KeyReader) => Promise<KeyUpdate> | KeyUpdate,
    nowMs = Date.now(),
  ): Promise<KeyState | undefined> {
    if (!UUID_PATTERN.test(id)) return undefined;
    const updated = await this.db.transaction(
      async (tx) => {
        const record = await this.store.byIdForUpdate(id, tx);
        if (!record || record.accountId !== accountId || record.revokedAtMs !== null) return undefined;
        const read = this.reader(nowMs, tx);
        const change = await plan((await read.state(id))!, read);
        const { spendLimit, ...row } = change;
        if (!(await this.store.update(id, row, tx))) return undefined;
        if (spendLimit !== undefined) await this.limits.set(id, spendLimit, nowMs, tx);
        return read.state(id);
      },
      { durable: true },
    );
    if (updated) {
      this.forget(id);
      this.onChanged?.(id);
    }
    return updated;
  }

  /** A reader of keys as the transaction `tx` sees them, their limits' periods read at `nowMs`. */
  private reader(nowMs: number, tx: Sql): KeyReader {
    return {
      state: async (id) => {
        const record = UUID_PATTERN.test(id) ? await this.store.byId(id, tx) : undefined;
        if (!record) return undefined;
        const spendLimit = (await this.limits.statuses([id], nowMs, tx)).get(id) ?? null;
        return { record, spendLimit };
      },
    };
  }

  /** The spending limits of those of `keyIds` that have one, with what each spent in its period running at `nowMs`. */
  async spendLimits(keyIds: readonly string[], nowMs = Date.now()): Promise<Map<string, SpendLimitStatus>> {
    // A hold counts in its key's spending: one the ledger writer thread answered is read once committed.
    await this.caughtUp();
    return this.limits.statuses(keyIds, nowMs);
  }

  /** Writes the last uses noted since the previous flush, in one transaction (or the caller's `tx`). Returns how many. */
  async flushLastUsed(tx?: Sql): Promise<number> {
    const pending = [...this.lastUsedPending];
    this.lastUsedPending.clear();
    if (pending.length === 0) return 0;
    await within(this.db, tx, async (tx) => {
      for (const [id, atMs] of pending) await this.store.recordLastUse(id, atMs, tx);
    });
    return pending.length;
  }

  private noteUse(record: ApiKeyRecord, nowMs: number): void {
    const noted = this.lastUsedNoted.get(record.id) ?? record.lastUsedAtMs;
    if (noted !== null && noted !== undefined && nowMs - noted < LAST_USED_RESOLUTION_MS) return;
    this.lastUsedNoted.set(record.id, nowMs);
    this.lastUsedPending.set(record.id, nowMs);
  }

  /**
   * Returns the live key record for a presented key, or undefined if it is malformed, unknown, revoked or expired.
   * (`check` tells an expired key from an unknown one.)
   */
  async authenticate(presented: string, nowMs = Date.now()): Promise<ApiKeyRecord | undefined> {
    const checked = await this.check(presented, nowMs);
    return checked.kind === "valid" ? checked.record : undefined;
  }

  /**
   * What a presented key is at `nowMs`: a live key, an expired one (its `expires_at` has passed: read on every use,
   * from the cache too, so a key that expires while cached stops at its expiry, not at the cache's), or nothing the
   * gateway knows (malformed, unknown or revoked).
   */
  async check(presented: string, nowMs = Date.now()): Promise<KeyCheck> {
    if (!looksLikeKey(presented)) return { kind: "invalid" };
    const hash = hashKey(presented);
    const cached = this.cache.get(hash);
    if (cached && cached.expiresAtMs > nowMs) return this.checked(cached.record, nowMs);
    const forgetsBefore = this.forgets;
    const record = await this.store.byHash(hash);
    if (!record || record.revokedAtMs !== null) {
      this.cache.delete(hash);
      return { kind: "invalid" };
    }
    // A forget while the row was being read may be this key's revocation: no caching what may predate it.
    if (this.cacheTtlMs > 0 && this.forgets === forgetsBefore) this.cache.set(hash, { record, expiresAtMs: nowMs + this.cacheTtlMs });
    else this.cache.delete(hash);
    return this.checked(record, nowMs);
  }

  /** A live key's use is noted; an expired key's is not (it authenticated nothing). */
  private checked(record: ApiKeyRecord, nowMs: number): KeyCheck {
    if (isExpired(record, nowMs)) return { kind: "expired", record };
    this.noteUse(record, nowMs);
    return { kind: "valid", record };
  }

  /**
   * The key with this id as a credential another one stands for (an OAuth access token of the hosted MCP server's,
   * ./mcp-oauth.ts): live, expired, or nothing (unknown or revoked), read from the table (never the cache, so a
   * revocation anywhere ends it at once); a live key's use is noted as any authentication's.
   */
  async checkById(id: string, nowMs = Date.now()): Promise<KeyCheck> {
    const record = await this.get(id);
    if (!record || record.revokedAtMs !== null) return { kind: "invalid" };
    return this.checked(record, nowMs);
  }

  /**
   * A live key of `accountId` picked by its id, for a call the account's own dashboard makes
   * with it (the "try it" form): counted as a use of the key like any call. Undefined for an
   * unknown, revoked or another account's key.
   */
  async useOwn(id: string, accountId: string, nowMs = Date.now()): Promise<ApiKeyRecord | undefined> {
    const record = await this.get(id);
    if (!record || record.accountId !== accountId || record.revokedAtMs !== null) return undefined;
    this.noteUse(record, nowMs);
    return record;
  }

  /**
   * Revokes a key, durably, and forgets it here; returns false if it was unknown or already
   * revoked. Other gateway replicas still answer from their caches until their TTL ends,
   * unless told to `forget(id)` it (`onRevoked`). `check` runs first in the revocation's transaction, on the key as it
   * stands (its row locked on PostgreSQL), and may throw to refuse it.
   */
  async revoke(id: string, options: { check?: (current: KeyState, read: KeyReader) => Promise<void> } = {}): Promise<boolean> {
    const nowMs = Date.now();
    const changed = await this.db.transaction(
      async (tx) => {
        if (options.check) {
          const record = await this.store.byIdForUpdate(id, tx);
          if (!record || record.revokedAtMs !== null) return false;
          const read = this.reader(nowMs, tx);
          await options.check((await read.state(id))!, read);
        }
        return this.store.revoke(id, nowMs, tx);
      },
      { durable: true },
    );
    this.forget(id);
    if (changed) this.onRevoked?.(id);
    return changed;
  }

  /**
   * Told about each key this replica revoked, once the revocation is durable: the composition root
   * announces it to the other replicas (a `key_revoked` message on Redis), which `forget(id)` it.
   */
  onRevoked?: (keyId: string) => void;

  /**
   * Told about each key this replica changed (`update`), once the change is durable: the composition root announces
   * it to the other replicas (a `key_changed` message on Redis), which `forget(id)` it, so that none goes on
   * authenticating it from its cache with what it could do before.
   */
  onChanged?: (keyId: string) => void;

  /**
   * Drops the key `keyId` from the authentication cache, so its next use reads the table: for a
   * revocation made elsewhere (another replica's `key_revoked` message). Cheap and harmless for a
   * key that is not cached.
   */
  forget(keyId: string): void {
    this.forgets++;
    for (const [hash, entry] of this.cache) if (entry.record.id === keyId) this.cache.delete(hash);
    this.lastUsedNoted.delete(keyId);
  }

  /** Drops every cached key (when revocations may have been missed, e.g. after a lost connection to the others). */
  forgetAll(): void {
    this.forgets++;
    this.cache.clear();
  }
}
