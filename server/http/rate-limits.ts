import type { NextFunction, Request, RequestHandler, Response } from "express";
import { type Store, ipKeyGenerator, rateLimit } from "express-rate-limit";
import type { ApiKeys } from "../identity/api-keys";
import type { Sessions } from "../identity/sessions";
import type { McpOAuth } from "../identity/mcp-oauth";
import type { Config } from "../config";
import { ApiError } from "./errors";
import { type Budget, budgetOf } from "./rate-limit-budgets";

/**
 * The request budgets of the Express app (express-rate-limit, a fixed one-minute window each):
 *   - sign-in: the endpoints that send mail, store a nonce or state, or open a session, per client
 *     address (SIGN_IN_RATE_LIMIT_PER_MIN, 20 by default), on those routes only and on top of the next;
 *   - and one of these three for every request, chosen by ./rate-limit-budgets.ts:
 *     - credential: a request to an operation that consumes an API key or a session and carries a
 *       valid one, per key or per session (CREDENTIAL_RATE_LIMIT_PER_MIN, 600 by default);
 *     - health: GET /healthz and /readyz, per client address (HEALTH_RATE_LIMIT_PER_MIN, 1,200);
 *     - public: everything else, per client address, whatever credential it carries
 *       (PUBLIC_RATE_LIMIT_PER_MIN, 600 by default): the marketplace listing, /v1/platform, x402,
 *       the dashboard's pages and assets, 401s and 404s.
 * A credential replaces its holder's address budget on the routes that use it, so that many
 * accounts behind one NAT are not one budget; it never switches the limit off, and it changes
 * nothing on a route that does not read it. The keyed call endpoints are served before Express
 * (./routes/call.ts) and limited per key by the call path's GCRA instead.
 * Over a limit: 429 rate_limited in the spec's envelope, with Retry-After.
 *
 * The counters live in a `Store` per budget: in memory by default (one process), in Redis when
 * the replicas share their limits (server/replication.ts).
 */

/** The budgets' names, for a store factory that keeps them apart. */
export type RateLimitName = "sign_in" | "public" | "credential" | "health";

const WINDOW_MS = 60_000;

/** IPv6 clients are counted per /64: one host usually holds a whole /64, and could rotate through it. */
const IPV6_SUBNET_BITS = 64;

/**
 * The key a client's requests are counted under: its address as Express sees it (the
 * socket's peer, or what TRUST_PROXY lets X-Forwarded-For say), an IPv6 address reduced to
 * its /64, an IPv4-mapped IPv6 address to its IPv4 form.
 */
export function clientKey(req: Request): string {
  return ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? "unknown", IPV6_SUBNET_BITS);
}

export interface RateLimitsParameters {
  config: Pick<Config, "signInRateLimitPerMin" | "publicRateLimitPerMin" | "credentialRateLimitPerMin" | "healthRateLimitPerMin">;
  keys: ApiKeys;
  sessions: Sessions;
  stores: Record<RateLimitName, Store>;
  /** The hosted MCP server's OAuth access tokens, each counted as the key it stands for (./rate-limit-budgets.ts). */
  oauthTokens?: Pick<McpOAuth, "verifyAccessTokenOnce">;
  log: (message: string, error?: unknown) => void;
}

export interface RateLimits {
  /** For the sign-in routes: counts every request to them, signed in or not. */
  signIn: RequestHandler;
  /** For the whole app, first of all: counts each request against its budget (credential, health or public). */
  requests: RequestHandler;
}

/** The limiters, over the stores given (which the caller shuts down). */
export function createRateLimits(parameters: RateLimitsParameters): RateLimits {
  const { config, keys, sessions, stores, log, oauthTokens } = parameters;
  const limiter = (name: RateLimitName, limit: number, keyGenerator: (req: Request) => string, what: (req: Request) => string) =>
    rateLimit({
      windowMs: WINDOW_MS,
      limit,
      store: stores[name],
      keyGenerator,
      identifier: name,
      // The call endpoints' style (../call-answer.ts): RateLimit-Policy, RateLimit-Limit, -Remaining and -Reset, one
      // style on every endpoint that limits (docs/api.md §6).
      standardHeaders: "draft-6",
      legacyHeaders: false,
      // The refusal goes through the app's error handler, like every other: the spec's envelope.
      handler: (req: Request, _res: Response, next: NextFunction) => next(rateLimited(req, what(req))),
      logger: {
        warn: (error, message) => log(`rate limit: ${message ?? "warning"}`, error),
        error: (error, message) => log(`rate limit: ${message ?? "error"}`, error),
      },
    });

  // The credential a request is counted under, set just before its limiter runs.
  const holders = new WeakMap<Request, Extract<Budget, { name: "credential" }>>();
  const holderOf = (req: Request) => {
    const budget = holders.get(req);
    if (!budget) throw new Error("a request reached the credential limiter without a credential");
    return budget;
  };
  const fromAddress = (what: string) => () => `Too many ${what} from your address`;
  const limiters = {
    public: limiter("public", config.publicRateLimitPerMin, clientKey, fromAddress("requests")),
    credential: limiter(
      "credential",
      config.credentialRateLimitPerMin,
      (req) => holderOf(req).holder,
      (req) => `Too many requests with this ${holderOf(req).label}`,
    ),
    health: limiter("health", config.healthRateLimitPerMin, clientKey, fromAddress("health checks")),
  };
  const budget = budgetOf({ keys, sessions, oauthTokens });

  return {
    signIn: limiter("sign_in", config.signInRateLimitPerMin, clientKey, fromAddress("sign-in requests")),
    requests: async (req, res, next) => {
      const chosen = await budget(req);
      if (chosen.name === "credential") {
        holders.set(req, chosen);
        await limiters.credential(req, res, next);
        return;
      }
      if (chosen.name === "public") {
        await limiters.public(req, res, next);
        return;
      }
      // A store that fails (Redis down) refuses the request (500), except a probe's: /healthz answers while the
      // process does, and /readyz must be able to say what is down. A probe over its limit is still refused.
      await limiters.health(req, res, (error?: unknown) => {
        if (error !== undefined && !(error instanceof ApiError)) {
          log(`rate limit: not counted, the store failed (${req.path} let through)`, error);
          next();
          return;
        }
        next(error);
      });
    },
  };
}

/** 429 with Retry-After: the seconds until this budget's window resets (at least 1). */
function rateLimited(req: Request, tooMany: string): ApiError {
  const resetTime = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
  const retryAfterSec = Math.max(1, Math.ceil(((resetTime?.getTime() ?? Date.now() + WINDOW_MS) - Date.now()) / 1_000));
  return new ApiError("rate_limited", `${tooMany}: try again in ${retryAfterSec} s.`, {
    "retry-after": String(retryAfterSec),
  });
}

/** A 429 for a bounded store that is full (nonces, links, states): retry once its oldest entry expires. */
export function storeFull(message: string, retryAfterMs: number): ApiError {
  const retryAfterSec = Math.max(1, Math.ceil(retryAfterMs / 1_000));
  return new ApiError("rate_limited", `${message} Try again in ${retryAfterSec} s.`, { "retry-after": String(retryAfterSec) });
}
