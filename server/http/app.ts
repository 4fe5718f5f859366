import type http from "node:http";
import express, { type NextFunction, type Request, type Response } from "express";
import type { Store } from "express-rate-limit";
import type { SiweNonces } from "../identity/siwe";
import type { ApiKeys } from "../identity/api-keys";
import type { Config } from "../config";
import type { CallService } from "../gateway/call-service";
import type { CallsStore } from "../gateway/calls-store";
import type { RefusalCounter } from "../gateway/refusal-counter";
import type { QualityRecorder } from "../gateway/quality-recorder";
import type { EgressPolicy } from "../gateway/egress";
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
import type { SettlementStores } from "../settlement/store";
import type { ChainConnection, MoneyPath } from "../settlement/money-path";
import { moneyRoutes } from "./routes/money";
import { sessionRoutes } from "./routes/session";
import type { Sessions } from "../identity/sessions";
import { siweRoutes } from "./routes/auth-siwe";
import { keyRoutes } from "./routes/keys";
import { ownKeyRoutes } from "./routes/own-key";
import { sellerRoutes } from "./routes/seller";
import type { MagicLinks } from "../identity/email";
import type { OAuthSignIn } from "../identity/oauth";
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
import type { McpOAuth } from "../identity/mcp-oauth";
import { metricsRoutes } from "./routes/metrics";
import type { Logger } from "pino";
import type { GatewayMetrics } from "../ops/metrics";
import { observeRequests } from "./request-log";
import { x402Routes } from "./routes/x402";
import type { X402Service } from "../x402";

export interface AppDeps {
  config: Config;
  keys: ApiKeys;
  skills: SkillRegistry;
  ledger: Ledger;
  /** Settlement's tables: linked addresses, vouchers, and the reads behind earnings. */
  settlement: SettlementStores;
  calls: CallsStore;
  /** The counts of calls a key's own limits refused (GET /v1/usage/daily's `refused`). */
  refusals: RefusalCounter;
  /** The skills' measured quality: the marketplace's figures and the sellers' stats. */
  quality: QualityRecorder;
  callService: CallService;
  /** Which skill backends may be listed and called (the listing checks it too, for a clear 400). */
  egress: EgressPolicy;
  moneyPath?: MoneyPath;
  chain?: ChainConnection;
  /** Pay-per-call with x402, when the chain connection has an x402 key. */
  x402?: X402Service;
  sessions: Sessions;
  /** E-mail magic links, and GitHub/Google sign-in. */
  magicLinks: MagicLinks;
  oauth: OAuthSignIn;
  /** The hosted MCP server's OAuth 2.1 authorization server (remote MCP clients connect through it). */
  mcpOAuth: McpOAuth;
  /** Card top-ups through the payment provider (the sandbox by default). */
  cardTopups: CardTopups;
  /** Embedded wallets, when the gateway has the ERC-4337 stack (a SIWE owner's sweep: prepare, sign, submit). */
  wallets?: WalletService;
  /** SIWE nonces, bounded per client address and in all. */
  siweNonces: SiweNonces;
  /** Where the counters of the request budgets live, one store each (./rate-limits.ts). */
  rateLimitStores: Record<RateLimitName, Store>;
  /** With REDIS_URL: the shared limits' connection, checked by GET /readyz. */
  redis?: { ping(): Promise<unknown> };
  log: (message: string, error?: unknown) => void;
  /** Where each request's log line goes (./request-log.ts). */
  logger: Logger;
  /** The gateway's metrics, served at GET /metrics to a holder of config.metricsToken. */
  metrics: GatewayMetrics;
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
  const calls = callHandler({ keys: deps.keys, calls: deps.callService, maxRequestBytes: deps.config.maxRequestBytes, log: deps.log });
  const app = createApp(deps);
  return observeRequests(deps, (req, res) => {
    // Every answer, the fast call path's too (writeHead keeps headers set before it): a browser must read each as the
    // type it declares, never sniff a JSON body that echoes a seller's or a caller's text into HTML or script.
    res.setHeader("x-content-type-options", "nosniff");
    if (!calls(req, res, () => app(req, res))) app(req, res);
  });
}

