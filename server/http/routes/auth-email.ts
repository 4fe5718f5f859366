import { timingSafeEqual } from "node:crypto";
import express, { type Request, type Response, type Router } from "express";
import { jsonBody } from "../json-body";
import { type MagicLinks, normalizeEmail } from "../../accounts/email";
import { CSRF_HEADER, type Sessions } from "../../accounts/sessions";
import type { Config } from "../../config";
import { dataEnvelope } from "../envelope";
import { ApiError } from "../errors";
import { publicBase } from "../public-url";

/** The one answer to POST /auth/email/start, whoever the address belongs to. */
const START_ANSWER = dataEnvelope({ sent: true, message: "If this address can receive mail, a sign-in link is on its way. It works once, for a short while." });

/**
 * E-mail magic links:
 *   POST /auth/email/start {email}        → 200, always the same answer (no account enumeration)
 *   GET  /auth/email/callback?token=…     → the link in the mail: signs in, redirects to /
 *   POST /auth/email/verify {token}       → the same for API clients, answering JSON
 * Asked for from a signed-in session (with its X-CSRF-Token), the link adds the address to
 * that account, provided it is opened in that same session.
 */
export function emailAuthRoutes(deps: { config: Config; sessions: Sessions; links: MagicLinks }): Router {
  const router = express.Router();
  const json = jsonBody(2_048);

  router.post("/auth/email/start", json, async (req, res) => {
    const email = normalizeEmail((req.body as { email?: unknown } | undefined)?.email);
    if (!email) throw new ApiError("invalid_input", "email must be an e-mail address.");
    const base = publicBase(deps.config, req);
    await deps.links.send(email, (token) => `${base}/auth/email/callback?token=${encodeURIComponent(token)}`, linkingAccount(deps.sessions, req));
    res.json(START_ANSWER);
  });

  const signIn = async (req: Request, res: Response, token: unknown) => {
    const consumed = deps.links.consume(String(token ?? ""));
    if (!consumed.ok) throw new ApiError("sign_in_failed", "This sign-in link is not valid: it was used already, has expired, or was mistyped. Ask for a new one.");
    // Joining an account needs the very session that asked: a link forwarded to, or
    // planted on, someone else must not tie their address to the asker's account.
    const current = deps.sessions.read(req)?.accountId;
    const linkTo = consumed.linkTo !== undefined && consumed.linkTo === current ? current : undefined;
    const result = deps.sessions.signIn("email", consumed.email, { name: consumed.email, linkTo });
    if (!result.ok) throw new ApiError("identity_taken", "This address already signs in to another account.");
    await deps.sessions.open(res, result.accountId);
    return result;
  };

  router.get("/auth/email/callback", async (req, res) => {
    await signIn(req, res, req.query.token);
    res.redirect(303, "/");
  });

  router.post("/auth/email/verify", json, async (req, res) => {
    const result = await signIn(req, res, (req.body as { token?: unknown } | undefined)?.token);
    res.json(dataEnvelope({ account_id: result.accountId, created: result.created, linked: result.linked }));
  });

  return router;
}

/** The signed-in account asking for a link to join it: only with the session's CSRF token. */
function linkingAccount(sessions: Sessions, req: Request): string | undefined {
  const session = sessions.read(req);
  if (!session) return undefined;
  const given = Buffer.from(String(req.headers[CSRF_HEADER] ?? ""));
  const expected = Buffer.from(session.csrfToken);
  return given.length === expected.length && timingSafeEqual(given, expected) ? session.accountId : undefined;
}
