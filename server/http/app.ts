import type http from "node:http";
import express, { type NextFunction, type Request, type Response } from "express";
import type { Store } from "express-rate-limit";
import type { Config } from "../config";
import type { SkillRegistry } from "../catalog/skills";
import type { Ledger } from "../ledger/ledger";
import { GatewayError } from "../errors";
import { errorEnvelope } from "./envelope";
import { ApiError, toApiError } from "./errors";
import { type RateLimitName, createRateLimits } from "./rate-limits";
import { dashboardRoutes } from "./routes/dashboard";
import { healthRoutes } from "./routes/health";
import { openApiRoutes } from "./routes/openapi";
import { apiReferenceRoutes } from "./routes/api-reference";
import { callHandler, unauthenticatedCallRoutes } from "./routes/call";
import { readRoutes } from "./routes/read";
import { usageRoutes } from "./routes/usage";
import { withdrawalRoutes } from "./routes/withdrawals";
import { earningsOf } from "../settlement/earnings";
import type { Settlement } from "../settlement/money-path";
import type { Identity } from "../identity/identity-module";
import type { CallPath } from "../gateway/call-path";
import { moneyRoutes } from "./routes/money";
import { sessionRoutes } from "./routes/session";
import { siweRoutes } from "./routes/auth-siwe";
import { keyRoutes } from "./routes/keys";
import { ownKeyRoutes } from "./routes/own-key";
import { sellerRoutes } from "./routes/seller";
import { emailAuthRoutes } from "./routes/auth-email";
import { oauthRoutes } from "./routes/auth-oauth";
import type { CardTopups } from "../payments/card-topups";
import { topupRoutes } from "./routes/topups";
import type { WalletService } from "../wallets/wallet-service";
import { walletRoutes } from "./routes/wallet";
import { claimRoutes } from "./routes/claim";
import { walletWithdrawRoutes } from "./routes/wallet-withdraw";
import { historyRoutes } from "./routes/history";
import { platformRoutes } from "./routes/platform";
import { tryRoutes } from "./routes/try";
import { mcpRoutes } from "./routes/mcp";
import { mcpOAuthRoutes } from "./routes/mcp-oauth";
import { metricsRoutes } from "./routes/metrics";
import type { Logger } from "pino";
import type { GatewayMetrics } from "../ops/metrics";
import { observeRequests } from "./request-log";
import { x402Routes } from "./routes/x402";
import type { X402Service } from "../x402";

/** What the HTTP layer is given: the modules the composition root built, each with the services its routes use. */
export interface AppDeps {
  config: Config;
  ledger: Ledger;
  skills: SkillRegistry;
  /** API keys, sessions, and every way to sign in. */
  identity: Identity;
  /** The calls log, the refusal counts, the quality roll-up, keyed calls, the egress policy. */
  callPath: CallPath;
  /** Settlement's tables, the chain and the money path (deposits, settlement, vouchers) when there is one. */
  settlement: Settlement;
  /** Card top-ups through the payment provider (the sandbox by default). */
  cardTopups: CardTopups;
  /** Embedded wallets, when the gateway has the ERC-4337 stack (a SIWE owner's sweep: prepare, sign, submit). */
  wallets?: WalletService;
  /** Pay-per-call with x402, when the chain connection has an x402 key. */
  x402?: X402Service;
  ops: {
    log: (message: string, error?: unknown) => void;
    /** Where each request's log line goes (./request-log.ts). */
    logger: Logger;
    /** The gateway's metrics, served at GET /metrics to a holder of config.metricsToken. */
    metrics: GatewayMetrics;
    /** Where the counters of the request budgets live, one store each (./rate-limits.ts). */
    rateLimitStores: Record<RateLimitName, Store>;
    /** With REDIS_URL: the shared limits' connection, checked by GET /readyz. */
    redis?: { ping(): Promise<unknown> };
  };
  /** The clock API keys' spending periods are read by (GET /v1/keys's spent and resets_at); Date.now by default. */
  now?: () => number;
}

/**
 * The gateway's HTTP request listener. The two call endpoints are served straight from
 * node:http (./routes/call.ts), ahead of Express: on the call path Express's request
 * setup and router cost more than everything else the gateway does per call. Everything
 * else goes to the Express app below.
 */
