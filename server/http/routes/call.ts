import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { performance } from "node:perf_hooks";
import express, { type Router } from "express";
import type { ApiKeyRecord, ApiKeys } from "../../identity/api-keys";
import type { CallService } from "../../gateway/call-service";
import { IDEMPOTENCY_KEY } from "../../gateway/idempotency";
import { authenticate, authorize, keyOperation } from "../auth";
import { callRequestBody, MAX_PRICE_HEADER, maxPriceOf, skillParametersBody } from "../contract/call";
import { parseRequest } from "../contract/common";
import { callResponse } from "../call-answer";
import type { Endpoint } from "../../gateway/calls-store";
import { errorEnvelope } from "../envelope";
import { ApiError, toApiError } from "../errors";
import { parseJsonBody } from "../json-body";
import { currentRequest } from "../../ops/request-context";

const SKILL_CALL_PATH = /^\/v1\/skills\/([^/]+)\/call$/;

/**
 * The spec's two call endpoints, on the hot path:
 *   POST /v1/call                  { skill_id, input }  → snake_case metadata
 *   POST /v1/skills/:skillId/call  { ...input }         → camelCase metadata
 *
 * They are served straight from Node's request and response, ahead of Express's router
 * and body parser: the call path is what the benchmark measures, and those layers cost
 * more than everything else the gateway does per call. The order is: authenticate (401; an
 * expired key 401 key_expired), the key's scope (403 scope_missing), read the body (413), parse it (400: not UTF-8, too deep, not JSON, a number it cannot
 * carry exactly), check its shape and the X-Max-Price header (400); the call service does the rest.
 *
 * Returns a listener that returns false when the request is not for a call endpoint, and true
 * when it is: then it answers the request, or calls `declined` when the key does not
 * authenticate (which may take a lookup, so it is known only later). A call without a valid key
 * is left to the Express app, whose per-address limit counts it before its 401 (see
 * `unauthenticatedCallRoutes`): a flood of bad keys costs the flooder its budget.
 */
export function callHandler(deps: { keys: ApiKeys; calls: CallService; maxRequestBytes: number; log: (m: string, e?: unknown) => void }) {
  // What a key needs for each endpoint, as the contract declares it.
  const declared = { call: keyOperation("POST /v1/call"), skill_call: keyOperation("POST /v1/skills/{skillId}/call") };
  return (req: IncomingMessage, res: ServerResponse, declined: () => void): boolean => {
    if (req.method !== "POST") return false;
    const path = requestPath(req.url ?? "");
    let endpoint: Endpoint;
    let pathSkill: string | undefined;
    if (path === "/v1/call") {
      endpoint = "call";
    } else {
      const match = SKILL_CALL_PATH.exec(path);
      if (!match) return false;
      endpoint = "skill_call";
      pathSkill = match[1];
    }
    // For the request's log line, whichever answers it: this fast path, or the app's 401.
    const request = currentRequest();
    if (request) request.route = endpoint === "call" ? "/v1/call" : "/v1/skills/:skillId/call";
    answer(req, res, endpoint, pathSkill, declined).catch((error) => {
      // A client that hangs up before its body is in is an ordinary event, not a fault of ours:
      // one line, and nothing to answer (nobody is listening).
      if (error instanceof ClientAborted) {
        deps.log(`client closed the connection before its request body was complete (${req.socket.remoteAddress ?? "unknown address"})`);
        return;
      }
      const apiError = toApiError(error, "Internal server error: the call was not charged.");
      if (apiError.status >= 500) deps.log("internal error on the call path", error);
      sendJson(res, apiError.status, apiError.headers, JSON.stringify(errorEnvelope(apiError.code, apiError.message, apiError.details)));
    });
    return true;
  };

  async function answer(
    req: IncomingMessage,
    res: ServerResponse,
    endpoint: Endpoint,
    pathSkill: string | undefined,
    declined: () => void,
  ): Promise<void> {
    let apiKey: ApiKeyRecord;
    try {
      apiKey = await authenticate(deps.keys, req.headers.authorization);
    } catch (error) {
      // A key that could not be looked up (the database did not answer) is not a bad key: the failure is answered
      // here (503), not as the Express app's 401.
      if (!(error instanceof ApiError && error.code === "unauthorized")) throw error;
      declined();
      return;
    }
    try {
      authorize(apiKey, endpoint === "call" ? declared.call : declared.skill_call);
    } catch (error) {
      // Refused before its body is read: the body is drained, so the connection can carry the next request.
      req.resume();
      throw error;
    }
    const startedAt = performance.now();
    const raw = await readBody(req, deps.maxRequestBytes);
    // The same checks as every other JSON body (../json-body.ts): the input is taken with the
    // values sent or refused with 400, never rewritten (a number rounded, a byte replaced) and charged.
    const body = raw.length > 0 ? parseJsonBody(raw) : undefined;

    // Only the envelope is checked here; the skill's input is checked against its own JSON Schema by the call service.
    let skillRef: string;
    let input: Record<string, unknown>;
    // The price cap: X-Max-Price on either endpoint (the per-skill body is the skill's own, so the header is its only
    // place), and the body's max_price on /v1/call; given both, the lower holds.
    let maxPriceMicros = maxPriceOf(req.headers[MAX_PRICE_HEADER], "X-Max-Price");
    if (endpoint === "call") {
      let bodyMaxMicros: bigint | null | undefined;
      ({ skill_id: skillRef, input, max_price: bodyMaxMicros } = parseRequest(callRequestBody, body));
      if (bodyMaxMicros !== null && bodyMaxMicros !== undefined && (maxPriceMicros === undefined || bodyMaxMicros < maxPriceMicros)) {
        maxPriceMicros = bodyMaxMicros;
      }
    } else {
      // An empty body on the per-skill form means a skill called without parameters.
      input = parseRequest(skillParametersBody, body ?? {});
      skillRef = decodePathSegment(pathSkill!);
    }

    const result = await deps.calls.execute({
      endpoint,
      apiKey,
      skillRef,
      input,
      idempotency: idempotencyOf(req, endpoint, pathSkill, raw),
      startedAt,
      maxPriceMicros,
    });
    const response = callResponse(result);
    sendJson(res, response.status, response.headers, response.body);
  }
}

