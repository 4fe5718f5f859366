import express, { type NextFunction, type Request, type Response, type Router } from "express";
import { authorizationHandler } from "@modelcontextprotocol/sdk/server/auth/handlers/authorize.js";
import { tokenHandler } from "@modelcontextprotocol/sdk/server/auth/handlers/token.js";
import { clientRegistrationHandler } from "@modelcontextprotocol/sdk/server/auth/handlers/register.js";
import { revocationHandler } from "@modelcontextprotocol/sdk/server/auth/handlers/revoke.js";
import type { OAuthMetadata, OAuthProtectedResourceMetadata } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { Config } from "../../config";
import type { SkillRegistry } from "../../catalog/skills";
import type { ApiKeys } from "../../identity/api-keys";
import { MCP_OAUTH_SCOPE, type McpOAuth, authorizationRequestProblem } from "../../identity/mcp-oauth";
import type { Sessions } from "../../identity/sessions";
import { dataEnvelopeOf } from "../envelope";
import { ApiError } from "../errors";
import { jsonBody } from "../json-body";
import { parseParams, parseRequest } from "../contract/common";
import { UNKNOWN_REQUEST, approveBody, approvedView, connectParams, redirectView, requestView } from "../contract/mcp-oauth";
import { publicBase } from "../public-url";
import { requireSession } from "../session-cookies";
import { clientKey } from "../rate-limits";
import { allowedSkillsOf, expiryOf, newLimitOf } from "./key-fields";
import { MAX_LIVE_KEYS } from "./keys";

/** Where the dashboard asks a person to consent (server/web/src/pages/connect.ts). */
export const CONNECT_PATH = "/connect";
/** The authorization server's endpoints, under one prefix of their own. */
const OAUTH = { authorize: "/oauth/authorize", token: "/oauth/token", register: "/oauth/register", revoke: "/oauth/revoke" };
/** RFC 9728's document for the resource at /mcp, and RFC 8414's for the authorization server (the gateway itself). */
export const PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource/mcp";
const AUTHORIZATION_SERVER_PATH = "/.well-known/oauth-authorization-server";

/** The URL of the hosted MCP endpoint, the one resource its tokens are for. */
export const mcpResourceOf = (config: Config, req: Request) => `${publicBase(config, req)}/mcp`;
/** The URL a 401 of /mcp points clients to (WWW-Authenticate's resource_metadata). */
export const resourceMetadataUrlOf = (config: Config, req: Request) => `${publicBase(config, req)}${PROTECTED_RESOURCE_PATH}`;

/**
 * The hosted MCP server's OAuth 2.1 authorization server (server/identity/mcp-oauth.ts says what it grants):
 *   GET  /.well-known/oauth-protected-resource/mcp   RFC 9728: /mcp's authorization server is this gateway
 *   GET  /.well-known/oauth-authorization-server     RFC 8414: the endpoints below, PKCE S256, public clients
 *   POST /oauth/register                             RFC 7591 dynamic client registration
 *   GET  /oauth/authorize                            code flow with PKCE: checks, then the dashboard's /connect page
 *   POST /oauth/token                                authorization_code and refresh_token grants (RFC 8707 resource)
 *   POST /oauth/revoke                               RFC 7009
 * The four endpoints are the official MCP SDK's handlers over the gateway's provider, with their own formats (OAuth's
 * `{error, error_description}`) and CORS for browser-based clients; the metadata documents are built per request from
 * PUBLIC_URL (or the gateway's own loopback address), as every link the gateway makes.
 * And the consent step, for the dashboard (session + CSRF, the spec's envelope):
 *   GET  /v1/oauth/requests/:requestId            the client asking, and where it will be sent back
 *   POST /v1/oauth/requests/:requestId/approve    { allowed_skills, spend_limit_usd, spend_limit_period, expires_at }
 *   POST /v1/oauth/requests/:requestId/deny
 */