export function createRequestListener(deps: AppDeps): http.RequestListener {
  const { config, identity, callPath, ops } = deps;
  const calls = callHandler({ keys: identity.keys, calls: callPath.callService, maxRequestBytes: config.maxRequestBytes, log: ops.log });
  const app = createApp(deps);
  return observeRequests(ops, (req, res) => {
    // Every answer, the fast call path's too (writeHead keeps headers set before it): a browser must read each as the
    // type it declares, never sniff a JSON body that echoes a seller's or a caller's text into HTML or script.
    res.setHeader("x-content-type-options", "nosniff");
    if (!calls(req, res, () => app(req, res))) app(req, res);
  });
}

/** The Express application: the read endpoints, and the one place their errors become the spec's envelope. */
export function createApp(deps: AppDeps): express.Express {
  const { config, ledger, skills, identity, callPath, settlement, ops, now } = deps;
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  // Who the client is, for every per-address limit: the socket's peer unless TRUST_PROXY names the proxies in front.
  app.set("trust proxy", config.trustProxy);
  // Which names the session cookies go by (__Host- prefixed when Secure): ./session-cookies.ts reads it.
  app.locals.secureCookies = config.secureCookies;

  // First of all, so that a flood costs no more than a counter: everything below counts against a budget,
  // its address's unless its route consumes the valid credential it carries (a new public route too).
  const limits = createRateLimits({
    config,
    keys: identity.keys,
    sessions: identity.sessions,
    stores: ops.rateLimitStores,
    oauthTokens: identity.mcpOAuth,
    log: ops.log,
  });
  app.use(limits.requests);
  app.use(unauthenticatedCallRoutes(identity.keys));
  // OAuth for the hosted MCP server, ahead of the OPTIONS refusal below: its token, registration and metadata endpoints
  // answer browser-based MCP clients' CORS preflights, as OAuth clients expect.
  app.use(
    mcpOAuthRoutes({
      config,
      oauth: identity.mcpOAuth,
      sessions: identity.sessions,
      keys: identity.keys,
      skills,
      now,
    }),
  );

  // Express's routers answer OPTIONS themselves, 200 with a text/plain list of methods, outside
  // the envelope. The API serves no CORS preflight (the dashboard is same-origin), so OPTIONS is
  // answered as every other method a path does not serve: 404 in the envelope.
  app.use((req: Request, _res: Response, next: NextFunction) => {
    next(req.method === "OPTIONS" ? noRoute(req) : undefined);
  });

  app.use(
    healthRoutes({
      ledger,
      chain: settlement.chain,
      moneyPath: settlement.moneyPath,
      redis: ops.redis,
      maxLagMs: config.readyMaxLagMs,
      log: ops.log,
    }),
  );
  app.use(openApiRoutes());
  app.use(apiReferenceRoutes());
  app.use(
    readRoutes({
      config,
      keys: identity.keys,
      sessions: identity.sessions,
      skills,
      ledger,
      addresses: settlement.stores.addresses,
      quality: callPath.quality,
    }),
  );
  app.use(
    usageRoutes({
      keys: identity.keys,
      sessions: identity.sessions,
      calls: callPath.calls,
      refusals: callPath.refusals,
      now,
      log: ops.log,
    }),
  );
  app.use(
    withdrawalRoutes({
      keys: identity.keys,
      sessions: identity.sessions,
      voucherStore: settlement.stores.vouchers,
      vouchers: settlement.moneyPath?.vouchers,
    }),
  );
  app.use(
    moneyRoutes({
      keys: identity.keys,
      sessions: identity.sessions,
      calls: callPath.calls,
      earningsOf: (accountId) => earningsOf(settlement.stores, accountId, settlement.chain?.publicClient, settlement.chain?.escrowAddress),
      moneyPath: settlement.moneyPath,
      chain: settlement.chain,
    }),
  );
  app.use(sessionRoutes({ sessions: identity.sessions, ledger, addresses: settlement.stores.addresses }));
  app.use(
    siweRoutes({
      sessions: identity.sessions,
      config,
      publicClient: settlement.chain?.publicClient,
      log: ops.log,
      nonces: identity.siweNonces,
      limit: limits.signIn,
    }),
  );
  app.use(keyRoutes({ sessions: identity.sessions, keys: identity.keys, skills, now }));
  app.use(ownKeyRoutes({ keys: identity.keys, ledger, now }));
  app.use(
    sellerRoutes({
      sessions: identity.sessions,
      ledger,
      settlement: settlement.stores,
      skills,
      config,
      egress: callPath.egress,
      calls: callPath.calls,
      quality: callPath.quality,
    }),
  );
  app.use(emailAuthRoutes({ config, sessions: identity.sessions, links: identity.magicLinks, limit: limits.signIn }));
  app.use(oauthRoutes({ config, sessions: identity.sessions, oauth: identity.oauth, limit: limits.signIn, log: ops.log }));
  app.use(topupRoutes({ sessions: identity.sessions, cardTopups: deps.cardTopups }));
  app.use(walletRoutes({ sessions: identity.sessions, wallets: deps.wallets, log: ops.log }));
  app.use(claimRoutes({ sessions: identity.sessions, wallets: deps.wallets, log: ops.log }));
  app.use(walletWithdrawRoutes({ sessions: identity.sessions, wallets: deps.wallets, log: ops.log }));
  app.use(historyRoutes({ keys: identity.keys, sessions: identity.sessions, ledger }));
  app.use(platformRoutes({ config, ledger, sessions: identity.sessions, oauth: identity.oauth, chain: settlement.chain }));
  // x402: no account or key, so on the public per-address budget whatever credential a request carries.
  app.use(x402Routes({ config, x402: deps.x402 }));
  app.use(
    tryRoutes({ sessions: identity.sessions, keys: identity.keys, calls: callPath.callService, maxRequestBytes: config.maxRequestBytes }),
  );
  // The hosted MCP server: a valid key counts against its own budget above, a missing or bad one against the address.
  app.use(
    mcpRoutes({
      config,
      keys: identity.keys,
      oauth: identity.mcpOAuth,
      skills,
      quality: callPath.quality,
      calls: callPath.callService,
      log: ops.log,
    }),
  );

  app.use(metricsRoutes({ metrics: ops.metrics, token: config.metricsToken }));

  app.use(dashboardRoutes());
  app.use((req: Request, _res: Response, next: NextFunction) => {
    next(noRoute(req));
  });

  // Express recognises an error handler by its four parameters.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const apiError = toApiError(fromExpress(error));
    if (apiError.status >= 500)
      ops.log(apiError.code === "internal_error" ? "internal error" : `${apiError.code}: ${apiError.message}`, apiError.cause ?? error);
    res
      .status(apiError.status)
      .set(apiError.headers)
      .json(errorEnvelope(apiError.code, apiError.message, apiError.details));
  });
  return app;
}