/**
 * The path of a request target, without its query: origin-form ("/v1/call?x") as clients
 * send, or absolute-form ("http://host/v1/call"), which HTTP/1.1 servers must accept too.
 */
function requestPath(target: string): string {
  let path = target;
  if (!target.startsWith("/")) {
    try {
      path = new URL(target).pathname;
    } catch {
      return target;
    }
  }
  const q = path.indexOf("?");
  return q === -1 ? path : path.slice(0, q);
}

/** A path segment, percent-decoded; a malformed escape is the client's error, not a crash. */
function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ApiError("invalid_request", "The skill id in the path is not a valid percent-encoded segment.");
  }
}

function sendJson(res: ServerResponse, status: number, headers: Record<string, string>, body: string): void {
  if (res.headersSent) return;
  res.writeHead(status, { ...headers, "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

// Internal error, plain on purpose: nobody is left to answer, so it is only logged.
/** The client closed the connection (or reset it) before the whole body had arrived. */
class ClientAborted extends Error {
  override name = "ClientAborted";
}

/** Reads the whole body, refusing (413) one over the limit without buffering it. */
function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const tooLarge = () =>
    new ApiError("payload_too_large", `Request body is larger than the gateway accepts (${maxBytes} bytes).`, { connection: "close" });
  const encoding = req.headers["content-encoding"];
  if (encoding && encoding !== "identity") {
    return Promise.reject(new ApiError("invalid_request", "Content-Encoding is not supported; send plain UTF-8 JSON."));
  }
  if (Number(req.headers["content-length"] ?? 0) > maxBytes) {
    req.resume();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.removeAllListeners("data");
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    // Node reports a hang-up mid-body as an "aborted" error on the request.
    req.on("error", () => reject(new ClientAborted()));
  });
}

function idempotencyOf(
  req: IncomingMessage,
  endpoint: Endpoint,
  pathSkill: string | undefined,
  raw: Buffer,
): { key: string; requestHash: string } | undefined {
  const key = req.headers["idempotency-key"];
  if (key === undefined) return undefined;
  if (typeof key !== "string" || !IDEMPOTENCY_KEY.test(key)) {
    throw new ApiError("invalid_request", "Idempotency-Key must be 1 to 255 visible ASCII characters.");
  }
  // The same key on the other endpoint, or for another skill, is another request.
  const requestHash = createHash("sha256")
    .update(`${endpoint} ${pathSkill ?? ""}\n`)
    .update(raw)
    .digest("hex");
  return { key, requestHash };
}

/**
 * The call endpoints as the Express app sees them: only calls the fast path above declined,
 * because their key did not authenticate. They are answered 401 here, after the app's
 * per-address limit has counted them.
 */
export function unauthenticatedCallRoutes(keys: ApiKeys): Router {
  const router = express.Router();
  // Matched on the raw path, as the fast path does: a route parameter would be percent-decoded
  // first, and a malformed escape would answer 400 before authentication's 401.
  router.use(async (req, _res, next) => {
    if (req.method !== "POST" || (req.path !== "/v1/call" && !SKILL_CALL_PATH.test(req.path))) return next();
    await authenticate(keys, req.headers.authorization);
    // The fast path declined this request because its key did not authenticate; were it valid
    // now (revoked and restored between the two checks), it is refused all the same.
    throw new ApiError("unauthorized", "Invalid API key: check the Authorization header (Bearer atom_...).");
  });
  return router;
}
