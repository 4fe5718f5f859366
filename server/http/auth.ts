import type { NextFunction, Request, Response } from "express";
import type { ApiKeyRecord, ApiKeys } from "../accounts/api-keys";
import type { Sessions } from "../accounts/sessions";
import { ApiError } from "./errors";

declare module "express-serve-static-core" {
  interface Request {
    apiKey?: ApiKeyRecord;
    /** The account a request acts for: its API key's, or its dashboard session's. */
    accountId?: string;
  }
}

/**
 * Checks `Authorization: Bearer atom_...` (spec section 5). Malformed, unknown and revoked
 * keys get the same answer, so a response never tells an attacker whether a key exists.
 */
export function authenticate(keys: ApiKeys, header: string | undefined): ApiKeyRecord {
  if (!header) throw new ApiError("unauthorized", "Missing API key: send the header Authorization: Bearer <API_KEY>.");
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  const record = match ? keys.authenticate(match[1]) : undefined;
  if (!record) throw new ApiError("unauthorized", "Invalid API key: check the Authorization header (Bearer atom_...).");
  return record;
}

/** Express middleware form of `authenticate`, for the read endpoints. */
export function requireApiKey(keys: ApiKeys) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    req.apiKey = authenticate(keys, req.headers.authorization);
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
  const session = sessions.require();
  return (req: Request, res: Response, next: NextFunction): void => {
    if (req.headers.authorization !== undefined || !sessions.read(req)) return key(req, res, next);
    session(req, res, () => {
      req.accountId = req.session!.accountId;
      next();
    });
  };
}
