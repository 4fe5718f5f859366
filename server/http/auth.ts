import type { NextFunction, Request, Response } from "express";
import type { ApiKeyRecord, ApiKeys } from "../identity/api-keys";
import type { Sessions } from "../identity/sessions";
import { ApiError } from "./errors";
import { requireSession, readSession } from "./session-cookies";

declare module "express-serve-static-core" {
  interface Request {
    apiKey?: ApiKeyRecord;
    /** The account a request acts for: its API key's, or its dashboard session's. */
    accountId?: string;
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
 * keys get the same answer, so a response never tells an attacker whether a key exists.
 * Both call endpoints (./routes/call.ts) and the Express routes come through here.
 */
export async function authenticate(keys: ApiKeys, header: string | undefined): Promise<ApiKeyRecord> {
  if (!header) throw new ApiError("unauthorized", "Missing API key: send the header Authorization: Bearer <API_KEY>.");
  const token = bearerToken(header);
  const record = token === undefined ? undefined : await keys.authenticate(token);
  if (!record) throw new ApiError("unauthorized", "Invalid API key: check the Authorization header (Bearer atom_...).");
  return record;
}

/** Express middleware form of `authenticate`, for the read endpoints. */
export function requireApiKey(keys: ApiKeys) {
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    req.apiKey = await authenticate(keys, req.headers.authorization);
    req.accountId = req.apiKey.accountId;
    next();
  };
}

/**
 * An account's own endpoints (balance, usage, earnings, withdrawals), used by both agents and
 * the dashboard: an `Authorization` header means an API key and is checked as one (a bad key
 * is a 401 even with a session cookie beside it); without one, a dashboard session is needed,
 * with its CSRF token on anything that changes state.
 */
export function requireAccount(keys: ApiKeys, sessions: Sessions) {
  const key = requireApiKey(keys);
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
