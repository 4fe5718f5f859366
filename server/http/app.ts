import express, { type NextFunction, type Request, type Response } from "express";
import type { ApiKeys } from "../accounts/api-keys";
import type { Config } from "../config";
import type { CallService } from "../gateway/call-service";
import type { CallsLog } from "../gateway/calls-log";
import type { SkillRegistry } from "../gateway/skills";
import type { Ledger } from "../ledger/ledger";
import { errorEnvelope } from "./envelope";
import { ApiError } from "./errors";
import { callRoutes } from "./routes/call";
import { readRoutes } from "./routes/read";

export interface AppDeps {
  config: Config;
  keys: ApiKeys;
  skills: SkillRegistry;
  ledger: Ledger;
  calls: CallsLog;
  callService: CallService;
  log: (message: string, error?: unknown) => void;
}

/** The Express application: routes, and the one place errors become the spec's envelope. */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);

  app.get("/healthz", (_req, res) => {
    res.json({ success: true, data: { status: "ok" } });
  });
  app.use(callRoutes({ keys: deps.keys, calls: deps.callService, maxRequestBytes: deps.config.maxRequestBytes }));
  app.use(readRoutes(deps));

  app.use((req: Request, _res: Response, next: NextFunction) => {
    next(new ApiError("not_found", `No route for ${req.method} ${req.path}.`));
  });

  // Express recognises an error handler by its four parameters.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const apiError = toApiError(error);
    if (apiError.status >= 500) deps.log("internal error on the call path", error);
    res.status(apiError.status).set(apiError.headers).json(errorEnvelope(apiError.code, apiError.message));
  });
  return app;
}

/** Maps anything thrown to a client-safe error; internal details (SQL, stack) never leave. */
function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const type = (error as { type?: string } | null)?.type;
  if (type === "entity.too.large") return new ApiError("payload_too_large", "Request body is larger than the gateway accepts.");
  if (type === "entity.parse.failed") return new ApiError("invalid_json", "Request body is not valid JSON.");
  if (type === "encoding.unsupported" || type === "charset.unsupported") {
    return new ApiError("invalid_request", "Request body encoding is not supported; send UTF-8 JSON.");
  }
  if (type === "request.aborted") return new ApiError("invalid_request", "Request was aborted by the client.");
  return new ApiError("internal_error", "Internal server error: the call was not charged.");
}
