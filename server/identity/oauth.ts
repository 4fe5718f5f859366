import { createHash } from "node:crypto";
import { createRemoteJWKSet, jwtVerify } from "jose";
import * as client from "openid-client";
import type { Config } from "../config";
import type { Database, Sql } from "../db/sql";
import { OAuthStatesStore } from "./sign-in-store";

/*
 * Sign-in with GitHub (OAuth 2) and Google (OpenID Connect), through openid-client (the
 * certified relying-party library): the authorization request carries a random `state`
 * and a PKCE S256 challenge; the callback must bring that state back in the same browser
 * (it is also in a short-lived httpOnly cookie), the state is good once, and the code is
 * exchanged once with the matching verifier. Google's ID token is then verified again here
 * against the provider's JWKS (signature, issuer, audience, expiry, nonce): openid-client
 * skips the signature of a token it fetched itself over TLS, and we want it checked.
 */

export type OAuthProviderName = "github" | "google";

export interface GithubSettings {
  clientId: string;
  clientSecret: string;
  authorizationUrl: string;
  tokenUrl: string;
  /** GitHub's GET /user: the account's numeric id (the subject) and login. */
  userUrl: string;
  scope: string;
}

export interface GoogleSettings {
  clientId: string;
  clientSecret: string;
  /** Discovery runs against `${issuer}/.well-known/openid-configuration`. */
  issuer: string;
}

export interface OAuthSettings {
  github?: GithubSettings;
  google?: GoogleSettings;
}

/** How long a started sign-in may take before its state is refused. */
export const OAUTH_STATE_TTL_MS = 10 * 60_000;

export type OAuthBeginResult =
  | { ok: true; authorizationUrl: string; state: string }
  /** `statesMax` sign-ins are under way, in all: none started; one expires in `retryAfterMs`. */
  | { ok: false; reason: "too_many_pending"; retryAfterMs: number };

export type OAuthCompleteResult =
  | { ok: true; subject: string; name: string; linkTo: string | undefined }
  /**
   * bad_state: no state, not this browser's, already used or expired. refused: the
   * provider said no (the person declined, or a code was bad, replayed or not ours) or
   * what came back did not verify. unavailable: the provider could not be reached.
   */
  | { ok: false; reason: "bad_state" | "refused" | "unavailable"; detail: string };

const hash = (value: string) => createHash("sha256").update(value).digest("hex");

/** Plain http is only ever allowed for a provider on this machine (the tests' local one). */
const insecureOptions = (url: string) => (new URL(url).protocol === "http:" ? { execute: [client.allowInsecureRequests] } : undefined);

export class OAuthSignIn {
  private google?: Promise<{ config: client.Configuration; jwks: ReturnType<typeof createRemoteJWKSet> }>;
  private readonly store: OAuthStatesStore;

  constructor(
    private readonly db: Database,
    private readonly settings: OAuthSettings,
    /**
     * Started sign-ins that may wait for their callback at once: anyone may start one, so a flood
     * stores at most this many (give or take the starts that replicas count at the same instant).
     */
    private readonly statesMax: number,
  ) {
    this.store = new OAuthStatesStore(db);
  }

  configured(provider: OAuthProviderName): boolean {
    return this.settings[provider] !== undefined;
  }