export function mcpOAuthRoutes(deps: {
  config: Config;
  oauth: McpOAuth;
  sessions: Sessions;
  keys: ApiKeys;
  skills: SkillRegistry;
  now?: () => number;
}): Router {
  const router = express.Router();
  const now = deps.now ?? Date.now;
  // The authorization endpoint is a person's browser: the SDK's own per-address limit (in memory, per replica) on top of
  // the app's budgets, counted by the app's idea of the client's address (TRUST_PROXY). Registration, token and
  // revocation requests come from the clients' servers, where one hosted client (claude.ai, ChatGPT) speaks for all its
  // users from a few addresses: a per-address limit there would let one user lock out every other; they count against
  // the app's public budget only, and what they can make the gateway store is bounded (MCP_OAUTH_CLIENTS_MAX).
  const limited = (max: number, windowMs: number) => ({ max, windowMs, keyGenerator: clientKey, validate: false });

  const metadataOf = (req: Request): OAuthMetadata => {
    const base = publicBase(deps.config, req);
    return {
      issuer: new URL(base).href,
      authorization_endpoint: base + OAUTH.authorize,
      token_endpoint: base + OAUTH.token,
      registration_endpoint: base + OAUTH.register,
      revocation_endpoint: base + OAUTH.revoke,
      scopes_supported: [MCP_OAUTH_SCOPE],
      response_types_supported: ["code"],
      grant_types_supported: ["authorization_code", "refresh_token"],
      code_challenge_methods_supported: ["S256"],
      // Public clients only: PKCE protects the code, and no client secret is issued (so none can leak from here).
      token_endpoint_auth_methods_supported: ["none"],
      revocation_endpoint_auth_methods_supported: ["none"],
      service_documentation: `${base}/openapi.json`,
    };
  };

  const protectedResource = (req: Request, res: Response) => {
    const base = publicBase(deps.config, req);
    const document: OAuthProtectedResourceMetadata = {
      resource: mcpResourceOf(deps.config, req),
      authorization_servers: [new URL(base).href],
      scopes_supported: [MCP_OAUTH_SCOPE],
      bearer_methods_supported: ["header"],
      resource_name: "Skill Gateway (hosted MCP)",
    };
    res.set("cache-control", "public, max-age=3600").set("access-control-allow-origin", "*").json(document);
  };
  router.get(PROTECTED_RESOURCE_PATH, protectedResource);
  router.get("/.well-known/oauth-protected-resource", protectedResource);
  router.get(AUTHORIZATION_SERVER_PATH, (req, res) => {
    res.set("cache-control", "public, max-age=3600").set("access-control-allow-origin", "*").json(metadataOf(req));
  });

  // What the provider's authorize() needs of the request: the resource it grants, and where the consent page is. And
  // every check that the SDK's handler would answer by redirecting to the client, made first and answered here
  // (400): a client anyone may register must not turn the gateway's origin into an open redirect.
  router.use(
    OAUTH.authorize,
    express.urlencoded({ extended: false, limit: 16_384 }),
    async (req: Request, res: Response, next: NextFunction) => {
      const params = (req.method === "POST" ? req.body : req.query) as Record<string, unknown>;
      const problem = params.client_id === undefined ? undefined : authorizationRequestProblem(params, mcpResourceOf(deps.config, req));
      if (problem !== undefined) {
        res.status(400).set("cache-control", "no-store").json({ error: "invalid_request", error_description: problem });
        return;
      }
      // Full is answered here too, not by a redirect to a client that did nothing but ask.
      if (params.client_id !== undefined && !(await deps.oauth.hasRoomForRequest())) {
        res.status(503).set("cache-control", "no-store").set("retry-after", "60").json({
          error: "temporarily_unavailable",
          error_description: "Too many connections are waiting for consent now; try again in a few minutes.",
        });
        return;
      }
      res.locals.mcpResource = mcpResourceOf(deps.config, req);
      res.locals.consentUrl = (requestId: string) =>
        `${publicBase(deps.config, req)}${CONNECT_PATH}?request=${encodeURIComponent(requestId)}`;
      next();
    },
  );
  router.use(OAUTH.authorize, authorizationHandler({ provider: deps.oauth, rateLimit: limited(100, 15 * 60_000) }));
  router.use(OAUTH.token, tokenHandler({ provider: deps.oauth, rateLimit: false }));
  router.use(
    OAUTH.register,
    clientRegistrationHandler({ clientsStore: deps.oauth.clientsStore, clientIdGeneration: false, rateLimit: false }),
  );
  router.use(OAUTH.revoke, revocationHandler({ provider: deps.oauth, rateLimit: false }));

  const session = requireSession(deps.sessions);
  const json = jsonBody(16_384);
  const requestIdOf = (req: Request) => parseParams(connectParams, req.params, UNKNOWN_REQUEST).requestId;

  router.get("/v1/oauth/requests/:requestId", session, async (req, res) => {
    const view = await deps.oauth.describe(requestIdOf(req));
    if (!view) throw new ApiError("not_found", UNKNOWN_REQUEST);
    res.set("cache-control", "no-store").json(
      dataEnvelopeOf(requestView, {
        client_id: view.clientId,
        client_name: view.clientName,
        client_uri: view.clientUri,
        redirect_uri: view.redirectUri,
        expires_at: new Date(view.expiresAtMs).toISOString(),
      }),
    );
  });

  router.post("/v1/oauth/requests/:requestId/approve", session, json, async (req, res) => {
    const requestId = requestIdOf(req);
    const body = parseRequest(approveBody, req.body ?? {});
    const accountId = req.session!.accountId;
    const nowMs = now();
    const approved = await deps.oauth.approve(
      requestId,
      accountId,
      {
        allowedSkills: allowedSkillsOf(deps.skills, body.allowed_skills) ?? null,
        spendLimit: newLimitOf(body) ?? null,
        expiresAtMs: expiryOf(body.expires_at, nowMs) ?? null,
      },
      async () => {
        const live = (await deps.keys.listForAccount(accountId)).filter((k) => k.revokedAtMs === null).length;
        if (live >= MAX_LIVE_KEYS)
          throw new ApiError(
            "invalid_request",
            `An account may hold ${MAX_LIVE_KEYS} live keys, and a connection is one: revoke one first (API Keys).`,
          );
      },
    );
    if (!approved) throw new ApiError("not_found", UNKNOWN_REQUEST);
    res.set("cache-control", "no-store").json(dataEnvelopeOf(approvedView, { redirect_to: approved.redirectTo, key_id: approved.keyId }));
  });

  router.post("/v1/oauth/requests/:requestId/deny", session, async (req, res) => {
    const redirectTo = await deps.oauth.deny(requestIdOf(req));
    if (!redirectTo) throw new ApiError("not_found", UNKNOWN_REQUEST);
    res.set("cache-control", "no-store").json(dataEnvelopeOf(redirectView, { redirect_to: redirectTo }));
  });

  return router;
}
