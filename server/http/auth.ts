import type { NextFunction, Request, Response } from "express";
import type { ApiKeyRecord, ApiKeys } from "../accounts/api-keys";
import { ApiError } from "./errors";

declare module "express-serve-static-core" {
  interface Request {
    apiKey?: ApiKeyRecord;
  }
}

/**
 * `Authorization: Bearer atom_...` (spec section 5). Missing, malformed, unknown and revoked
 * keys all get the same 401 apart from the missing case, so a response never tells an
 * attacker whether a key exists. Runs before the body is parsed.
 */
export function requireApiKey(keys: ApiKeys) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    const header = req.headers.authorization;
    if (!header) {
      return next(new ApiError("unauthorized", "Missing API key: send the header Authorization: Bearer <API_KEY>."));
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const record = match ? keys.authenticate(match[1]) : undefined;
    if (!record) return next(new ApiError("unauthorized", "Invalid API key: check the Authorization header (Bearer atom_...)."));
    req.apiKey = record;
    next();
  };
}
