import express, { type Request, type RequestHandler, type Router } from "express";
import { jsonBody } from "../json-body";
import type { MagicLinks, UnusableLinkReason } from "../../identity/email";
import type { LiveSession, Sessions } from "../../identity/sessions";
import { planSignIn } from "../../identity/sign-in-plan";
import type { Config } from "../../config";
import { dataEnvelope, dataEnvelopeOf } from "../envelope";
import { ApiError } from "../errors";
import { emailPreviewBody, emailSignedInView, emailStartBody, emailVerifyBody } from "../contract/auth";
import { parseRequest } from "../contract/common";
import { publicBase } from "../public-url";
import { storeFull } from "../rate-limits";
import { browserSession, finishSignIn, signInPost, wantsPage } from "../sign-in";
import { readSession, csrfMatches } from "../session-cookies";

/** The one answer to POST /auth/email/start, whoever the address belongs to. */
const START_ANSWER = dataEnvelope({
  sent: true,
  message: "If this address can receive mail, a sign-in link is on its way. It works once, for a short while.",
});

/** What happened to a link that cannot be used, in the words its page shows (the error of a 401 sign_in_failed). */
function linkUnusable(reason: UnusableLinkReason, ttlMs: number): string {
  if (reason === "used") return "This sign-in link was used already: each link signs in once. Ask for a new one.";
  if (reason === "expired")
    return `This sign-in link has expired: links work for ${Math.round(ttlMs / 60_000)} minutes after they are sent. Ask for a new one.`;
  return "This sign-in link is not valid: it may have been cut short when it was copied, or be too old. Ask for a new one.";
}

/** Where a mailed link points: a dashboard page (server/web/src/pages/email-link.ts), never an API that signs in. */
export const EMAIL_LINK_PATH = "/auth/email/callback";

/**
 * E-mail magic links:
 *   POST /auth/email/start    {email}                    → 200, always the same answer (no account enumeration)
 *   GET  /auth/email/callback?token=…                    → the link in the mail: a dashboard page (served by
 *                                                           ./dashboard.ts) that shows what the link will do; a GET
 *                                                           or HEAD never uses the token, so a mail scanner cannot
 *   POST /auth/email/preview  {token}                    → what the link would do, without using it
 *   POST /auth/email/verify   {token, switch_account?}   → uses the token: signs in (or links), answering JSON
 *   GET  /auth/email/{verify,preview}?token=…            → a browser that opens one of the POST addresses (a
 *                                                           link pasted or typed by hand) is sent (303) to the link's
 *                                                           page, which uses nothing; anything else gets the 404
 *                                                           envelope, as for any path a method does not serve
 * All three POSTs are sign-in POSTs (../sign-in.ts): rate-limited per client address, same
 * origin, JSON; at most EMAIL_LINKS_MAX links wait unused (429 beyond). A browser already
 * signed in to another account is not switched silently: 409 session_exists, unless the
 * POST says switch_account: true. Asked for from a signed-in session (with its X-CSRF-Token),
 * the link adds the address to that account, provided it is used in that same session.
 */
