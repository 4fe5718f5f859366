import type { Request } from "express";
import type { ApiKeys } from "../identity/api-keys";
import type { Sessions } from "../identity/sessions";
import { bearerToken } from "./auth";
import { type McpOAuth, isApiKeyCredential } from "../identity/mcp-oauth";
import type { Auth, Operation } from "./contract/common";
import { OPERATIONS } from "./contract/document";
import { readSession } from "./session-cookies";

/**
 * Which budget of ./rate-limits.ts counts a request the Express app answers:
 *   - health: GET or HEAD /healthz and /readyz, per client address, apart from everything else, so
 *     that a flood from a load balancer's address (or a proxy's) never makes a probe answer 429;
 *   - credential: a request to an operation that consumes a credential, carrying a valid one of the
 *     kind that operation takes, per API key or per session: the credential replaces the address;
 *   - public: everything else, per client address, whatever credential it carries.
 *
 * Which operations consume which credential is read from the API's contract (./contract/), the
 * declarations the routes are documented and checked by, never from a list of its own: an
 * operation declared `none` (x402, discovery, public reads, sign-in) or a path the contract does
 * not know (the dashboard's pages and assets, 404s) stays on its address's budget, so a route
 * added without credentials cannot become a way around the per-address limit.
 */
export type Budget =
  | { name: "health" }
  | { name: "public" }
  /** `holder` names the credential (`key:<id>`, `session:<token hash>`); `label` says it to a person. */
  | { name: "credential"; holder: string; label: "API key" | "session" };

/** The credentials an operation consumes, as its route's middleware reads them (./auth.ts, ./session-cookies.ts). */
type CredentialAuth = Extract<Auth, "api_key" | "session" | "account">;

interface CredentialRoute {
  method: string;
  pattern: RegExp;
  auth: CredentialAuth;
}

/** The orchestrator's probes (./routes/health.ts). */
const PROBES: readonly RegExp[] = ["/healthz", "/readyz"].map(pathPattern);

/**
 * A contract path as Express's router matches it: against the raw (still percent-encoded) path,
 * without regard to case, with or without one trailing slash, a `{parameter}` being one
 * non-empty segment. A path Express would not route there does not match either, and so
 * stays on the public budget.
 */
export function pathPattern(path: string): RegExp {
  const literal = (part: string) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(
    `^${path
      .split(/\{[^}/]+\}/)
      .map(literal)
      .join("[^/]+")}/?$`,
    "i",
  );
}

/** The operations that consume a credential, with the pattern of their path. */
export function credentialRoutes(operations: readonly Operation[] = OPERATIONS): CredentialRoute[] {
  return operations
    .filter((op): op is Operation & { auth: CredentialAuth } => op.auth === "api_key" || op.auth === "session" || op.auth === "account")
    .map((op) => ({ method: op.method.toUpperCase(), pattern: pathPattern(op.path), auth: op.auth }));
}

/** The hosted MCP endpoint, as Express routes it (any case, one trailing slash): where OAuth access tokens are taken. */
const MCP_PATH = pathPattern("/mcp");

/** Express answers HEAD with a route's GET handlers. */
const routedMethod = (method: string) => (method === "HEAD" ? "GET" : method);

/** What a request is counted against; its credential looked up only where its operation would read it. */
export function budgetOf(deps: {
  keys: ApiKeys;
  sessions: Sessions;
  /** The hosted MCP server's OAuth access tokens, counted as the key each stands for. */
  oauthTokens?: Pick<McpOAuth, "verifyAccessTokenOnce">;
  operations?: readonly Operation[];
}): (req: Request) => Promise<Budget> {
  const routes = credentialRoutes(deps.operations);
  const byKey = async (req: Request): Promise<Budget> => {
    const token = bearerToken(req.headers.authorization ?? "");
    // The hosted MCP server's OAuth access tokens stand for a key: counted as that key (many people reaching /mcp
    // through one remote client share its addresses, and must not share one address budget).
    if (token !== undefined && deps.oauthTokens && !isApiKeyCredential(token) && MCP_PATH.test(req.path)) {
      const keyId = await deps.oauthTokens.verifyAccessTokenOnce(req, token).then(
        (info) => String(info.extra?.apiKeyId),
        () => undefined,
      );
      return keyId ? { name: "credential", holder: `key:${keyId}`, label: "API key" } : { name: "public" };
    }
    const record = token === undefined ? undefined : await deps.keys.authenticate(token);
    return record ? { name: "credential", holder: `key:${record.id}`, label: "API key" } : { name: "public" };
  };
  const bySession = async (req: Request): Promise<Budget> => {
    const session = await readSession(deps.sessions, req);
    return session ? { name: "credential", holder: `session:${session.tokenHash}`, label: "session" } : { name: "public" };
  };

  return async (req) => {
    const method = routedMethod(req.method);
    if (method === "GET" && PROBES.some((probe) => probe.test(req.path))) return { name: "health" };
    const route = routes.find((r) => r.method === method && r.pattern.test(req.path));
    switch (route?.auth) {
      case "api_key":
        return byKey(req);
      case "session":
        return bySession(req);
      // As requireAccount reads it: an Authorization header means a key (a bad one is a 401 even
      // beside a session cookie), and only without one does the session count.
      case "account":
        return req.headers.authorization !== undefined ? byKey(req) : bySession(req);
      default:
        return { name: "public" };
    }
  };
}
