import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { NextFunction, Request, Response } from "express";
import type { Ledger } from "../ledger/ledger";
import { ApiError } from "../http/errors";
import type { IdentityProvider, SessionsStore } from "./sessions-store";

export const SESSION_COOKIE = "sg_session";
export const CSRF_COOKIE = "sg_csrf";
export const CSRF_HEADER = "x-csrf-token";
const SESSION_TTL_MS = 7 * 24 * 3_600_000;

export interface Session {
  accountId: string;
  csrfToken: string;
  expiresAtMs: number;
}

/** A session as read from a request's cookie: with its token's hash, to revoke it by. */
export type LiveSession = Session & { tokenHash: string };

declare module "express-serve-static-core" {
  interface Request {
    session?: Session;
  }
}

const hash = (token: string) => createHash("sha256").update(token).digest("hex");

export type SignInResult =
  | { ok: true; accountId: string; created: boolean; linked: boolean }
  /** The identity already belongs to another account: it cannot be linked to this one. */
  | { ok: false; reason: "identity_taken" };

/**
 * Dashboard sessions and the identities that open them. A session is a random token in an
 * httpOnly, SameSite=Lax cookie (only its SHA-256 is stored), with a CSRF token beside it
 * that state-changing requests must echo in the X-CSRF-Token header (double submit: a page
 * of another site can make the browser send the cookie, but cannot read the CSRF cookie).
 */
export class Sessions {
  constructor(
    private readonly store: SessionsStore,
    private readonly ledger: Ledger,
    private readonly options: { secureCookies: boolean; ttlMs?: number },
  ) {}

  /**
   * Signs a person in with a verified identity: the account it belongs to, or a new account
   * on first use. With `linkTo` (someone already signed in), a new identity joins that
   * account instead, so one person can sign in several ways.
   */
  signIn(provider: IdentityProvider, subject: string, options: { name?: string; linkTo?: string } = {}): SignInResult {
    return this.ledger.commit.run(() => {
      const owner = this.store.identityOwner(provider, subject);
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
      this.store.insertIdentity(provider, subject, accountId, Date.now());
      return { ok: true as const, accountId, created, linked: !created };
    });
  }

  /** The account an identity signs in to, if it belongs to one. */
  ownerOf(provider: IdentityProvider, subject: string): string | undefined {
    return this.store.identityOwner(provider, subject);
  }

  identitiesOf(accountId: string): { provider: IdentityProvider; subject: string; createdAtMs: number }[] {
    return this.store.identitiesOf(accountId);
  }

  /** Creates a session for the account: its token (shown to the browser only, as a cookie) and CSRF token. */
  async issue(accountId: string): Promise<Session & { token: string }> {
    const token = randomBytes(32).toString("base64url");
    const csrfToken = randomBytes(24).toString("base64url");
    const now = Date.now();
    const expiresAtMs = now + (this.options.ttlMs ?? SESSION_TTL_MS);
    this.ledger.commit.run(() => this.store.insertSession({ tokenHash: hash(token), accountId, csrfToken, createdAtMs: now, expiresAtMs }));
    await this.ledger.commit.durable();
    return { accountId, csrfToken, expiresAtMs, token };
  }

  /**
   * Runs after every sign-in, before the session is handed out: the gateway gives the account
   * its embedded wallet here. A failure is the hook's to report; it does not stop the sign-in.
   */
  onOpen: ((accountId: string) => Promise<void>) | undefined;

  /** Opens a session for the account and sets its cookies on the response. */
  async open(res: Response, accountId: string): Promise<Session> {
    await this.onOpen?.(accountId);
    const { token, csrfToken, expiresAtMs } = await this.issue(accountId);
    const base = { sameSite: "lax" as const, secure: this.options.secureCookies, path: "/", expires: new Date(expiresAtMs) };
    res.cookie(SESSION_COOKIE, token, { ...base, httpOnly: true });
    res.cookie(CSRF_COOKIE, csrfToken, { ...base, httpOnly: false });
    return { accountId, csrfToken, expiresAtMs };
  }

  /** The live session a request's cookie names, if any. */
  read(req: Request): LiveSession | undefined {
    const token = readCookie(req.headers.cookie, SESSION_COOKIE);
    if (!token) return undefined;
    const tokenHash = hash(token);
    const row = this.store.sessionByTokenHash(tokenHash);
    if (!row || row.revokedAtMs !== null || row.expiresAtMs <= Date.now()) return undefined;
    return { accountId: row.accountId, csrfToken: row.csrfToken, expiresAtMs: row.expiresAtMs, tokenHash };
  }

  /** Ends the request's session and clears its cookies. */
  close(req: Request, res: Response): void {
    const session = this.read(req);
    if (session) this.revoke(session.tokenHash);
    res.clearCookie(SESSION_COOKIE, { path: "/" });
    res.clearCookie(CSRF_COOKIE, { path: "/" });
  }

  /** Ends one session by its token's hash (a browser switching accounts leaves its old one behind). */
  revoke(tokenHash: string): void {
    this.ledger.commit.run(() => this.store.revokeSession(tokenHash, Date.now()));
  }

  /** Deletes sessions that can no longer be used (expired, or ended): nothing reads them again. */
  purgeExpired(nowMs = Date.now()): number {
    return this.ledger.commit.run(() => this.store.purgeSessions(nowMs));
  }

  /** Whether the request echoes the session's CSRF token in X-CSRF-Token (compared in constant time). */
  csrfMatches(req: Request, session: Session): boolean {
    const given = Buffer.from(String(req.headers[CSRF_HEADER] ?? ""));
    const expected = Buffer.from(session.csrfToken);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  /**
   * Express middleware: a live session is required (401 otherwise), and a state-changing
   * request must carry the session's CSRF token in X-CSRF-Token (403 otherwise).
   */
  require() {
    return (req: Request, _res: Response, next: NextFunction): void => {
      const session = this.read(req);
      if (!session) throw new ApiError("unauthorized", "Sign in first: this needs a dashboard session.");
      if (!["GET", "HEAD", "OPTIONS"].includes(req.method) && !this.csrfMatches(req, session)) throw csrfFailed();
      req.session = { accountId: session.accountId, csrfToken: session.csrfToken, expiresAtMs: session.expiresAtMs };
      next();
    };
  }
}

/** The refusal of a state-changing request made with a session but without its CSRF token. */
export function csrfFailed(): ApiError {
  return new ApiError("csrf_failed", "Missing or wrong X-CSRF-Token header (copy it from the sg_csrf cookie).");
}

/** One cookie's value from a Cookie header (no dependency needed for reading). */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}