export function emailAuthRoutes(deps: { config: Config; sessions: Sessions; links: MagicLinks; limit: RequestHandler }): Router {
  const router = express.Router();
  const guard = signInPost(deps.config);
  const json = jsonBody(2_048, "application/json");

  router.post("/auth/email/start", deps.limit, guard, json, async (req, res) => {
    const { email } = parseRequest(emailStartBody, req.body ?? {}, { email: "invalid_input" });
    const base = publicBase(deps.config, req);
    const sent = await deps.links.send(
      email,
      (token) => `${base}${EMAIL_LINK_PATH}?token=${encodeURIComponent(token)}`,
      await linkingAccount(deps.sessions, req),
    );
    // The gateway's own limit, the same for every address; an address's own limit answers as if sent.
    if (!sent.sent && sent.reason === "too_many_pending")
      throw storeFull("Too many sign-in links are waiting to be used.", sent.retryAfterMs);
    res.json(START_ANSWER);
  });

  /**
   * The link's address and what using it would do for this browser. A token's address and
   * account to join never change, so consuming it afterwards yields the same ones; what may
   * change meanwhile (another request signing the address in first) Sessions.signIn checks
   * again in its own transaction.
   */
  const examine = async (token: unknown, current: LiveSession | undefined, switchAccount: boolean) => {
    const link = await deps.links.peek(typeof token === "string" ? token : "");
    if (!link.ok) throw new ApiError("sign_in_failed", linkUnusable(link.reason, deps.config.emailLinkTtlMs));
    const owner = await deps.sessions.ownerOf("email", link.email);
    return { link, owner, plan: planSignIn({ current: current?.accountId, owner, linkTo: link.linkTo, switchAccount }) };
  };

  router.post("/auth/email/preview", deps.limit, guard, json, async (req, res) => {
    const current = await readSession(deps.sessions, req);
    const { link, owner, plan } = await examine(parseRequest(emailPreviewBody, req.body ?? {}).token, current, false);
    const joins = owner === undefined ? "sign_up" : "sign_in";
    res.set("cache-control", "no-store");
    res.json(
      dataEnvelope({
        email: link.email,
        expires_at: new Date(link.expiresAtMs).toISOString(),
        signed_in: current !== undefined,
        // What POST /auth/email/verify does without switch_account (null: it is refused, see refusal).
        action: plan.ok ? (plan.linkTo !== undefined ? "link" : joins) : null,
        refusal: plan.ok ? null : plan.reason,
        // What it does with switch_account: true, when that is the way past a refusal.
        switch_action: plan.ok ? null : joins,
      }),
    );
  });

  router.post("/auth/email/verify", deps.limit, guard, json, async (req, res) => {
    const current = await browserSession(deps.sessions, req);
    const body = parseRequest(emailVerifyBody, req.body ?? {});
    const switchAccount = body.switch_account ?? false;
    const { link, plan } = await examine(body.token, current, switchAccount);
    if (!plan.ok) {
      if (plan.reason === "identity_taken") throw new ApiError("identity_taken", `${link.email} already signs in to another account.`);
      throw new ApiError(
        "session_exists",
        `This browser is signed in to another account. This link signs in as ${link.email}: send switch_account: true to switch accounts, or sign out first.`,
      );
    }
    // Used up only now that the plan allows it: a refused one can be retried with switch_account.
    // Of two requests that got this far with the same token, one consumes it; the other is a 401.
    const consumed = await deps.links.consume(String(body.token));
    if (!consumed.ok) throw new ApiError("sign_in_failed", linkUnusable(consumed.reason, deps.config.emailLinkTtlMs));
    const result = await deps.sessions.signIn("email", consumed.email, { name: consumed.email, linkTo: plan.linkTo });
    if (!result.ok) throw new ApiError("identity_taken", `${consumed.email} already signs in to another account.`);
    const { switched } = await finishSignIn(deps.sessions, res, current, result.accountId, deps.config.secureCookies);
    res.json(dataEnvelopeOf(emailSignedInView, { account_id: result.accountId, created: result.created, linked: result.linked, switched }));
  });

  // A person who opens a POST address in the browser sees the link's page, never a white page of JSON.
  router.get(["/auth/email/verify", "/auth/email/preview"], (req, res, next) => {
    if (!wantsPage(req)) return next();
    const token = typeof req.query.token === "string" ? req.query.token : "";
    res
      .status(303)
      .set("location", `${EMAIL_LINK_PATH}?token=${encodeURIComponent(token)}`)
      .end();
  });

  return router;
}

/** The signed-in account asking for a link to join it: only with the session's CSRF token. */
async function linkingAccount(sessions: Sessions, req: Request): Promise<string | undefined> {
  const session = await readSession(sessions, req);
  return session && csrfMatches(req, session) ? session.accountId : undefined;
}
