import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { Response } from "express";
import type { AuthorizationParams, OAuthServerProvider } from "@modelcontextprotocol/sdk/server/auth/provider.js";
import type { OAuthRegisteredClientsStore } from "@modelcontextprotocol/sdk/server/auth/clients.js";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import {
  InvalidClientMetadataError,
  InvalidGrantError,
  InvalidRequestError,
  InvalidScopeError,
  InvalidTargetError,
  TemporarilyUnavailableError,
  TooManyRequestsError,
} from "@modelcontextprotocol/sdk/server/auth/errors.js";
import type { OAuthClientInformationFull, OAuthTokenRevocationRequest, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { Database, Sql } from "../db/sql";
import type { SpendLimit } from "../ledger/spend-limits";
import { type ApiKeys, KEY_PREFIX } from "./api-keys";
import { ApiKeysStore } from "./api-keys-store";
import { base58Encode } from "./base58";
import { checkMetadata } from "./key-metadata";
import { isExpired } from "./scopes";
import { type IssuedCode, McpOAuthStore, type PendingRequest, type StoredToken } from "./mcp-oauth-store";
import { checkText, excerpt } from "../text";

/**
 * The gateway as the OAuth 2.1 authorization server of its own hosted MCP endpoint (`/mcp`), as the MCP authorization
 * specification (2025-06-18) asks of a remote MCP server: remote clients (claude.ai, ChatGPT, the MCP SDKs) discover it
 * from the endpoint's 401, register themselves (RFC 7591), and run the authorization code flow with PKCE S256 for a
 * token that is good for `/mcp` alone (RFC 8707 resource indicators).
 *
 * The protocol itself (request parsing, PKCE verification, client authentication, error responses, metadata shapes) is
 * the official MCP SDK's (`@modelcontextprotocol/sdk/server/auth`, mounted by server/http/routes/mcp-oauth.ts); this is
 * the `OAuthServerProvider` it asks for, backed by the gateway's own tables (./mcp-oauth-store.ts) and keys:
 *
 * - Clients are public (token_endpoint_auth_method "none"): PKCE protects their codes, so no client secret is issued
 *   and none is stored. A registration keeps only what the gateway uses of it (redirect URIs, name, URI).
 * - Authorizing is the person's decision on the dashboard (/connect): the authorization endpoint stores the request
 *   and sends the browser there; the person signs in as the dashboard allows, and consents naming the client, the
 *   skills, a spending limit and an expiry (`approve`), or refuses (`deny`).
 * - A grant is an API key: consenting makes a `calls`-only key with exactly those limits, named for the client and
 *   listed on API Keys. Its secret is never shown to anyone; the client holds tokens that stand for it. Revoking the
 *   key (API Keys, DELETE /v1/keys/:id) ends every token of the grant at its next use, and the gateway's limits,
 *   prices caps and spending limits apply to the client's calls exactly as to the key's.
 * - Access tokens are short-lived (MCP_ACCESS_TOKEN_TTL_SEC); refresh tokens rotate on every use, and a refresh token
 *   (or a code) used twice ends the grant: one of the two users was not the client. Neither outlives the key.
 * - Every secret (request id, code, token) is random, shown once, and stored as its SHA-256 only.
 */

/** The one scope a token may carry: calling skills through `/mcp` (the key behind it holds `calls` only). */
export const MCP_OAUTH_SCOPE = "calls";
/** How long an authorization request waits for the person's consent (signing in included). */
export const REQUEST_TTL_MS = 15 * 60_000;
/** How long an authorization code may wait for its exchange. */
export const CODE_TTL_MS = 2 * 60_000;
/** Prefixes of the gateway's OAuth secrets: recognisable in a leak, never taken for an `atom_` key. */
export const ACCESS_TOKEN_PREFIX = "sgat_";
export const REFRESH_TOKEN_PREFIX = "sgrt_";
const CODE_PREFIX = "sgac_";
const REQUEST_PREFIX = "sgar_";

/** Bounds on a registration: it is anyone's to make, and the consent page shows its name. */
const MAX_REDIRECT_URIS = 10;
const MAX_URI_CHARS = 1_000;
const CLIENT_NAME_RULE = { field: "client_name", minChars: 0, maxChars: 100, kind: "name" } as const;
/** The most of a `state` a client may ask to have echoed back, in characters. */
const MAX_STATE_CHARS = 1_000;
/** A PKCE S256 challenge: the base64url of a SHA-256, without padding (RFC 7636 section 4.2). */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
/** How long after its rotation a refresh token presented again is taken for a retry (two refreshes at once, a lost answer), not a theft. */
const ROTATION_GRACE_MS = 30_000;
/** How long a registered client that never got a grant is kept. */
const UNUSED_CLIENT_TTL_MS = 86_400_000;
/** Hosts a native client's loopback redirect may name (RFC 8252 section 7.3), the only http redirects allowed. */
const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

export interface McpOAuthSettings {
  /** How long an access token is good for. */
  accessTokenTtlMs: number;
  /** How long a refresh token is good for (never past the grant's key's expiry). */
  refreshTokenTtlMs: number;
  /** Registered clients in all; beyond it, a registration is refused until unused ones are purged. */
  clientsMax: number;
  /** Authorization requests waiting for consent, in all; beyond it, a new one is refused until the oldest expires. */
  requestsMax: number;
}

/** What the person chooses on the consent page. */
export interface Consent {
  /** The skills the grant may call (slugs or UUIDs, checked by the route); null for every skill. */
  allowedSkills: string[] | null;
  spendLimit: SpendLimit | null;
  expiresAtMs: number | null;
}

/** An authorization request as the consent page shows it. */
export interface RequestView {
  clientId: string;
  clientName: string;
  clientUri: string | null;
  /** Where the browser goes back to: what the person should recognise. */
  redirectUri: string;
  expiresAtMs: number;
}

const sha256 = (secret: string) => createHash("sha256").update(secret).digest("hex");
const secret = (prefix: string) => prefix + base58Encode(randomBytes(32));
/**
 * Whether two resource URLs name the same resource: the same origin and path (one trailing slash aside), whatever query
 * or fragment a client kept from the URL it was given (`/mcp?skills=echo` is still `/mcp`).
 */
export function sameResource(a: string, b: string): boolean {
  try {
    const x = new URL(a);
    const y = new URL(b);
    return x.origin === y.origin && x.pathname.replace(/\/+$/, "") === y.pathname.replace(/\/+$/, "");
  } catch {
    return false;
  }
}

/** An authorization request's parameters, as the authorization endpoint received them (query or form). */
export interface AuthorizationRequestParameters {
  response_type?: unknown;
  code_challenge?: unknown;
  code_challenge_method?: unknown;
  scope?: unknown;
  state?: unknown;
  resource?: unknown;
}

/**
 * What is wrong with an authorization request once its client and redirect URI are known good, or undefined. Checked
 * BEFORE the SDK's handler, which would report these by redirecting to the client's redirect URI: a client anyone can
 * register would make that an open redirect on the gateway's own origin (RFC 9700 section 4.11.2). A request that
 * passes here redirects only when the person answers.
 */
export function authorizationRequestProblem(params: AuthorizationRequestParameters, mcpResource: string): string | undefined {
  if (params.response_type !== "code") return "response_type must be code.";
  if (params.code_challenge_method !== "S256") return "code_challenge_method must be S256 (PKCE).";
  if (typeof params.code_challenge !== "string" || !S256_CHALLENGE.test(params.code_challenge))
    return "code_challenge must be a base64url SHA-256 (43 characters).";
  if (params.state !== undefined && (typeof params.state !== "string" || params.state.length > MAX_STATE_CHARS))
    return `state must be at most ${MAX_STATE_CHARS} characters.`;
  if (params.scope !== undefined) {
    if (typeof params.scope !== "string") return `scope must be ${MCP_OAUTH_SCOPE}.`;
    const unknown = params.scope.split(" ").filter((scope) => scope !== "" && scope !== MCP_OAUTH_SCOPE);
    if (unknown.length > 0) return `Unknown scope "${excerpt(unknown[0], 50)}": the one scope is ${MCP_OAUTH_SCOPE}.`;
  }
  if (params.resource !== undefined && (typeof params.resource !== "string" || !sameResource(params.resource, mcpResource)))
    return `This server issues tokens for ${mcpResource} only.`;
  return undefined;
}

/** A redirect URI a registration may name: https, http on a loopback host (RFC 8252 §7.3), or a private-use scheme (§7.1). */
function redirectUriAllowed(uri: string): boolean {
  if (uri.length > MAX_URI_CHARS) return false;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return false;
  }
  if (url.hash !== "") return false; // RFC 6749 §3.1.2: no fragment.
  if (url.protocol === "https:") return true;
  if (url.protocol === "http:") return LOOPBACK.has(url.hostname);
  // A private-use scheme is a reversed domain name the app owns (com.example.app:/callback), never a browser's own.
  return /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+:$/.test(url.protocol);
}

