import type { NextFunction, Request, RequestHandler, Response } from "express";
import { type Store, ipKeyGenerator, rateLimit } from "express-rate-limit";
import type { ApiKeys } from "../identity/api-keys";
import type { Sessions } from "../identity/sessions";
import type { Config } from "../config";
import { bearerToken } from "./auth";
import { ApiError } from "./errors";
import { readSession } from "./session-cookies";

/**
 * Per-client-address limits on what anyone may ask without credentials (express-rate-limit,
 * a fixed one-minute window per address):
 *   - sign-in: the endpoints that send mail, store a nonce or state, or open a session
 *     (SIGN_IN_RATE_LIMIT_PER_MIN, 20 by default), on those routes only;
 *   - public: every other request the Express app answers that is not authenticated by an
 *     API key or a dashboard session (PUBLIC_RATE_LIMIT_PER_MIN, 600 by default): the
 *     marketplace listing, /v1/platform, the dashboard's pages and assets, 401s and 404s.
 * Requests with a valid key or session are limited elsewhere (the call path's per-key GCRA).
 * Over a limit: 429 rate_limited in the spec's envelope, with Retry-After.
 *
 * The counters live in a `Store`: in memory by default (one process), pluggable so that a
 * shared store (Redis) can make the limits hold across instances.
 */

/** The two limits' names, for a store factory that keeps them apart. */
export type RateLimitName = "sign_in" | "public";

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

/** Whether a request carries credentials that authenticate: a valid API key, or a live session. */
export async function authenticated(keys: ApiKeys, sessions: Sessions, req: Request): Promise<boolean> {
  const header = req.headers.authorization;
  if (header !== undefined) {
    const token = bearerToken(header);
    return token !== undefined && (await keys.authenticate(token)) !== undefined;
  }
  return (await readSession(sessions, req)) !== undefined;
}

export interface RateLimitsParameters {
  config: Pick<Config, "signInRateLimitPerMin" | "publicRateLimitPerMin">;
  keys: ApiKeys;
  sessions: Sessions;
  stores: Record<RateLimitName, Store>;
  log: (message: string, error?: unknown) => void;
}

export interface RateLimits {
  /** For the sign-in routes: counts every request to them, signed in or not. */
  signIn: RequestHandler;
  /** For the whole app: counts the requests that are not authenticated. */
  public: RequestHandler;
}

/** The two limiters, over the stores given (which the caller shuts down). */
export function createRateLimits(parameters: RateLimitsParameters): RateLimits {
  const { config, keys, sessions, stores, log } = parameters;
  const limiter = (limit: number, store: Store, what: string, skip?: (req: Request) => Promise<boolean>) =>
    rateLimit({
      windowMs: WINDOW_MS,
      limit,
      store,
      keyGenerator: clientKey,
      skip,
      standardHeaders: "draft-8",
      legacyHeaders: false,
      // The refusal goes through the app's error handler, like every other: the spec's envelope.
      handler: (req: Request, _res: Response, next: NextFunction) => next(rateLimited(req, what)),
      logger: {
        warn: (error, message) => log(`rate limit: ${message ?? "warning"}`, error),
        error: (error, message) => log(`rate limit: ${message ?? "error"}`, error),
      },
    });
  const publicLimit = limiter(config.publicRateLimitPerMin, stores.public, "requests", (req) => authenticated(keys, sessions, req));
  return {
    signIn: limiter(config.signInRateLimitPerMin, stores.sign_in, "sign-in requests"),
    // A store that fails (Redis down) refuses the request (500), except a probe's: /healthz answers while the
    // process does, and /readyz must be able to say what is down. A probe over its limit is still refused.
    public: (req, res, next) =>
      publicLimit(req, res, (error?: unknown) => {
        if (error !== undefined && !(error instanceof ApiError) && PROBE_PATHS.has(req.path)) {
          log(`rate limit: not counted, the store failed (${req.path} let through)`, error);
          next();
          return;
        }
        next(error);
      }),
  };
}

/** The orchestrator's probes (server/http/routes/health.ts). */
const PROBE_PATHS: ReadonlySet<string> = new Set(["/healthz", "/readyz"]);

/** 429 with Retry-After: the seconds until this client's window resets (at least 1). */
function rateLimited(req: Request, what: string): ApiError {
  const resetTime = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
  const retryAfterSec = Math.max(1, Math.ceil(((resetTime?.getTime() ?? Date.now() + WINDOW_MS) - Date.now()) / 1_000));
  return new ApiError("rate_limited", `Too many ${what} from your address: try again in ${retryAfterSec} s.`, {
    "retry-after": String(retryAfterSec),
  });
}

/** A 429 for a bounded store that is full (nonces, links, states): retry once its oldest entry expires. */
export function storeFull(message: string, retryAfterMs: number): ApiError {
  const retryAfterSec = Math.max(1, Math.ceil(retryAfterMs / 1_000));
  return new ApiError("rate_limited", `${message} Try again in ${retryAfterSec} s.`, { "retry-after": String(retryAfterSec) });
}
