import express, { type Router } from "express";
import { jsonBody } from "../json-body";
import type { ApiKeyRecord, ApiKeys } from "../../identity/api-keys";
import type { Sessions } from "../../identity/sessions";
import { dataEnvelope } from "../envelope";
import { parseRequest } from "../contract/common";
import { createKeyBody } from "../contract/keys";
import { ApiError } from "../errors";
import { requireSession } from "../session-cookies";

/** Most live keys one account may hold: a dashboard lists them all on one page. */
export const MAX_LIVE_KEYS = 50;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const view = (record: ApiKeyRecord) => ({
  id: record.id,
  prefix: record.prefix,
  name: record.name,
  created_at: iso(record.createdAtMs),
  last_used_at: iso(record.lastUsedAtMs),
});

/**
 * API keys of the signed-in account (a dashboard session, not an API key):
 *   POST   /v1/keys { name }  → the whole key, this once, with its id and prefix
 *   GET    /v1/keys           → the live keys: id, prefix, name, created_at, last_used_at
 *   DELETE /v1/keys/:id       → revoked at once (the next call with it gets 401)
 * Another account's key id is answered as an unknown one: 404.
 */
export function keyRoutes(deps: { sessions: Sessions; keys: ApiKeys }): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);
  const json = jsonBody(4_096);

  router.post("/v1/keys", session, json, async (req, res) => {
    const accountId = req.session!.accountId;
    const { name = "" } = parseRequest(createKeyBody, req.body ?? {});
    const live = (await deps.keys.listForAccount(accountId)).filter((k) => k.revokedAtMs === null).length;
    if (live >= MAX_LIVE_KEYS) throw new ApiError("invalid_request", `An account may hold ${MAX_LIVE_KEYS} live keys: revoke one first.`);
    // Durable before it resolves: the key is shown this once, and must work from then on.
    const created = await deps.keys.create(accountId, { name: name.trim() });
    res.status(201).json(dataEnvelope({ ...view(created.record), key: created.key }));
  });

  router.get("/v1/keys", session, async (req, res) => {
    const live = (await deps.keys.listForAccount(req.session!.accountId)).filter((k) => k.revokedAtMs === null);
    res.set("cache-control", "no-store");
    res.json(dataEnvelope(live.map(view)));
  });

  router.delete("/v1/keys/:id", session, async (req, res) => {
    const record = await deps.keys.get(String(req.params.id));
    if (!record || record.accountId !== req.session!.accountId || record.revokedAtMs !== null) {
      throw new ApiError("not_found", "No such key on this account.");
    }
    // Durable before it resolves, and forgotten by this gateway's cache at once.
    await deps.keys.revoke(record.id);
    res.json(dataEnvelope({ id: record.id, revoked: true }));
  });

  return router;
}