/**
 * The 404 of a method and path no route serves. It names the method (one of the few Node accepts) but not the path:
 * a path is the client's text, and a link could make the gateway say anything a stranger chose, in its own envelope.
 */
function noRoute(req: Request): ApiError {
  return new ApiError("not_found", `No route for ${req.method} at this path: the API is described at GET /openapi.json.`);
}

/** Express's own client errors as the base error; anything else is left to toApiError (a 500 that tells nothing). */
function fromExpress(error: unknown): unknown {
  if (error instanceof GatewayError) return error;
  // Express's own client errors carry a 4xx status, and the body parser's a `type` that says which.
  const { status, type } = (error ?? {}) as { status?: unknown; type?: unknown };
  if (type === "entity.too.large") return new ApiError("payload_too_large", "Request body is larger than this endpoint accepts.");
  if (type === "entity.parse.failed") return new ApiError("invalid_json", "Request body is not valid JSON.");
  if (type === "charset.unsupported" || type === "encoding.unsupported")
    return new ApiError("invalid_request", "Send the body as plain UTF-8 JSON, without Content-Encoding.");
  // A malformed percent-escape in the path, say.
  if (typeof status === "number" && status >= 400 && status < 500) return new ApiError("invalid_request", "Malformed request.");
  return error;
}
