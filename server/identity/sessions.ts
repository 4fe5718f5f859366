import { createHash, randomBytes } from "node:crypto";
import type { Db } from "../db/db";
import type { Ledger } from "../ledger/ledger";

const SESSION_TTL_MS = 7 * 24 * 3_600_000;

export type IdentityProvider = "siwe" | "email" | "github" | "google";

export interface Session {
  accountId: string;
  csrfToken: string;
  expiresAtMs: number;
}

/** A session as found by its token: with its token's hash, to revoke it by. */
export type LiveSession = Session & { tokenHash: string };

const hash = (token: string) => createHash("sha256").update(token).digest("hex");

export type SignInResult =
  | { ok: true; accountId: string; created: boolean; linked: boolean }
  /** The identity already belongs to another account: it cannot be linked to this one. */
  | { ok: false; reason: "identity_taken" };

/**
 * Dashboard sessions and the identities that open them: the store and its rules. A session is
 * a random token (only its SHA-256 is stored) with a CSRF token beside it. How a browser holds
 * them (cookies) and when a request must echo the CSRF token is the HTTP layer's business:
 * server/http/session-cookies.ts.
 */
export class Sessions {
  private readonly stmt;

  constructor(
    db: Db,
    private readonly ledger: Ledger,
    private readonly options: { ttlMs?: number } = {},
  ) {
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

  /**
   * Signs a person in with a verified identity: the account it belongs to, or a new account
   * on first use. With `linkTo` (someone already signed in), a new identity joins that
   * account instead, so one person can sign in several ways.
   */
  signIn(provider: IdentityProvider, subject: string, options: { name?: string; linkTo?: string } = {}): SignInResult {
    return this.ledger.commit.run(() => {
      const owner = this.stmt.identity.get(provider, subject) as string | undefined;
      if (owner !== undefined) {
        if (options.linkTo !== undefined && owner !== options.linkTo) return { ok: false as const, reason: "identity_taken" as const };
        return { ok: true as const, accountId: owner, created: false, linked: false };
      }
      let accountId = options.linkTo;
      let created = false;
      if (accountId === undefined) {
        accountId = this.ledger.ensureAccount({ kind: "user", name: options.name ?? subject }).id;
        created = true;
      }
      this.stmt.insertIdentity.run(provider, subject, accountId, Date.now());
      return { ok: true as const, accountId, created, linked: !created };
    });
  }

  /** The account an identity signs in to, if it belongs to one. */
  ownerOf(provider: IdentityProvider, subject: string): string | undefined {
    return this.stmt.identity.get(provider, subject) as string | undefined;
  }

  identitiesOf(accountId: string): { provider: IdentityProvider; subject: string; createdAtMs: number }[] {
    return (this.stmt.identitiesOf.all(accountId) as { provider: IdentityProvider; subject: string; created_at: bigint }[]).map((r) => ({
      provider: r.provider,
      subject: r.subject,
      createdAtMs: Number(r.created_at),
    }));
  }

  /** Creates a session for the account: its token (shown to the browser only, as a cookie) and CSRF token. */
  async issue(accountId: string): Promise<Session & { token: string }> {
    const token = randomBytes(32).toString("base64url");
    const csrfToken = randomBytes(24).toString("base64url");
    const now = Date.now();
    const expiresAtMs = now + (this.options.ttlMs ?? SESSION_TTL_MS);
    this.ledger.commit.run(() => this.stmt.insert.run(hash(token), accountId, csrfToken, now, expiresAtMs));
    await this.ledger.commit.durable();
    return { accountId, csrfToken, expiresAtMs, token };
  }

  /**
   * Runs after every sign-in, before the session is handed out: the gateway gives the account
   * its embedded wallet here. A failure is the hook's to report; it does not stop the sign-in.
   */
  onOpen: ((accountId: string) => Promise<void>) | undefined;

  /** Opens a session for the account after a sign-in: runs onOpen, then issues it. */
  async open(accountId: string): Promise<Session & { token: string }> {
    await this.onOpen?.(accountId);
    return this.issue(accountId);
  }

  /** The live session a token names, if any (not expired, not ended). */
  find(token: string): LiveSession | undefined {
    const tokenHash = hash(token);
    const row = this.stmt.get.get(tokenHash) as
      { account_id: string; csrf_token: string; expires_at: bigint; revoked_at: bigint | null } | undefined;
    if (!row || row.revoked_at !== null || Number(row.expires_at) <= Date.now()) return undefined;
    return { accountId: row.account_id, csrfToken: row.csrf_token, expiresAtMs: Number(row.expires_at), tokenHash };
  }

  /** Ends one session by its token's hash (a browser switching accounts leaves its old one behind). */
  revoke(tokenHash: string): void {
    this.ledger.commit.run(() => this.stmt.revoke.run(Date.now(), tokenHash));
  }

  /** Deletes sessions that can no longer be used (expired, or ended): nothing reads them again. */
  purgeExpired(nowMs = Date.now()): number {
    return this.ledger.commit.run(() => this.stmt.purgeExpired.run(nowMs).changes + this.stmt.purgeRevoked.run().changes);
  }
}
