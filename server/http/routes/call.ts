import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import express, { type Request, type Response, type Router } from "express";
import type { ApiKeys } from "../../accounts/api-keys";
import type { CallService } from "../../gateway/call-service";
import { IDEMPOTENCY_KEY } from "../../gateway/idempotency";
import { requireApiKey } from "../auth";
import type { Endpoint } from "../envelope";
import { ApiError } from "../errors";

declare module "express-serve-static-core" {
  interface Request {
    startedAt?: number;
    bodyHash?: string;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The spec's two call endpoints:
 *   POST /v1/call                  { skill_id, input }  → snake_case metadata
 *   POST /v1/skills/:skillId/call  { ...input }         → camelCase metadata
 * Order: authenticate (401), parse the body (413, 400), check its shape (400), then the
 * call service does the rest.
 */
export function callRoutes(deps: { keys: ApiKeys; calls: CallService; maxRequestBytes: number }): Router {
  const router = express.Router();
  const stamp = (req: Request, _res: Response, next: () => void) => {
    req.startedAt = performance.now();
    next();
  };
  // Any content type is read as JSON: an agent that forgets the header still gets a clear
  // error about its body rather than a silent empty one.
  const json = express.json({
    limit: deps.maxRequestBytes,
    type: () => true,
    verify: (req, _res, buf) => {
      if ((req as Request).headers["idempotency-key"] !== undefined) {
        (req as Request).bodyHash = createHash("sha256").update(buf).digest("hex");
      }
    },
  });
  const auth = requireApiKey(deps.keys);

  const handle = (endpoint: Endpoint, extract: (req: Request) => { skillRef: string; input: unknown }) =>
    async (req: Request, res: Response) => {
      const { skillRef, input } = extract(req);
      const idempotency = idempotencyOf(req);
      const result = await deps.calls.execute({
        endpoint,
        apiKey: req.apiKey!,
        skillRef,
        input,
        idempotency,
        startedAt: req.startedAt ?? performance.now(),
      });
      res.status(result.status).set(result.headers).type("application/json").send(result.body);
    };

  router.post("/v1/call", stamp, auth, json, handle("call", (req) => {
    const body: unknown = req.body;
    if (!isPlainObject(body)) throw new ApiError("invalid_request", "Request body must be a JSON object with skill_id and input.");
    if (typeof body.skill_id !== "string" || body.skill_id.trim() === "") {
      throw new ApiError("invalid_request", "skill_id is required: a skill slug or UUID.");
    }
    if (!isPlainObject(body.input)) throw new ApiError("invalid_request", "input is required and must be a JSON object.");
    return { skillRef: body.skill_id, input: body.input };
  }));

  router.post("/v1/skills/:skillId/call", stamp, auth, json, handle("skill_call", (req) => {
    const body: unknown = req.body ?? {};
    if (!isPlainObject(body)) throw new ApiError("invalid_request", "Request body must be a JSON object of the skill's parameters.");
    return { skillRef: String(req.params.skillId), input: body };
  }));

  return router;
}

function idempotencyOf(req: Request): { key: string; requestHash: string } | undefined {
  const key = req.headers["idempotency-key"];
  if (key === undefined) return undefined;
  if (typeof key !== "string" || !IDEMPOTENCY_KEY.test(key)) {
    throw new ApiError("invalid_request", "Idempotency-Key must be 1 to 255 visible ASCII characters.");
  }
  const requestHash = createHash("sha256")
    .update(`${req.method} ${req.baseUrl}${req.path}\n${req.bodyHash ?? ""}`)
    .digest("hex");
  return { key, requestHash };
}
