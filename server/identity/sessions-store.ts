import type { Db } from "../db/db";

/** How a person proves who they are: each identity is one (provider, subject) pair. */
export type IdentityProvider = "siwe" | "email" | "github" | "google";

/** A stored session, looked up by its token's SHA-256. */
export interface SessionRecord {
  accountId: string;
  csrfToken: string;
  expiresAtMs: number;
  revokedAtMs: number | null;
}

/** An identity (a provider and its subject) and the account it signs in to. */
export interface IdentityRecord {
  provider: IdentityProvider;
  subject: string;
  createdAtMs: number;
}

/**
 * The `sessions` and `identities` tables (./sessions.ts). Writes are plain statements: the
 * caller runs them inside its ledger operation (`commit.run`), so a sign-in's new account and
 * its identity land in one transaction.
 */
export interface SessionsStore {
  insertSession(s: { tokenHash: string; accountId: string; csrfToken: string; createdAtMs: number; expiresAtMs: number }): void;
  sessionByTokenHash(tokenHash: string): SessionRecord | undefined;
  /** Marks a live session revoked; false if it was unknown or revoked already. */
  revokeSession(tokenHash: string, atMs: number): boolean;
  /** Deletes expired and revoked sessions; returns how many. */
  purgeSessions(nowMs: number): number;
  identityOwner(provider: IdentityProvider, subject: string): string | undefined;
  insertIdentity(provider: IdentityProvider, subject: string, accountId: string, createdAtMs: number): void;
  identitiesOf(accountId: string): IdentityRecord[];
}

/** SessionsStore on the gateway's SQLite database. */
export class SqliteSessionsStore implements SessionsStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      insert: db.prepare("INSERT INTO sessions (token_hash, account_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?)"),
      get: db.prepare("SELECT account_id, csrf_token, expires_at, revoked_at FROM sessions WHERE token_hash = ?"),
      revoke: db.prepare("UPDATE sessions SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL"),
      purgeExpired: db.prepare("DELETE FROM sessions WHERE expires_at <= ?"),
      purgeRevoked: db.prepare("DELETE FROM sessions WHERE revoked_at IS NOT NULL"),
      identity: db.prepare("SELECT account_id FROM identities WHERE provider = ? AND subject = ?").pluck(),
      insertIdentity: db.prepare("INSERT INTO identities (provider, subject, account_id, created_at) VALUES (?, ?, ?, ?)"),
      identitiesOf: db.prepare("SELECT provider, subject, created_at FROM identities WHERE account_id = ? ORDER BY created_at"),
    };
  }

  insertSession(s: { tokenHash: string; accountId: string; csrfToken: string; createdAtMs: number; expiresAtMs: number }): void {
    this.stmt.insert.run(s.tokenHash, s.accountId, s.csrfToken, s.createdAtMs, s.expiresAtMs);
  }

  sessionByTokenHash(tokenHash: string): SessionRecord | undefined {
    const row = this.stmt.get.get(tokenHash) as
      { account_id: string; csrf_token: string; expires_at: bigint; revoked_at: bigint | null } | undefined;
    if (!row) return undefined;
    return {
      accountId: row.account_id,
      csrfToken: row.csrf_token,
      expiresAtMs: Number(row.expires_at),
      revokedAtMs: row.revoked_at === null ? null : Number(row.revoked_at),
    };
  }

  revokeSession(tokenHash: string, atMs: number): boolean {
    return this.stmt.revoke.run(atMs, tokenHash).changes === 1;
  }

  purgeSessions(nowMs: number): number {
    return this.stmt.purgeExpired.run(nowMs).changes + this.stmt.purgeRevoked.run().changes;
  }

  identityOwner(provider: IdentityProvider, subject: string): string | undefined {
    return this.stmt.identity.get(provider, subject) as string | undefined;
  }

  insertIdentity(provider: IdentityProvider, subject: string, accountId: string, createdAtMs: number): void {
    this.stmt.insertIdentity.run(provider, subject, accountId, createdAtMs);
  }

  identitiesOf(accountId: string): IdentityRecord[] {
    return (this.stmt.identitiesOf.all(accountId) as { provider: IdentityProvider; subject: string; created_at: bigint }[]).map((r) => ({
      provider: r.provider,
      subject: r.subject,
      createdAtMs: Number(r.created_at),
    }));
  }
}
