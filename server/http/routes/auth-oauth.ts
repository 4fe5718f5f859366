import express, { type Request, type RequestHandler, type Response, type Router } from "express";
import type { OAuthProviderName, OAuthSignIn } from "../../identity/oauth";
import { OAUTH_STATE_TTL_MS } from "../../identity/oauth";
import type { Sessions } from "../../identity/sessions";
import { planSignIn } from "../../identity/sign-in-plan";
import type { Config } from "../../config";
import { ApiError } from "../errors";
import { publicBase } from "../public-url";
import { storeFull } from "../rate-limits";
import { finishSignIn, ownNavigation, wantsPage } from "../sign-in";
import { readSession, readCookie } from "../session-cookies";

/** The cookie that binds a started sign-in to the browser that started it. */
export const OAUTH_STATE_COOKIE = "sg_oauth_state";

/** The dashboard page that explains a GitHub/Google sign-in that did not complete (server/web/src/pages/oauth-result.ts). */
export const OAUTH_RESULT_PATH = "/signin/oauth";

const LABEL: Record<OAuthProviderName, string> = { github: "GitHub", google: "Google" };

/**
 * GitHub (OAuth 2) and Google (OpenID Connect) sign-in:
 *   GET /auth/{github,google}/start     → 302 to the provider, state cookie set
 *   GET /auth/{github,google}/callback  → signs in (or links, when started from this browser's
 *                                         session), 303 to /
 * Both are browser navigations. A start is only followed from this site or a typed address
 * (Sec-Fetch-Site), and the callback only in the browser whose state cookie matches: another
 * site cannot run a sign-in in a visitor's browser, nor hand it an attacker's code. A browser
 * signed in to another account is never switched by a callback (session_exists).
 *
 * Both are rate-limited per client address, and at most OAUTH_STATES_MAX sign-ins may be
 * under way at once. A refusal is the envelope (401 bad/replayed/foreign state or code, 403 a
 * start from another site, 409 another account's identity or session, 429 too many, 503
 * provider unreachable, 404 provider not configured); a browser (Accept prefers HTML) is sent instead to the dashboard page
 * OAUTH_RESULT_PATH, which explains it in words and offers the way on.
 */
export function oauthRoutes(deps: {
  config: Config;
  sessions: Sessions;
  oauth: OAuthSignIn;
  /** The sign-in rate limit, per client address. */
  limit: RequestHandler;
  log: (message: string, error?: unknown) => void;
}): Router {
  const router = express.Router();
  // Lax, not Strict: the callback is a top-level navigation from the provider's site.
  const cookie = { httpOnly: true, sameSite: "lax" as const, secure: deps.config.secureCookies, path: "/auth/" };

  for (const provider of ["github", "google"] as const) {
    const redirectUri = (req: Request) => `${publicBase(deps.config, req)}/auth/${provider}/callback`;
    const configured = () => {
      if (!deps.oauth.configured(provider))
        throw new ApiError("not_found", `${LABEL[provider]} sign-in is not configured on this gateway.`);
    };
    /** Refuses: the page for a browser, the envelope for anything else. */
    const refuse = (req: Request, res: Response, error: ApiError): void => {
      if (!wantsPage(req)) throw error;
      res.set(error.headers).redirect(303, `${OAUTH_RESULT_PATH}?provider=${provider}&outcome=${error.code}`);
    };

    router.get(`/auth/${provider}/start`, deps.limit, async (req, res) => {
      configured();
      if (!ownNavigation(req)) {
        return refuse(
          req,
          res,
          new ApiError(
            "origin_refused",
            `This ${LABEL[provider]} sign-in was started from another site; start it from the dashboard's sign-in page.`,
          ),
        );
      }
      let begun;
      try {
        begun = await deps.oauth.begin(provider, redirectUri(req), (await readSession(deps.sessions, req))?.accountId);
      } catch (error) {
        deps.log(`${provider} sign-in could not start`, error);
        return refuse(
          req,
          res,
          new ApiError("sign_in_unavailable", `${LABEL[provider]} sign-in is unavailable right now; try again shortly.`),
        );
      }
      if (!begun.ok) return refuse(req, res, storeFull(`Too many ${LABEL[provider]} sign-ins are under way.`, begun.retryAfterMs));
      res.cookie(OAUTH_STATE_COOKIE, begun.state, { ...cookie, maxAge: OAUTH_STATE_TTL_MS });
      res.redirect(302, begun.authorizationUrl);
    });

    router.get(`/auth/${provider}/callback`, deps.limit, async (req, res) => {
      configured();
      res.clearCookie(OAUTH_STATE_COOKIE, cookie);
      const query = new URL(req.originalUrl, "http://callback.invalid").searchParams;
      const result = await deps.oauth.complete(provider, redirectUri(req), query, readCookie(req.headers.cookie, OAUTH_STATE_COOKIE));
      if (!result.ok) {
        if (result.reason === "unavailable")
          return refuse(req, res, new ApiError("sign_in_unavailable", `${LABEL[provider]} could not be reached; try again shortly.`));
        return refuse(req, res, new ApiError("sign_in_failed", `${LABEL[provider]} sign-in failed: ${result.detail}`));
      }
      // Read after the provider round trip: what counts is the session the browser has now.
      const current = await readSession(deps.sessions, req);
      const plan = planSignIn({
        current: current?.accountId,
        owner: await deps.sessions.ownerOf(provider, result.subject),
        linkTo: result.linkTo,
        switchAccount: false,
      });
      if (!plan.ok) {
        if (plan.reason === "identity_taken")
          return refuse(req, res, new ApiError("identity_taken", `This ${LABEL[provider]} account already signs in to another account.`));
        return refuse(
          req,
          res,
          new ApiError(
            "session_exists",
            `This browser is signed in to another account; sign out first to sign in with this ${LABEL[provider]} account.`,
          ),
        );
      }
      const signedIn = await deps.sessions.signIn(provider, result.subject, { name: result.name, linkTo: plan.linkTo });
      if (!signedIn.ok)
        return refuse(req, res, new ApiError("identity_taken", `This ${LABEL[provider]} account already signs in to another account.`));
      await finishSignIn(deps.sessions, res, current, signedIn.accountId, deps.config.secureCookies);
      res.redirect(303, "/");
    });
  }
  return router;
}