  /**
   * Starts a sign-in: stores the state (hashed) with its PKCE verifier and nonce, and
   * returns where to send the browser. `linkTo`: the account already signed in in this
   * browser, which the new identity joins.
   */
  async begin(provider: OAuthProviderName, redirectUri: string, linkTo?: string): Promise<OAuthBeginResult> {
    // Checked before anything is fetched from the provider, so a refused start costs nothing,
    // and again when the state is stored, which is what bounds the table.
    const early = await this.tooManyPending(Date.now());
    if (early) return early;
    const state = client.randomState();
    const codeVerifier = client.randomPKCECodeVerifier();
    const nonce = client.randomNonce();
    const parameters: Record<string, string> = {
      redirect_uri: redirectUri,
      state,
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: "S256",
    };
    let config: client.Configuration;
    if (provider === "google") {
      config = (await this.googleClient()).config;
      Object.assign(parameters, { scope: "openid email profile", nonce });
    } else {
      config = this.githubClient();
      parameters.scope = this.settings.github!.scope;
    }
    const now = Date.now();
    const refused = await this.db.transaction(
      async (tx) => {
        const full = await this.tooManyPending(now, tx);
        if (!full)
          await this.store.insert(
            {
              stateHash: hash(state),
              provider,
              codeVerifier,
              nonce,
              linkTo: linkTo ?? null,
              createdAtMs: now,
              expiresAtMs: now + OAUTH_STATE_TTL_MS,
            },
            tx,
          );
        return full;
      },
      { durable: true },
    );
    if (refused) return refused;
    return { ok: true, authorizationUrl: client.buildAuthorizationUrl(config, parameters).href, state };
  }

  /**
   * Finishes a sign-in from the provider's redirect: `callbackUrl` is the redirect URI with
   * the query the provider sent, `browserState` the state cookie of the browser that came
   * back. The state is used up whatever happens next.
   */
  async complete(
    provider: OAuthProviderName,
    redirectUri: string,
    query: URLSearchParams,
    browserState: string | undefined,
  ): Promise<OAuthCompleteResult> {
    const state = query.get("state");
    if (!state || !browserState || state !== browserState) {
      return { ok: false, reason: "bad_state", detail: "The sign-in state is missing or belongs to another browser." };
    }
    const now = Date.now();
    // One conditional UPDATE: of two callbacks with this state, on any replica, one gets the row.
    const row = await this.store.consume(hash(state), provider, now);
    if (!row) return { ok: false, reason: "bad_state", detail: "The sign-in state was already used or has expired: start again." };
    const providerError = query.get("error");
    if (providerError) return { ok: false, reason: "refused", detail: `The provider answered ${providerError.slice(0, 100)}.` };

    const callbackUrl = new URL(redirectUri);
    callbackUrl.search = query.toString();
    const linkTo = row.linkTo ?? undefined;
    try {
      if (provider === "google") {
        const google = await this.googleClient();
        const tokens = await client.authorizationCodeGrant(
          google.config,
          callbackUrl,
          { pkceCodeVerifier: row.codeVerifier, expectedState: state, expectedNonce: row.nonce, idTokenExpected: true },
          { redirect_uri: redirectUri },
        );
        const settings = this.settings.google!;
        const { payload } = await jwtVerify(tokens.id_token!, google.jwks, {
          issuer: google.config.serverMetadata().issuer,
          audience: settings.clientId,
          requiredClaims: ["sub", "exp", "iat"],
        });
        if (payload.nonce !== row.nonce) return { ok: false, reason: "refused", detail: "The ID token's nonce is not this sign-in's." };
        const email = typeof payload.email === "string" && payload.email_verified === true ? payload.email : undefined;
        return { ok: true, subject: payload.sub!, name: email ?? `Google user ${payload.sub}`, linkTo };
      }
      const tokens = await client.authorizationCodeGrant(
        this.githubClient(),
        callbackUrl,
        { pkceCodeVerifier: row.codeVerifier, expectedState: state },
        { redirect_uri: redirectUri },
      );
      const user = await this.githubUser(tokens.access_token);
      if (!user) return { ok: false, reason: "refused", detail: "GitHub did not say whose token this is." };
      return { ok: true, subject: user.id, name: user.login, linkTo };
    } catch (error) {
      return classify(error);
    }
  }

  private async tooManyPending(nowMs: number, sql: Sql = this.db): Promise<Extract<OAuthBeginResult, { ok: false }> | undefined> {
    if ((await this.store.pendingCount(nowMs, sql)) < this.statesMax) return undefined;
    return { ok: false, reason: "too_many_pending", retryAfterMs: await this.store.retryAfterMs(nowMs, sql) };
  }

