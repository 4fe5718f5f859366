import type { NextFunction, Request, Response } from "express";
import type { ApiKeyRecord, ApiKeys } from "../accounts/api-keys";
import { ApiError } from "./errors";

declare module "express-serve-static-core" {
  interface Request {
    apiKey?: ApiKeyRecord;
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
    next();
  };
}
