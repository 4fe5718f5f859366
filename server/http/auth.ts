import type { NextFunction, Request, Response } from "express";
import type { ApiKeyRecord, ApiKeys } from "../identity/api-keys";
import { type KeyScope, SCOPE_MEANING } from "../identity/scopes";
import type { Sessions } from "../identity/sessions";
import { type KeyAccess, type Operation, SELF, takesApiKey } from "./contract/common";
import { OPERATIONS } from "./contract/document";
import { ApiError } from "./errors";
import { requireSession, readSession } from "./session-cookies";

declare module "express-serve-static-core" {
  interface Request {
    apiKey?: ApiKeyRecord;
    /** The account a request acts for: its API key's, or its dashboard session's. */
    accountId?: string;
    /**
     * Set when the request's key may read its own calls only (it has `calls`, not the scope the operation needs, and
     * the operation allows that: `ownCalls`): the key's id, which the route narrows every answer to.
     */
    ownCallsOf?: string;
  }
}

/**
 * The credentials of an `Authorization` header as RFC 9110 section 11.4 writes them:
 * `auth-scheme 1*SP token68`, the scheme a token (matched case-insensitively), the token68
 * from its own alphabet. Only a space or a tab separates them (the RFC says SP; HTAB is
 * the optional whitespace HTTP allows around field values): `\s` would also take a
 * no-break space or a line separator, which no HTTP client sends between the two.
 * Whitespace around the whole value is the field's, not the credentials', and Node strips
 * it before this runs; a trailing space or tab is allowed here for a parser that does not.
 */
const CREDENTIALS = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+)[ \t]+([A-Za-z0-9._~+/-]+=*)[ \t]*$/;

/** The token of `Bearer <token68>` (RFC 6750 section 2.1), or undefined for anything else. */
export function bearerToken(header: string): string | undefined {
  const match = CREDENTIALS.exec(header);
  if (match?.[1].toLowerCase() !== "bearer") return undefined;
  return match[2];
}

/**
 * Checks `Authorization: Bearer atom_...` (docs/api.md §4). Malformed, unknown and revoked
 * keys get the same answer, so a response never tells an attacker whether a key exists; a key
 * whose `expires_at` has passed is told so (401 key_expired): only its holder can present it.
 * Both call endpoints (./routes/call.ts) and the Express routes come through here.
 */
export async function authenticate(keys: ApiKeys, header: string | undefined): Promise<ApiKeyRecord> {
  if (!header) throw new ApiError("unauthorized", "Missing API key: send the header Authorization: Bearer <API_KEY>.");
  const token = bearerToken(header);
  const checked = token === undefined ? ({ kind: "invalid" } as const) : await keys.check(token);
  if (checked.kind === "expired") {
    const at = new Date(checked.record.expiresAtMs!).toISOString();
    throw new ApiError("key_expired", `This API key expired at ${at}: make a new key (Dashboard, API Keys).`);
  }
  if (checked.kind !== "valid") throw new ApiError("unauthorized", "Invalid API key: check the Authorization header (Bearer atom_...).");
  return checked.record;
}

/** The 403 a key without `scope` gets, naming the scope and what it is for. */
export function scopeMissing(scope: KeyScope, what: string): ApiError {
  return new ApiError(
    "scope_missing",
    `This API key lacks the ${scope} scope (${SCOPE_MEANING[scope]}), which ${what} needs: use a key that has it, or the dashboard.`,
  );
}

/**
 * What a key may do with an operation: all of it (it holds the declared scope, or the operation is about the key
 * itself: `self`), its own calls only (it holds `calls` and the operation allows that), or nothing: 403 scope_missing
 * naming the declared scope.
 */
export function authorize(key: ApiKeyRecord, op: KeyAccess & { method: string; path: string }): { ownCallsOf?: string } {
  if (op.scope === SELF || key.scopes.includes(op.scope)) return {};
  if (op.ownCalls && key.scopes.includes("calls")) return { ownCallsOf: key.id };
  throw scopeMissing(op.scope, `${op.method.toUpperCase()} ${op.path}`);
}

/**
 * The declared operation of a route that takes an API key, by its method and path as the contract writes them
 * ("GET /v1/usage", "GET /v1/calls/{callId}/receipt"). A route not declared, or declared without a key, is a bug: it
 * throws when the router is made, so no such route is ever served.
 */
export function keyOperation(route: string): Operation & KeyAccess {
  const [method, path] = route.split(" ");
  const op = OPERATIONS.find((o) => o.method === method.toLowerCase() && o.path === path);
  if (!op) throw new Error(`${route} is not declared in server/http/contract/: declare it, with the scope a key needs`);
  if (!takesApiKey(op)) throw new Error(`${route} is declared without an API key (auth: ${op.auth})`);
  return op;
}

/** Express middleware: an API key with the scope the route's declaration (`route`, as keyOperation reads it) names. */
export function requireApiKey(keys: ApiKeys, route: string) {
  const op = keyOperation(route);
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    const key = await authenticate(keys, req.headers.authorization);
    const { ownCallsOf } = authorize(key, op);
    req.apiKey = key;
    req.accountId = key.accountId;
    req.ownCallsOf = ownCallsOf;
    next();
  };
}

/**
 * An account's own endpoints (balance, usage, earnings, withdrawals), used by both agents and
 * the dashboard: an `Authorization` header means an API key and is checked as one (a bad key
 * is a 401 even with a session cookie beside it), with the scope `route`'s declaration names
 * (requireApiKey); without one, a dashboard session is needed, with its CSRF token on anything
 * that changes state. A session may do everything a key with every scope may.
 */
export function requireAccount(keys: ApiKeys, sessions: Sessions, route: string) {
  const key = requireApiKey(keys, route);
  const session = requireSession(sessions);
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    if (req.headers.authorization !== undefined || !(await readSession(sessions, req))) {
      await key(req, res, next);
      return;
    }
    await session(req, res, () => {
      req.accountId = req.session!.accountId;
      next();
    });
  };
}
