import { createHash, randomBytes } from "node:crypto";
import { type Database, isUniqueViolation } from "../db/sql";
import type { Ledger } from "../ledger/ledger";
import { type IdentityProvider, type IdentityRecord, SessionsStore } from "./sessions-store";

const SESSION_TTL_MS = 7 * 24 * 3_600_000;

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
  private readonly db: Database;
  private readonly store: SessionsStore;

  constructor(
    /** New accounts are opened in its books, in the sign-in's own transaction; its database holds the sessions. */
    private readonly ledger: Ledger,
    private readonly options: { ttlMs?: number } = {},
  ) {
    this.db = ledger.db;
    this.store = new SessionsStore(ledger.db);
  }

  /**
   * Signs a person in with a verified identity: the account it belongs to, or a new account
   * on first use. With `linkTo` (someone already signed in), a new identity joins that
   * account instead, so one person can sign in several ways. Durable before it resolves.
   *
   * The new account and its identity are one transaction. Two first sign-ins with one identity
   * at once (two replicas, or two tabs) both find it unowned; the identity's primary key lets
   * one insert it and the other's whole transaction (its account too) is undone, and that one
   * is run again, now finding the identity's owner.
   */
  async signIn(provider: IdentityProvider, subject: string, options: { name?: string; linkTo?: string } = {}): Promise<SignInResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.db.transaction(
          async (tx): Promise<SignInResult> => {
            const owner = await this.store.identityOwner(provider, subject, tx);
            if (owner !== undefined) {
              if (options.linkTo !== undefined && owner !== options.linkTo) return { ok: false, reason: "identity_taken" };
              return { ok: true, accountId: owner, created: false, linked: false };
            }
            let accountId = options.linkTo;
            let created = false;
            if (accountId === undefined) {
              accountId = (await this.ledger.ensureAccount({ kind: "user", name: options.name ?? subject }, tx)).id;
              created = true;
            }
            await this.store.insertIdentity(provider, subject, accountId, Date.now(), tx);
            return { ok: true, accountId, created, linked: !created };
          },
          { durable: true },
        );
      } catch (error) {
        if (attempt >= 2 || !isUniqueViolation(error)) throw error;
      }
    }
  }

  /** The account an identity signs in to, if it belongs to one. */
  ownerOf(provider: IdentityProvider, subject: string): Promise<string | undefined> {
    return this.store.identityOwner(provider, subject);
  }

  identitiesOf(accountId: string): Promise<IdentityRecord[]> {
    return this.store.identitiesOf(accountId);
  }

  /** Creates a session for the account, durably: its token (shown to the browser only, as a cookie) and CSRF token. */
  async issue(accountId: string): Promise<Session & { token: string }> {
    const token = randomBytes(32).toString("base64url");
    const csrfToken = randomBytes(24).toString("base64url");
    const now = Date.now();
    const expiresAtMs = now + (this.options.ttlMs ?? SESSION_TTL_MS);
    const session = { tokenHash: hash(token), accountId, csrfToken, createdAtMs: now, expiresAtMs };
    await this.db.transaction((tx) => this.store.insertSession(session, tx), { durable: true });
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
  async find(token: string): Promise<LiveSession | undefined> {
    const tokenHash = hash(token);
    const row = await this.store.sessionByTokenHash(tokenHash);
    if (!row || row.revokedAtMs !== null || row.expiresAtMs <= Date.now()) return undefined;
    return { accountId: row.accountId, csrfToken: row.csrfToken, expiresAtMs: row.expiresAtMs, tokenHash };
  }

  /** Ends one session by its token's hash (a browser switching accounts leaves its old one behind). */
  async revoke(tokenHash: string): Promise<void> {
    await this.store.revokeSession(tokenHash, Date.now());
  }

  /** Deletes sessions that can no longer be used (expired, or ended): nothing reads them again. */
  purgeExpired(nowMs = Date.now()): Promise<number> {
    return this.store.purgeSessions(nowMs);
  }
}
