import { performance } from "node:perf_hooks";
import express, { type Router } from "express";
import { jsonBody } from "../json-body";
import type { ApiKeys } from "../../identity/api-keys";
import type { Sessions } from "../../identity/sessions";
import type { CallService } from "../../gateway/call-service";
import { parseRequest } from "../contract/common";
import { tryRequestBody } from "../contract/call";
import { callResponse } from "../call-answer";
import { ApiError } from "../errors";
import { requireSession } from "../session-cookies";

/**
 * The marketplace's "try it" form:
 *   POST /v1/skills/:skillId/try { key_id, input }   (session + CSRF)
 * calls the skill as one of the signed-in account's own keys, through the same call service as
 * `POST /v1/skills/:skillId/call`, and answers exactly what that endpoint would: the same
 * status, body and headers, the same charge, rate limits and usage row. The key's secret is
 * never needed (the gateway keeps only its hash): the session proves the account, the id
 * picks which of its keys the call is made and counted with. Without a session, 401; with a
 * key that is not this account's live key, 404 and nothing is called.
 */
export function tryRoutes(deps: { sessions: Sessions; keys: ApiKeys; calls: CallService; maxRequestBytes: number }): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);
  const json = jsonBody(deps.maxRequestBytes);

  router.post("/v1/skills/:skillId/try", session, json, async (req, res) => {
    const startedAt = performance.now();
    const body = parseRequest(tryRequestBody, req.body);
    const input = body.input ?? {};
    const apiKey = await deps.keys.useOwn(body.key_id, req.session!.accountId);
    if (!apiKey) throw new ApiError("not_found", "No such key on this account: it may have been revoked. Pick another or create one.");
    const result = await deps.calls.execute({ endpoint: "skill_call", apiKey, skillRef: String(req.params.skillId), input, startedAt });
    const response = callResponse(result);
    res.status(response.status).set(response.headers).type("application/json").send(response.body);
  });

  return router;
}