export class McpOAuth implements OAuthServerProvider {
  private readonly store: McpOAuthStore;
  private readonly keyRows: ApiKeysStore;

  constructor(
    private readonly db: Database,
    private readonly keys: ApiKeys,
    private readonly settings: McpOAuthSettings,
    private readonly now: () => number = Date.now,
  ) {
    this.store = new McpOAuthStore(db);
    this.keyRows = new ApiKeysStore(db);
  }

  /** Registered clients: the SDK's registration handler checks RFC 7591's shapes, then hands them here. */
  readonly clientsStore: OAuthRegisteredClientsStore = {
    getClient: async (clientId) => {
      // Client ids are the UUIDs registration hands out: anything else names no client.
      if (!/^[0-9a-f-]{36}$/.test(clientId)) return undefined;
      const stored = await this.store.client(clientId);
      if (!stored) return undefined;
      return {
        ...(JSON.parse(stored.metadata) as object),
        client_id: stored.clientId,
        client_id_issued_at: Math.floor(stored.createdAtMs / 1_000),
      } as OAuthClientInformationFull;
    },
    registerClient: async (client) => {
      const redirectUris = client.redirect_uris.map(String);
      if (redirectUris.length === 0 || redirectUris.length > MAX_REDIRECT_URIS)
        throw new InvalidClientMetadataError(`redirect_uris must name 1 to ${MAX_REDIRECT_URIS} URIs.`);
      const refused = redirectUris.find((uri) => !redirectUriAllowed(uri));
      if (refused !== undefined)
        throw new InvalidClientMetadataError(
          `redirect_uris: "${excerpt(refused, 200)}" is not allowed: use an https URI, an http URI on a loopback host (localhost, 127.0.0.1, [::1]), or a private-use scheme such as com.example.app:/callback, without a fragment.`,
        );
      if ((client.grant_types ?? []).some((grant) => grant !== "authorization_code" && grant !== "refresh_token"))
        throw new InvalidClientMetadataError("grant_types may hold authorization_code and refresh_token only.");
      // Every client gets both: its tokens are short-lived, and the refresh token is how it keeps the connection.
      const grantTypes = ["authorization_code", "refresh_token"];
      if ((client.response_types ?? ["code"]).some((type) => type !== "code"))
        throw new InvalidClientMetadataError("response_types may hold code only.");
      const name = checkText(client.client_name ?? "", CLIENT_NAME_RULE);
      if (!name.ok) throw new InvalidClientMetadataError(name.message);
      const clientUri = client.client_uri === undefined ? undefined : String(client.client_uri);
      if (clientUri !== undefined && (clientUri.length > MAX_URI_CHARS || !/^https?:$/.test(new URL(clientUri).protocol)))
        throw new InvalidClientMetadataError("client_uri must be an http or https URL.");
      // What the gateway keeps, and answers with: a public client (RFC 7591 lets the server replace what it asked for).
      const metadata = {
        redirect_uris: redirectUris,
        token_endpoint_auth_method: "none",
        grant_types: grantTypes,
        response_types: ["code"],
        ...(name.text !== "" ? { client_name: name.text } : {}),
        ...(clientUri !== undefined ? { client_uri: clientUri } : {}),
        scope: MCP_OAUTH_SCOPE,
      };
      if ((await this.store.clientCount()) >= this.settings.clientsMax)
        throw new TooManyRequestsError("Too many clients are registered with this server now; try again later.");
      const clientId = randomUUID();
      const createdAtMs = this.now();
      await this.store.insertClient({ clientId, metadata: JSON.stringify(metadata), createdAtMs });
      return { ...metadata, client_id: clientId, client_id_issued_at: Math.floor(createdAtMs / 1_000) } as OAuthClientInformationFull;
    },
  };