  /** Deletes states past their expiry: they can never finish a sign-in. */
  purgeExpired(): Promise<number> {
    return this.store.purgeExpired(Date.now());
  }

  private githubClient(): client.Configuration {
    const s = this.settings.github!;
    const config = new client.Configuration(
      // GitHub publishes no metadata. Its issuer, for the RFC 9207 `iss` check when a
      // provider sends one, is the authorization server's origin.
      { issuer: new URL(s.authorizationUrl).origin, authorization_endpoint: s.authorizationUrl, token_endpoint: s.tokenUrl },
      s.clientId,
      s.clientSecret,
    );
    if (insecureOptions(s.tokenUrl)) client.allowInsecureRequests(config);
    return config;
  }

  private async githubUser(accessToken: string): Promise<{ id: string; login: string } | undefined> {
    const res = await fetch(this.settings.github!.userUrl, {
      headers: { authorization: `Bearer ${accessToken}`, accept: "application/vnd.github+json", "user-agent": "skill-gateway" },
      signal: AbortSignal.timeout(10_000),
    });
    if (!res.ok) return undefined;
    const body = (await res.json()) as { id?: unknown; login?: unknown };
    if (typeof body.id !== "number" || !Number.isSafeInteger(body.id)) return undefined;
    return { id: String(body.id), login: typeof body.login === "string" ? body.login : String(body.id) };
  }

  /** Google's metadata and keys, discovered once (again after a failure). */
  private googleClient() {
    if (!this.google) {
      const s = this.settings.google!;
      this.google = client.discovery(new URL(s.issuer), s.clientId, s.clientSecret, undefined, insecureOptions(s.issuer)).then((config) => {
        const jwksUri = config.serverMetadata().jwks_uri;
        if (!jwksUri) throw new Error("the provider publishes no jwks_uri");
        return { config, jwks: createRemoteJWKSet(new URL(jwksUri)) };
      });
      this.google.catch(() => (this.google = undefined));
    }
    return this.google;
  }
}

/** A failed exchange: the provider unreachable, or anything it said or sent that did not check out. */
function classify(error: unknown): OAuthCompleteResult {
  const e = error as { name?: string; code?: string; error?: string; message?: string; cause?: unknown };
  // fetch's network failures are TypeErrors ("fetch failed") with the socket error as cause;
  // openid-client wraps them in its own error whose cause is that TypeError.
  const network = (x: unknown) => x instanceof TypeError || (x as { name?: string })?.name === "TimeoutError";
  if (network(error) || network(e.cause)) return { ok: false, reason: "unavailable", detail: "The sign-in provider could not be reached." };
  const detail = e.error ? `The provider refused the code (${e.error}).` : "The provider's answer did not verify.";
  return { ok: false, reason: "refused", detail };
}

/** The providers the configuration turns on: each needs its client id (and secret). */
export function oauthSettings(
  config: Pick<
    Config,
    | "githubClientId"
    | "githubClientSecret"
    | "githubAuthorizationUrl"
    | "githubTokenUrl"
    | "githubUserUrl"
    | "githubScope"
    | "googleClientId"
    | "googleClientSecret"
    | "googleIssuer"
  >,
): OAuthSettings {
  return {
    github: config.githubClientId
      ? {
          clientId: config.githubClientId,
          clientSecret: config.githubClientSecret,
          authorizationUrl: config.githubAuthorizationUrl,
          tokenUrl: config.githubTokenUrl,
          userUrl: config.githubUserUrl,
          scope: config.githubScope,
        }
      : undefined,
    google: config.googleClientId
      ? { clientId: config.googleClientId, clientSecret: config.googleClientSecret, issuer: config.googleIssuer }
      : undefined,
  };
}
