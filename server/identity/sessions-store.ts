import { type Database, type Sql, within } from "../db/sql";

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
 * The `sessions` and `identities` tables (./sessions.ts). Each write is one statement: given a
 * `tx` it joins the caller's transaction (a sign-in's new account and its identity land in one),
 * without one it commits on its own.
 */
export class SessionsStore {
  constructor(private readonly db: Database) {}

  insertSession(
    s: { tokenHash: string; accountId: string; csrfToken: string; createdAtMs: number; expiresAtMs: number },
    tx?: Sql,
  ): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run("INSERT INTO sessions (token_hash, account_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?)", [
        s.tokenHash,
        s.accountId,
        s.csrfToken,
        s.createdAtMs,
        s.expiresAtMs,
      ]);
    });
  }

  async sessionByTokenHash(tokenHash: string, sql: Sql = this.db): Promise<SessionRecord | undefined> {
    const row = await sql.one<{ account_id: string; csrf_token: string; expires_at: bigint; revoked_at: bigint | null }>(
      "SELECT account_id, csrf_token, expires_at, revoked_at FROM sessions WHERE token_hash = ?",
      [tokenHash],
    );
    if (!row) return undefined;
    return {
      accountId: row.account_id,
      csrfToken: row.csrf_token,
      expiresAtMs: Number(row.expires_at),
      revokedAtMs: row.revoked_at === null ? null : Number(row.revoked_at),
    };
  }

  /** Marks a live session revoked; false if it was unknown or revoked already. */
  revokeSession(tokenHash: string, atMs: number, tx?: Sql): Promise<boolean> {
    return within(
      this.db,
      tx,
      async (tx) =>
        (await tx.run("UPDATE sessions SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL", [atMs, tokenHash])) === 1,
    );
  }

  /** Deletes expired and revoked sessions; returns how many. */
  purgeSessions(nowMs: number, tx?: Sql): Promise<number> {
    return within(this.db, tx, async (tx) => {
      const expired = await tx.run("DELETE FROM sessions WHERE expires_at <= ?", [nowMs]);
      return expired + (await tx.run("DELETE FROM sessions WHERE revoked_at IS NOT NULL"));
    });
  }

  identityOwner(provider: IdentityProvider, subject: string, sql: Sql = this.db): Promise<string | undefined> {
    return sql.value<string>("SELECT account_id FROM identities WHERE provider = ? AND subject = ?", [provider, subject]);
  }

  /** Adds an identity; throws a unique violation (isUniqueViolation) if it belongs to an account already. */
  insertIdentity(provider: IdentityProvider, subject: string, accountId: string, createdAtMs: number, tx?: Sql): Promise<void> {
    return within(this.db, tx, async (tx) => {
      await tx.run("INSERT INTO identities (provider, subject, account_id, created_at) VALUES (?, ?, ?, ?)", [
        provider,
        subject,
        accountId,
        createdAtMs,
      ]);
    });
  }

  async identitiesOf(accountId: string, sql: Sql = this.db): Promise<IdentityRecord[]> {
    const rows = await sql.all<{ provider: IdentityProvider; subject: string; created_at: bigint }>(
      "SELECT provider, subject, created_at FROM identities WHERE account_id = ? ORDER BY created_at, provider, subject",
      [accountId],
    );
    return rows.map((r) => ({ provider: r.provider, subject: r.subject, createdAtMs: Number(r.created_at) }));
  }
}