/** The Express application: the read endpoints, and the one place their errors become the spec's envelope. */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  // Who the client is, for every per-address limit: the socket's peer unless TRUST_PROXY names the proxies in front.
  app.set("trust proxy", deps.config.trustProxy);
  // Which names the session cookies go by (__Host- prefixed when Secure): ./session-cookies.ts reads it.
  app.locals.secureCookies = deps.config.secureCookies;

  // First of all, so that a flood costs no more than a counter: everything below counts against a budget,
  // its address's unless its route consumes the valid credential it carries (a new public route too).
  const limits = createRateLimits({
    config: deps.config,
    keys: deps.keys,
    sessions: deps.sessions,
    stores: deps.rateLimitStores,
    oauthTokens: deps.mcpOAuth,
    log: deps.log,
  });
  app.use(limits.requests);
  app.use(unauthenticatedCallRoutes(deps.keys));
  // OAuth for the hosted MCP server, ahead of the OPTIONS refusal below: its token, registration and metadata endpoints
  // answer browser-based MCP clients' CORS preflights, as OAuth clients expect.
  app.use(
    mcpOAuthRoutes({
      config: deps.config,
      oauth: deps.mcpOAuth,
      sessions: deps.sessions,
      keys: deps.keys,
      skills: deps.skills,
      now: deps.now,
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
      ledger: deps.ledger,
      chain: deps.chain,
      moneyPath: deps.moneyPath,
      redis: deps.redis,
      maxLagMs: deps.config.readyMaxLagMs,
      log: deps.log,
    }),
  );
  app.use(openApiRoutes());
  app.use(apiReferenceRoutes());
  app.use(readRoutes({ ...deps, addresses: deps.settlement.addresses }));
  app.use(
    usageRoutes({ keys: deps.keys, sessions: deps.sessions, calls: deps.calls, refusals: deps.refusals, now: deps.now, log: deps.log }),
  );
  app.use(
    withdrawalRoutes({
      keys: deps.keys,
      sessions: deps.sessions,
      voucherStore: deps.settlement.vouchers,
      vouchers: deps.moneyPath?.vouchers,
    }),
  );
  app.use(
    moneyRoutes({
      keys: deps.keys,
      sessions: deps.sessions,
      calls: deps.calls,
      earningsOf: (accountId) => earningsOf(deps.settlement, accountId, deps.chain?.publicClient, deps.chain?.escrowAddress),
      moneyPath: deps.moneyPath,
      chain: deps.chain,
    }),
  );
  app.use(sessionRoutes({ sessions: deps.sessions, ledger: deps.ledger, addresses: deps.settlement.addresses }));
  app.use(
    siweRoutes({
      sessions: deps.sessions,
      config: deps.config,
      publicClient: deps.chain?.publicClient,
      log: deps.log,
      nonces: deps.siweNonces,
      limit: limits.signIn,
    }),
  );
  app.use(keyRoutes({ sessions: deps.sessions, keys: deps.keys, skills: deps.skills, now: deps.now }));
  app.use(ownKeyRoutes({ keys: deps.keys, ledger: deps.ledger, now: deps.now }));
  app.use(
    sellerRoutes({
      sessions: deps.sessions,
      ledger: deps.ledger,
      settlement: deps.settlement,
      skills: deps.skills,
      config: deps.config,
      egress: deps.egress,
      calls: deps.calls,
      quality: deps.quality,
    }),
  );
  app.use(emailAuthRoutes({ config: deps.config, sessions: deps.sessions, links: deps.magicLinks, limit: limits.signIn }));
  app.use(oauthRoutes({ config: deps.config, sessions: deps.sessions, oauth: deps.oauth, limit: limits.signIn, log: deps.log }));
  app.use(topupRoutes({ sessions: deps.sessions, cardTopups: deps.cardTopups }));
  app.use(walletRoutes({ sessions: deps.sessions, wallets: deps.wallets, log: deps.log }));
  app.use(claimRoutes({ sessions: deps.sessions, wallets: deps.wallets, log: deps.log }));
  app.use(walletWithdrawRoutes({ sessions: deps.sessions, wallets: deps.wallets, log: deps.log }));
  app.use(historyRoutes({ keys: deps.keys, sessions: deps.sessions, ledger: deps.ledger }));
  app.use(platformRoutes({ config: deps.config, ledger: deps.ledger, sessions: deps.sessions, oauth: deps.oauth, chain: deps.chain }));
  // x402: no account or key, so on the public per-address budget whatever credential a request carries.
  app.use(x402Routes({ config: deps.config, x402: deps.x402 }));
  app.use(tryRoutes({ sessions: deps.sessions, keys: deps.keys, calls: deps.callService, maxRequestBytes: deps.config.maxRequestBytes }));
  // The hosted MCP server: a valid key counts against its own budget above, a missing or bad one against the address.
  app.use(
    mcpRoutes({
      config: deps.config,
      keys: deps.keys,
      oauth: deps.mcpOAuth,
      skills: deps.skills,
      quality: deps.quality,
      calls: deps.callService,
      log: deps.log,
    }),
  );

  app.use(metricsRoutes({ metrics: deps.metrics, token: deps.config.metricsToken }));

  app.use(dashboardRoutes());
  app.use((req: Request, _res: Response, next: NextFunction) => {
    next(noRoute(req));
  });

  // Express recognises an error handler by its four parameters.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const apiError = toApiError(fromExpress(error));
    if (apiError.status >= 500)
      deps.log(apiError.code === "internal_error" ? "internal error" : `${apiError.code}: ${apiError.message}`, apiError.cause ?? error);
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
