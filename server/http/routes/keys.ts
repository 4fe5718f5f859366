import express, { type Request, type Router } from "express";
import { jsonBody } from "../json-body";
import type { ApiKeyRecord, ApiKeys, KeyReader, KeyState, KeyUpdate } from "../../identity/api-keys";
import { type KeyShape, type SkillCanon, grantRefusal, inheritedDefaults, targetRefusal } from "../../identity/key-authority";
import type { Sessions } from "../../identity/sessions";
import { microsToUsd } from "../../ledger/money";
import type { SpendLimitStatus } from "../../ledger/spend-limits";
import { dataEnvelopeOf } from "../envelope";
import { parseParams, parseRequest } from "../contract/common";
import { type KeyView, createKeyBody, createdKeyView, keyParams, keyView, revokedKeyView, updateKeyBody } from "../contract/keys";
import { ApiError, refuse } from "../errors";
import { requireAccount, scopeMissing } from "../auth";
import type { SkillRegistry } from "../../catalog/skills";
import { DEFAULT_SCOPES, isExpired } from "../../identity/scopes";
import { allowedSkillsOf, changedLimitOf, expiryOf, newLimitOf } from "./key-fields";

/** Most live keys one account may hold: a dashboard lists them all on one page. */
export const MAX_LIVE_KEYS = 50;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A key as GET /v1/keys lists it; GET /v1/key shows the calling key the same way (./own-key.ts). */
export const view = (record: ApiKeyRecord, limit: SpendLimitStatus | null | undefined): KeyView => ({
  id: record.id,
  prefix: record.prefix,
  name: record.name,
  created_at: iso(record.createdAtMs),
  last_used_at: iso(record.lastUsedAtMs),
  spend_limit_usd: limit ? microsToUsd(limit.limitMicros) : null,
  spend_limit_base_units: limit ? limit.limitMicros.toString() : null,
  spend_limit_period: limit?.period ?? null,
  spent_usd: limit ? microsToUsd(limit.spentMicros) : null,
  spent_base_units: limit ? limit.spentMicros.toString() : null,
  resets_at: limit ? iso(limit.resetsAtMs) : null,
  scopes: record.scopes,
  allowed_skills: record.allowedSkills,
  expires_at: iso(record.expiresAtMs),
  metadata: record.metadata,
});

/** What the authority rules (server/identity/key-authority.ts) compare of a key as it stands. */
const shapeOf = ({ record, spendLimit }: KeyState): KeyShape => ({
  scopes: record.scopes,
  allowedSkills: record.allowedSkills,
  expiresAtMs: record.expiresAtMs,
  spendLimit: spendLimit && { limitMicros: spendLimit.limitMicros, period: spendLimit.period },
});

/**
 * API keys of the account, from a dashboard session (which may do everything) or an API key with `keys:manage` (the
 * provisioning API, "keys made by code": it hands out only keys no wider than itself, server/identity/key-authority.ts):
 *   POST   /v1/keys { name, spend_limit_usd, spend_limit_period, scopes, allowed_skills, expires_at, metadata }
 *                        → the whole key, this once, with its id and prefix (scopes ["calls"] unless asked otherwise)
 *   GET    /v1/keys      → the live keys: id, prefix, name, created_at, last_used_at, each one's spending limit, what
 *                          it spent in the current period and when that resets, its scopes, allowed skills, expiry and
 *                          metadata (an expired key is listed until revoked, and counts towards MAX_LIVE_KEYS)
 *   PATCH  /v1/keys/:id  any of the create's fields → the key changed, every field in one transaction
 *   DELETE /v1/keys/:id  → revoked at once (the next call with it gets 401)
 * Another account's key id is answered as an unknown one: 404. `now` is the clock the periods are read by.
 *
 * What a management key may do is decided inside the change's own transaction, on the management key and the target
 * key as that transaction reads them, so that a management key narrowed (or revoked) meanwhile is held to what it is.
 */
