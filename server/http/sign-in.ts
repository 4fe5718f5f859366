import type { NextFunction, Request, Response } from "express";
import type { LiveSession, Session, Sessions } from "../identity/sessions";
import type { Config } from "../config";
import { ApiError } from "./errors";
import { publicBase } from "./public-url";
import { csrfFailed, csrfMatches, openSession, readSession } from "./session-cookies";

/**
 * The HTTP edge every sign-in shares (e-mail, SIWE, GitHub, Google): which requests may
 * sign in at all, and what a sign-in does to a session the browser already has.
 *
 * A sign-in POST is refused unless it comes from the dashboard's own pages and is JSON.
 * Another site can make a browser send a POST, with the browser's cookies, but only as a
 * "simple" request (a form, or text/plain): it cannot set Content-Type: application/json
 * without a CORS preflight the gateway never answers, and the browser tells where the
 * request comes from in Origin and Sec-Fetch-Site, which a page cannot forge.
 */

/** Sec-Fetch-Site values a browser sends for a navigation a person made here: from this origin, or typed/bookmarked. */
const OWN_NAVIGATION = new Set(["same-origin", "none"]);

/**
 * Whether the browser says the request comes from the dashboard's origin. Sec-Fetch-Site,
 * when sent, is the browser's own word (same-origin, and nothing else, for a POST); without
 * it, Origin must be the dashboard's (PUBLIC_URL, or this server's own address). A client
 * that is not a browser sends `Origin: <the dashboard's origin>` itself. Neither header:
 * refused, never assumed to be fine.
 */
function sameOrigin(config: Config, req: Request): boolean {
  const site = req.get("sec-fetch-site");
  if (site !== undefined) return site === "same-origin";
  return req.get("origin") === new URL(publicBase(config, req)).origin;
}

/**
 * Middleware for every sign-in POST, run before the body is read: the same-origin check
 * (403 origin_refused), then a JSON body (415 unsupported_media_type).
 */
export function signInPost(config: Config) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    if (!sameOrigin(config, req)) {
      const origin = new URL(publicBase(config, req)).origin;
      throw new ApiError(
        "origin_refused",
        `Sign-in requests are taken only from the dashboard's own pages (a client that is not a browser sends the header Origin: ${origin}).`,
      );
    }
    if (!req.is("application/json"))
      throw new ApiError("unsupported_media_type", "Send the body as JSON, with Content-Type: application/json.");
    next();
  };
}

/**
 * Whether a GET that starts a sign-in (GitHub, Google) is a navigation a person made on
 * this site or typed in: not a link or redirect from another site, which could otherwise
 * run a sign-in in a visitor's browser without them meaning to. Browsers without
 * Sec-Fetch-Site pass; the state cookie still binds the sign-in to this browser.
 */
export function ownNavigation(req: Request): boolean {
  const site = req.get("sec-fetch-site");
  return site === undefined || OWN_NAVIGATION.has(site);
}

/**
 * The browser's live session, if any. A sign-in POST made in a session must carry that
 * session's CSRF token (403 otherwise), as every state-changing request of a session does.
 */
export async function browserSession(sessions: Sessions, req: Request): Promise<LiveSession | undefined> {
  const session = await readSession(sessions, req);
  if (session && !csrfMatches(req, session)) throw csrfFailed();
  return session;
}

/**
 * Gives the browser a session for `accountId` once a sign-in has been allowed: keeps the one
 * it has when that is already this account's; otherwise opens one (cookies) and, when the
 * browser was signed in to another account (an explicit switch), ends the old one.
 */
export async function finishSignIn(
  sessions: Sessions,
  res: Response,
  current: LiveSession | undefined,
  accountId: string,
  /** SECURE_COOKIES: the cookies carry `Secure`. */
  secureCookies: boolean,
): Promise<{ session: Session; switched: boolean }> {
  if (current?.accountId === accountId) return { session: current, switched: false };
  const session = await openSession(sessions, res, accountId, secureCookies);
  if (current) await sessions.revoke(current.tokenHash);
  return { session, switched: current !== undefined };
}

/** A browser navigating (Accept prefers HTML) rather than a client reading JSON. */
export function wantsPage(req: Request): boolean {
  return req.accepts(["json", "html"]) === "html";
}
