import express, { type Router } from "express";
import type { OAuthProviderName, OAuthSignIn } from "../../accounts/oauth";
import { OAUTH_STATE_TTL_MS } from "../../accounts/oauth";
import { readCookie, type Sessions } from "../../accounts/sessions";
import type { Config } from "../../config";
import { ApiError } from "../errors";
import { publicBase } from "../public-url";

/** The cookie that binds a started sign-in to the browser that started it. */
export const OAUTH_STATE_COOKIE = "sg_oauth_state";

const LABEL: Record<OAuthProviderName, string> = { github: "GitHub", google: "Google" };

/**
 * GitHub (OAuth 2) and Google (OpenID Connect) sign-in:
 *   GET /auth/{github,google}/start     → 302 to the provider, state cookie set
 *   GET /auth/{github,google}/callback  → signs in (or links, when already signed in), 303 to /
 * A bad, replayed or foreign state or code is a 401 in the envelope; a provider that is not
 * configured is a 404.
 */
export function oauthRoutes(deps: { config: Config; sessions: Sessions; oauth: OAuthSignIn; log: (message: string, error?: unknown) => void }): Router {
  const router = express.Router();
  // Lax, not Strict: the callback is a top-level navigation from the provider's site.
  const cookie = { httpOnly: true, sameSite: "lax" as const, secure: deps.config.secureCookies, path: "/auth/" };

  for (const provider of ["github", "google"] as const) {
    const redirectUri = (req: express.Request) => `${publicBase(deps.config, req)}/auth/${provider}/callback`;
    const configured = () => {
      if (!deps.oauth.configured(provider)) throw new ApiError("not_found", `${LABEL[provider]} sign-in is not configured on this gateway.`);
    };

    router.get(`/auth/${provider}/start`, async (req, res) => {
      configured();
      let begun;
      try {
        begun = await deps.oauth.begin(provider, redirectUri(req), deps.sessions.read(req)?.accountId);
      } catch (error) {
        deps.log(`${provider} sign-in could not start`, error);
        throw new ApiError("sign_in_unavailable", `${LABEL[provider]} sign-in is unavailable right now; try again shortly.`);
      }
      res.cookie(OAUTH_STATE_COOKIE, begun.state, { ...cookie, maxAge: OAUTH_STATE_TTL_MS });
      res.redirect(302, begun.authorizationUrl);
    });

    router.get(`/auth/${provider}/callback`, async (req, res) => {
      configured();
      res.clearCookie(OAUTH_STATE_COOKIE, cookie);
      const query = new URL(req.originalUrl, "http://callback.invalid").searchParams;
      const result = await deps.oauth.complete(provider, redirectUri(req), query, readCookie(req.headers.cookie, OAUTH_STATE_COOKIE));
      if (!result.ok) {
        if (result.reason === "unavailable") throw new ApiError("sign_in_unavailable", `${LABEL[provider]} could not be reached; try again shortly.`);
        throw new ApiError("sign_in_failed", `${LABEL[provider]} sign-in failed: ${result.detail}`);
      }
      const signedIn = deps.sessions.signIn(provider, result.subject, { name: result.name, linkTo: result.linkTo });
      if (!signedIn.ok) throw new ApiError("identity_taken", `This ${LABEL[provider]} account already signs in to another account.`);
      await deps.sessions.open(res, signedIn.accountId);
      res.redirect(303, "/");
    });
  }
  return router;
}