export function keyRoutes(deps: { sessions: Sessions; keys: ApiKeys; skills: SkillRegistry; now?: () => number }): Router {
  const router = express.Router();
  const auth = (route: string) => requireAccount(deps.keys, deps.sessions, route);
  const json = jsonBody(16_384);
  const now = deps.now ?? Date.now;
  /** Two references to one skill compare equal: a listed skill by its id, anything else as written (in lowercase). */
  const canon: SkillCanon = (ref) => deps.skills.resolve(ref)?.id ?? ref.toLowerCase();

  /**
   * The management key `managerId` as the change's transaction reads it: still live, unexpired and holding keys:manage
   * (its authentication may have been read a moment earlier, from the cache), else refused as its next request would be.
   */
  const managerIn = async (read: KeyReader, managerId: string, route: string, nowMs: number): Promise<KeyShape> => {
    const state = await read.state(managerId);
    if (!state || state.record.revokedAtMs !== null)
      throw new ApiError("unauthorized", "Invalid API key: check the Authorization header (Bearer atom_...).");
    if (isExpired(state.record, nowMs))
      throw new ApiError("key_expired", `This API key expired at ${iso(state.record.expiresAtMs)}: make a new key (Dashboard, API Keys).`);
    if (!state.record.scopes.includes("keys:manage")) throw scopeMissing("keys:manage", route);
    return shapeOf(state);
  };

  /** The account's live key the path names, or the 404 another account's, a revoked or an unknown key gets. */
  const ownLiveKey = async (params: unknown, accountId: string): Promise<ApiKeyRecord> => {
    // Key ids are UUIDs: anything else is no key (and never reaches the database, which may refuse odd bytes).
    const { id } = parseParams(keyParams, params, "No such key on this account.");
    const record = await deps.keys.get(id);
    if (!record || record.accountId !== accountId || record.revokedAtMs !== null) {
      throw new ApiError("not_found", "No such key on this account.");
    }
    return record;
  };

  router.post("/v1/keys", auth("POST /v1/keys"), json, async (req: Request, res) => {
    const accountId = req.accountId!;
    const body = parseRequest(createKeyBody, req.body ?? {});
    const nowMs = now();
    const asked = {
      scopes: body.scopes,
      allowedSkills: allowedSkillsOf(deps.skills, body.allowed_skills),
      expiresAtMs: expiryOf(body.expires_at, nowMs),
      spendLimit: newLimitOf(body),
    };
    // A management key's own restrictions stand in for those its request leaves out (as its authentication read it;
    // the check below reads it again, in the key's transaction).
    const manager = req.apiKey;
    const defaults: Omit<KeyShape, "scopes"> = manager
      ? inheritedDefaults(
          shapeOf({ record: manager, spendLimit: (await deps.keys.spendLimits([manager.id], nowMs)).get(manager.id) ?? null }),
        )
      : { allowedSkills: null, expiresAtMs: null, spendLimit: null };
    const key: KeyShape = {
      scopes: asked.scopes ?? DEFAULT_SCOPES,
      allowedSkills: asked.allowedSkills === undefined ? defaults.allowedSkills : asked.allowedSkills,
      expiresAtMs: asked.expiresAtMs === undefined ? defaults.expiresAtMs : asked.expiresAtMs,
      spendLimit: asked.spendLimit === undefined ? defaults.spendLimit : asked.spendLimit,
    };
    const live = (await deps.keys.listForAccount(accountId)).filter((k) => k.revokedAtMs === null).length;
    if (live >= MAX_LIVE_KEYS) throw new ApiError("invalid_request", `An account may hold ${MAX_LIVE_KEYS} live keys: revoke one first.`);
    // Durable before it resolves, with its limit: the key is shown this once, and must work from then on.
    const created = await deps.keys.create(accountId, {
      name: body.name ?? "",
      nowMs,
      ...key,
      metadata: body.metadata ?? {},
      check:
        manager &&
        (async (read) => {
          const refused = grantRefusal(await managerIn(read, manager.id, "POST /v1/keys", nowMs), key, canon);
          if (refused) refuse(refused);
        }),
    });
    const limits = await deps.keys.spendLimits([created.record.id], nowMs);
    res.status(201).json(dataEnvelopeOf(createdKeyView, { ...view(created.record, limits.get(created.record.id)), key: created.key }));
  });

  router.get("/v1/keys", auth("GET /v1/keys"), async (req, res) => {
    const live = (await deps.keys.listForAccount(req.accountId!)).filter((k) => k.revokedAtMs === null);
    const limits = await deps.keys.spendLimits(
      live.map((k) => k.id),
      now(),
    );
    res.set("cache-control", "no-store");
    res.json(
      dataEnvelopeOf(
        keyView.array(),
        live.map((k) => view(k, limits.get(k.id))),
      ),
    );
  });

  router.patch("/v1/keys/:id", auth("PATCH /v1/keys/{id}"), json, async (req, res) => {
    const accountId = req.accountId!;
    const body = parseRequest(updateKeyBody, req.body ?? {});
    const { id } = parseParams(keyParams, req.params, "No such key on this account.");
    const nowMs = now();
    const allowedSkills = allowedSkillsOf(deps.skills, body.allowed_skills);
    const expiresAtMs = expiryOf(body.expires_at, nowMs);
    const manager = req.apiKey;
    const updated = await deps.keys.update(
      id,
      accountId,
      async (current, read): Promise<KeyUpdate> => {
        const change: KeyUpdate = {
          name: body.name,
          scopes: body.scopes,
          allowedSkills,
          expiresAtMs,
          metadata: body.metadata,
          spendLimit: changedLimitOf(body, current.spendLimit),
        };
        if (manager) {
          const m = await managerIn(read, manager.id, "PATCH /v1/keys/{id}", nowMs);
          const before = shapeOf(current);
          const target = targetRefusal(m, before, canon, "change", current.record.id === manager.id);
          if (target) refuse(target);
          const after: KeyShape = {
            scopes: change.scopes ?? before.scopes,
            allowedSkills: change.allowedSkills === undefined ? before.allowedSkills : change.allowedSkills,
            expiresAtMs: change.expiresAtMs === undefined ? before.expiresAtMs : change.expiresAtMs,
            spendLimit: change.spendLimit === undefined ? before.spendLimit : change.spendLimit,
          };
          const refused = grantRefusal(m, after, canon);
          if (refused) refuse(refused);
        }
        return change;
      },
      nowMs,
    );
    if (!updated) throw new ApiError("not_found", "No such key on this account.");
    res.json(dataEnvelopeOf(keyView, view(updated.record, updated.spendLimit)));
  });

  router.delete("/v1/keys/:id", auth("DELETE /v1/keys/{id}"), async (req, res) => {
    const record = await ownLiveKey(req.params, req.accountId!);
    const manager = req.apiKey;
    const nowMs = now();
    // Durable before it resolves, and forgotten by this gateway's cache at once.
    const revoked = await deps.keys.revoke(record.id, {
      check:
        manager &&
        (async (current, read) => {
          const m = await managerIn(read, manager.id, "DELETE /v1/keys/{id}", nowMs);
          const refused = targetRefusal(m, shapeOf(current), canon, "revoke", current.record.id === manager.id);
          if (refused) refuse(refused);
        }),
    });
    if (!revoked) throw new ApiError("not_found", "No such key on this account.");
    res.json(dataEnvelopeOf(revokedKeyView, { id: record.id, revoked: true }));
  });

  return router;
}
