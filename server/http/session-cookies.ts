import { timingSafeEqual } from "node:crypto";
import type { NextFunction, Request, Response } from "express";
import type { LiveSession, Session, Sessions } from "../identity/sessions";
import { ApiError } from "./errors";

/**
 * The HTTP half of dashboard sessions (the store and its rules are server/identity/sessions.ts):
 * a session is its token in an httpOnly, SameSite=Lax cookie, with a CSRF token beside it that
 * state-changing requests must echo in the X-CSRF-Token header (double submit: a page of another
 * site can make the browser send the cookie, but cannot read the CSRF cookie).
 *
 * With Secure cookies (COOKIE_SECURE, which follows an https PUBLIC_URL) both names carry the __Host- prefix: a
 * browser then accepts them only from this origin, over https, for the whole site, and never from a sibling
 * subdomain or a plain-http answer, which could otherwise plant their own session cookie (signing a person into
 * someone else's account). Such a gateway reads only the prefixed names.
 */
export const SESSION_COOKIE = "sg_session";
export const CSRF_COOKIE = "sg_csrf";
export const CSRF_HEADER = "x-csrf-token";
/** The prefix of cookie names a browser accepts only when Secure, with Path=/ and no Domain. */
export const HOST_PREFIX = "__Host-";

declare module "express-serve-static-core" {
  interface Request {
    session?: Session;
  }
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Locals {
      /** The gateway's cookies are Secure (config.secureCookies): set once by the app (./app.ts). */
      secureCookies?: boolean;
    }
  }
}

/** The session and CSRF cookies' names: __Host- prefixed when the cookies are Secure. */
export function sessionCookieNames(secure: boolean): { session: string; csrf: string } {
  return secure
    ? { session: `${HOST_PREFIX}${SESSION_COOKIE}`, csrf: `${HOST_PREFIX}${CSRF_COOKIE}` }
    : { session: SESSION_COOKIE, csrf: CSRF_COOKIE };
}

/** Whether the app serving `req` sets Secure cookies. */
const secureFor = (req: Request): boolean => req.app?.locals.secureCookies === true;

/** Opens a session for the account (after a sign-in) and sets its cookies on the response. */
export async function openSession(sessions: Sessions, res: Response, accountId: string, secureCookies: boolean): Promise<Session> {
  const { token, csrfToken, expiresAtMs } = await sessions.open(accountId);
  const names = sessionCookieNames(secureCookies);
  // Path=/ and no Domain: what the __Host- prefix requires, and what a session needs anyway.
  const base = { sameSite: "lax" as const, secure: secureCookies, path: "/", expires: new Date(expiresAtMs) };
  res.cookie(names.session, token, { ...base, httpOnly: true });
  res.cookie(names.csrf, csrfToken, { ...base, httpOnly: false });
  return { accountId, csrfToken, expiresAtMs };
}

/** The live session a request's cookie names, if any. */
export async function readSession(sessions: Sessions, req: Request): Promise<LiveSession | undefined> {
  const token = readCookie(req.headers.cookie, sessionCookieNames(secureFor(req)).session);
  return token ? sessions.find(token) : undefined;
}

/** Ends the request's session and clears its cookies. */
export async function closeSession(sessions: Sessions, req: Request, res: Response): Promise<void> {
  const session = await readSession(sessions, req);
  if (session) await sessions.revoke(session.tokenHash);
  const secure = secureFor(req);
  const names = sessionCookieNames(secure);
  // A browser takes a __Host- cookie's removal only with the attributes it was set with.
  res.clearCookie(names.session, { path: "/", secure });
  res.clearCookie(names.csrf, { path: "/", secure });
}

/** Whether the request echoes the session's CSRF token in X-CSRF-Token (compared in constant time). */
export function csrfMatches(req: Request, session: Session): boolean {
  const given = Buffer.from(String(req.headers[CSRF_HEADER] ?? ""));
  const expected = Buffer.from(session.csrfToken);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Express middleware: a live session is required (401 otherwise), and a state-changing
 * request must carry the session's CSRF token in X-CSRF-Token (403 otherwise).
 */
export function requireSession(sessions: Sessions) {
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    const session = await readSession(sessions, req);
    if (!session) throw new ApiError("unauthorized", "Sign in first: this needs a dashboard session.");
    if (!["GET", "HEAD", "OPTIONS"].includes(req.method) && !csrfMatches(req, session)) throw csrfFailed();
    req.session = { accountId: session.accountId, csrfToken: session.csrfToken, expiresAtMs: session.expiresAtMs };
    next();
  };
}

/** The refusal of a state-changing request made with a session but without its CSRF token. */
export function csrfFailed(): ApiError {
  return new ApiError("csrf_failed", "Missing or wrong X-CSRF-Token header (copy it from the sg_csrf cookie, __Host-sg_csrf over https).");
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