  /**
   * The authorization endpoint's last step (the SDK checked the client, the redirect URI, response_type=code and
   * code_challenge_method=S256): checks the resource, scopes, challenge and state, keeps the request, and sends the
   * browser to the dashboard's consent page. `resource` is the MCP endpoint's own URL (the route passes it).
   */
  async authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res: Response): Promise<void> {
    const { mcpResource, consentUrl } = res.locals as { mcpResource: string; consentUrl: (requestId: string) => string };
    const requestId = await this.begin(client, params, mcpResource);
    res.redirect(302, consentUrl(requestId));
  }

  /** Checks and stores an authorization request; its id, for the consent page. */
  async begin(client: OAuthClientInformationFull, params: AuthorizationParams, mcpResource: string): Promise<string> {
    if (params.resource !== undefined && !sameResource(params.resource.href, mcpResource))
      throw new InvalidTargetError(`This server issues tokens for ${mcpResource} only.`);
    const unknown = (params.scopes ?? []).filter((scope) => scope !== "" && scope !== MCP_OAUTH_SCOPE);
    if (unknown.length > 0) throw new InvalidScopeError(`Unknown scope "${excerpt(unknown[0], 50)}": the one scope is ${MCP_OAUTH_SCOPE}.`);
    if (!S256_CHALLENGE.test(params.codeChallenge))
      throw new InvalidRequestError("code_challenge must be a base64url SHA-256 (43 characters).");
    if (params.state !== undefined && params.state.length > MAX_STATE_CHARS)
      throw new InvalidRequestError(`state must be at most ${MAX_STATE_CHARS} characters.`);
    const nowMs = this.now();
    if ((await this.store.pendingRequestCount(nowMs)) >= this.settings.requestsMax)
      throw new TemporarilyUnavailableError("Too many connections are waiting for consent now; try again in a few minutes.");
    const requestId = secret(REQUEST_PREFIX);
    await this.store.insertRequest(
      sha256(requestId),
      {
        clientId: client.client_id,
        redirectUri: params.redirectUri,
        codeChallenge: params.codeChallenge,
        state: params.state ?? null,
        resource: mcpResource,
        expiresAtMs: nowMs + REQUEST_TTL_MS,
      },
      nowMs,
    );
    return requestId;
  }

  /** A waiting request as the consent page shows it; undefined when it is unknown, used or expired. */
  async describe(requestId: string): Promise<RequestView | undefined> {
    const request = await this.pending(requestId);
    if (!request) return undefined;
    const client = await this.clientsStore.getClient(request.clientId);
    if (!client) return undefined;
    return {
      clientId: request.clientId,
      clientName: client.client_name ?? "",
      clientUri: client.client_uri ?? null,
      redirectUri: request.redirectUri,
      expiresAtMs: request.expiresAtMs,
    };
  }

  private pending(requestId: string): Promise<PendingRequest | undefined> {
    if (!requestId.startsWith(REQUEST_PREFIX) || requestId.length > 80) return Promise.resolve(undefined);
    return this.store.pendingRequest(sha256(requestId), this.now());
  }

  /**
   * The person consented: in one durable transaction the request is used up, the grant's key made (`calls` only, with
   * the consent's limits, named for the client) and a code issued for it. Returns where to send the browser (the
   * client's redirect URI with the code and state), or undefined when the request is unknown, used or expired.
   * `check` runs first, before the transaction (the route's limit on live keys).
   */
  async approve(
    requestId: string,
    accountId: string,
    consent: Consent,
    check?: () => Promise<void>,
  ): Promise<{ redirectTo: string; keyId: string } | undefined> {
    const view = await this.describe(requestId);
    if (!view) return undefined;
    const nowMs = this.now();
    const code = secret(CODE_PREFIX);
    const name = excerpt(view.clientName === "" ? "MCP client" : view.clientName, 56);
    const metadata = checkMetadata({ oauth_client_id: view.clientId, oauth_client: view.clientName });
    await check?.();
    const issued = await this.db.transaction(
      async (tx) => {
        const request = await this.store.useRequest(sha256(requestId), nowMs, tx);
        if (!request) return undefined;
        const created = await this.keys.create(
          accountId,
          {
            name: `${name} (MCP)`,
            scopes: ["calls"],
            allowedSkills: consent.allowedSkills,
            spendLimit: consent.spendLimit,
            expiresAtMs: consent.expiresAtMs,
            metadata: metadata.ok ? metadata.metadata : { oauth_client_id: view.clientId },
            nowMs,
          },
          tx,
        );
        await this.store.insertCode(
          sha256(code),
          {
            clientId: request.clientId,
            apiKeyId: created.record.id,
            redirectUri: request.redirectUri,
            codeChallenge: request.codeChallenge,
            resource: request.resource,
          },
          nowMs,
          nowMs + CODE_TTL_MS,
          tx,
        );
        return { request, keyId: created.record.id };
      },
      { durable: true },
    );
    if (!issued) return undefined;
    return { redirectTo: redirectWith(issued.request, { code }), keyId: issued.keyId };
  }

  /** The person refused: the request is used up; where to send the browser (access_denied), or undefined as above. */
  async deny(requestId: string): Promise<string | undefined> {
    if (!requestId.startsWith(REQUEST_PREFIX)) return undefined;
    const request = await this.store.useRequest(sha256(requestId), this.now());
    if (!request) return undefined;
    return redirectWith(request, { error: "access_denied", error_description: "The person refused the connection." });
  }

  /** The PKCE challenge of a code not used yet, for the SDK's token handler to verify the code_verifier against. */
  async challengeForAuthorizationCode(client: OAuthClientInformationFull, authorizationCode: string): Promise<string> {
    // A code used already still answers its challenge: the SDK then checks the code_verifier, and only a caller holding
    // it reaches the exchange, which ends the grant of a code presented twice. Without the verifier, a leaked used
    // code (in a URL, a log) can end nobody's connection.
    const code = authorizationCode.startsWith(CODE_PREFIX) ? await this.store.code(sha256(authorizationCode)) : undefined;
    const live = code !== undefined && (code.usedAtMs !== null || code.expiresAtMs > this.now());
    if (!code || !live || code.clientId !== client.client_id)
      throw new InvalidGrantError("The authorization code is unknown, used or expired.");
    return code.codeChallenge;
  }

  /**
   * Exchanges a code (its PKCE verifier already checked by the SDK) for the grant's first tokens. A code used a second
   * time ends the grant: RFC 9700 §4.2.4 and OAuth 2.1 ask for the tokens it gave to be revoked.
   */
  async exchangeAuthorizationCode(
    client: OAuthClientInformationFull,
    authorizationCode: string,
    _codeVerifier?: string,
    redirectUri?: string,
    resource?: URL,
  ): Promise<OAuthTokens> {
    const hash = sha256(authorizationCode);
    const nowMs = this.now();
    // A refusal throws inside the transaction, which undoes the code's use: a client that sent a wrong redirect_uri or
    // resource may try again with the right one. A replay ends the grant once the transaction is over.
    const outcome = await this.db.transaction(
      async (tx): Promise<{ kind: "tokens"; tokens: OAuthTokens } | { kind: "replay"; keyId: string }> => {
        const code: IssuedCode | undefined = await this.store.useCode(hash, client.client_id, nowMs, tx);
        if (!code) {
          const keyId = await this.store.usedCodeKey(hash, client.client_id, tx);
          if (keyId) return { kind: "replay", keyId };
          throw new InvalidGrantError("The authorization code is unknown, used or expired.");
        }
        if (redirectUri !== undefined && redirectUri !== code.redirectUri)
          throw new InvalidGrantError("redirect_uri differs from the authorization request's.");
        if (resource !== undefined && !sameResource(resource.href, code.resource))
          throw new InvalidTargetError(`The authorization code is for ${code.resource}.`);
        const tokens = await this.issue(tx, code, nowMs);
        if (!tokens) throw new InvalidGrantError("The connection was revoked.");
        return { kind: "tokens", tokens };
      },
      { durable: true },
    );
    if (outcome.kind === "tokens") return outcome.tokens;
    await this.endGrant(outcome.keyId);
    throw new InvalidGrantError("The authorization code was used already: the connection it made is revoked.");
  }

  /**
   * Rotates a refresh token: the one presented is used up, a new pair is issued. One presented again after its rotation
   * (stolen, or replayed) ends the grant: its legitimate holder has to connect again, and so does whoever replayed it.
   */
  async exchangeRefreshToken(
    client: OAuthClientInformationFull,
    refreshToken: string,
    scopes?: string[],
    resource?: URL,
  ): Promise<OAuthTokens> {
    if ((scopes ?? []).some((scope) => scope !== MCP_OAUTH_SCOPE))
      throw new InvalidScopeError(`A refresh may ask for the scope ${MCP_OAUTH_SCOPE} only.`);
    const hash = sha256(refreshToken);
    const nowMs = this.now();
    const outcome = await this.db.transaction(
      async (tx): Promise<{ kind: "tokens"; tokens: OAuthTokens } | { kind: "replay"; keyId: string }> => {
        const used = refreshToken.startsWith(REFRESH_TOKEN_PREFIX)
          ? await this.store.useRefreshToken(hash, client.client_id, nowMs, tx)
          : undefined;
        if (!used) {
          const known = await this.store.token(hash, tx);
          if (known?.kind === "refresh" && known.usedAtMs !== null && known.clientId === client.client_id) {
            // Just rotated: two refreshes at once, or a retry of one whose answer was lost. Refused, not a theft.
            if (nowMs - known.usedAtMs < ROTATION_GRACE_MS)
              throw new InvalidGrantError("The refresh token was rotated a moment ago: use the one that refresh returned.");
            return { kind: "replay", keyId: known.apiKeyId };
          }
          throw new InvalidGrantError("The refresh token is unknown, used or expired.");
        }
        // Refusals throw, undoing the rotation: the client may try again with the right resource.
        if (resource !== undefined && !sameResource(resource.href, used.resource))
          throw new InvalidTargetError(`The refresh token is for ${used.resource}.`);
        const tokens = await this.issue(tx, used, nowMs);
        if (!tokens) throw new InvalidGrantError("The connection was revoked or has expired.");
        return { kind: "tokens", tokens };
      },
      { durable: true },
    );
    if (outcome.kind === "tokens") return outcome.tokens;
    await this.endGrant(outcome.keyId);
    throw new InvalidGrantError("The refresh token was used already: the connection is revoked. Connect again.");
  }

  /** A new access and refresh token for a live grant, neither outliving its key; undefined when the key is revoked or expired. */
  private async issue(
    tx: Sql,
    grant: { clientId: string; apiKeyId: string; resource: string },
    nowMs: number,
  ): Promise<OAuthTokens | undefined> {
    const key = await this.keyRows.byId(grant.apiKeyId, tx);
    if (!key || key.revokedAtMs !== null || isExpired(key, nowMs)) return undefined;
    const cap = (ttlMs: number) => Math.min(nowMs + ttlMs, key.expiresAtMs ?? Number.POSITIVE_INFINITY);
    const access = secret(ACCESS_TOKEN_PREFIX);
    const refresh = secret(REFRESH_TOKEN_PREFIX);
    const accessExpiresAtMs = cap(this.settings.accessTokenTtlMs);
    const base = { clientId: grant.clientId, apiKeyId: grant.apiKeyId, resource: grant.resource };
    await this.store.insertToken(sha256(access), { ...base, kind: "access", expiresAtMs: accessExpiresAtMs }, nowMs, tx);
    await this.store.insertToken(
      sha256(refresh),
      { ...base, kind: "refresh", expiresAtMs: cap(this.settings.refreshTokenTtlMs) },
      nowMs,
      tx,
    );
    return {
      access_token: access,
      token_type: "Bearer",
      expires_in: Math.max(1, Math.floor((accessExpiresAtMs - nowMs) / 1_000)),
      refresh_token: refresh,
      scope: MCP_OAUTH_SCOPE,
    };
  }

  /**
   * An access token as the resource server (`/mcp`) reads it: its client, expiry and resource, and the grant's key id
   * in `extra.apiKeyId` (the route checks the key is live). Throws for anything that is not a live access token.
   */
  /**
   * verifyAccessToken once per request (`holder`: the request): the request budget (server/http/rate-limit-budgets.ts)
   * and /mcp's credential check both read the token, and the second is answered from the first's lookup.
   */
  verifyAccessTokenOnce(holder: object, token: string): Promise<AuthInfo> {
    let verified = this.verifiedPerRequest.get(holder);
    if (!verified || verified.token !== token) {
      verified = { token, info: this.verifyAccessToken(token) };
      this.verifiedPerRequest.set(holder, verified);
    }
    return verified.info;
  }

  private readonly verifiedPerRequest = new WeakMap<object, { token: string; info: Promise<AuthInfo> }>();

  /** Whether another authorization request may wait for consent now (MCP_OAUTH_REQUESTS_MAX). */
  async hasRoomForRequest(): Promise<boolean> {
    return (await this.store.pendingRequestCount(this.now())) < this.settings.requestsMax;
  }

  async verifyAccessToken(token: string): Promise<AuthInfo> {
    const stored: StoredToken | undefined = token.startsWith(ACCESS_TOKEN_PREFIX) ? await this.store.token(sha256(token)) : undefined;
    if (!stored || stored.kind !== "access" || stored.expiresAtMs <= this.now()) throw new InvalidTokenProblem();
    return {
      token,
      clientId: stored.clientId,
      scopes: [MCP_OAUTH_SCOPE],
      expiresAt: Math.floor(stored.expiresAtMs / 1_000),
      resource: new URL(stored.resource),
      extra: { apiKeyId: stored.apiKeyId },
    };
  }

  /**
   * RFC 7009 revocation by the client: an access token ends alone; a refresh token ends the grant (the client is
   * disconnecting), its key revoked with it. A token that is unknown, or another client's, is left alone (and the
   * answer is the same 200: RFC 7009 §2.2).
   */
  async revokeToken(client: OAuthClientInformationFull, request: OAuthTokenRevocationRequest): Promise<void> {
    const hash = sha256(request.token);
    const stored = await this.store.token(hash);
    if (!stored || stored.clientId !== client.client_id) return;
    if (stored.kind === "access") return this.store.deleteToken(hash);
    await this.endGrant(stored.apiKeyId);
  }

  /** Ends a grant: its key revoked (every replica forgets it) and its tokens deleted. */
  async endGrant(keyId: string): Promise<void> {
    await this.keys.revoke(keyId);
    await this.store.deleteTokensOfKey(keyId);
  }

  /** Deletes expired requests, codes and tokens, and clients registered a day ago that hold no grant; how many rows went. */
  purgeExpired(): Promise<number> {
    const nowMs = this.now();
    return this.store.purgeExpired(nowMs, nowMs - UNUSED_CLIENT_TTL_MS);
  }
}

/** A token that is no live access token: the route answers 401 with error="invalid_token". */
export class InvalidTokenProblem extends Error {
  constructor() {
    super("The access token is unknown, expired or revoked.");
    this.name = "InvalidTokenProblem";
  }
}

/** Whether a bearer credential is an `atom_` key rather than an OAuth access token. */
export const isApiKeyCredential = (token: string) => token.startsWith(KEY_PREFIX);

/** The client's redirect URI with the response's parameters (and its state, when it sent one). */
function redirectWith(request: PendingRequest, parameters: Record<string, string>): string {
  const url = new URL(request.redirectUri);
  for (const [name, value] of Object.entries(parameters)) url.searchParams.set(name, value);
  if (request.state !== null) url.searchParams.set("state", request.state);
  return url.href;
}
