import express, { type Router } from "express";
import { jsonBody } from "../json-body";
import type { ApiKeyRecord, ApiKeys } from "../../identity/api-keys";
import type { Sessions } from "../../identity/sessions";
import { microsToUsd } from "../../ledger/money";
import type { SpendLimit, SpendLimitStatus, SpendPeriod } from "../../ledger/spend-limits";
import { dataEnvelope } from "../envelope";
import { parseParams, parseRequest } from "../contract/common";
import { createKeyBody, keyParams, updateKeyBody } from "../contract/keys";
import { ApiError } from "../errors";
import { requireSession } from "../session-cookies";
import type { SkillRegistry } from "../../catalog/skills";
import { MAX_KEY_LIFETIME_MS } from "../../identity/scopes";
import { UUID_PATTERN } from "../contract/common";
import { excerpt } from "../../text";

/** Most live keys one account may hold: a dashboard lists them all on one page. */
export const MAX_LIVE_KEYS = 50;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A key as GET /v1/keys lists it; GET /v1/key shows the calling key the same way (./own-key.ts). */
export const view = (record: ApiKeyRecord, limit: SpendLimitStatus | undefined) => ({
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
});

/**
 * The allowed_skills a create asks for, as stored: each a listed skill's slug or UUID (UUIDs in lowercase, as the
 * catalogue keeps them), two naming one skill refused; null for every skill. 400 naming the first that is no skill.
 */
function allowedSkillsOf(skills: SkillRegistry, refs: string[] | null | undefined): string[] | null {
  if (refs === undefined || refs === null) return null;
  const seen = new Set<string>();
  return refs.map((ref) => {
    const skill = skills.resolve(ref);
    if (!skill) throw new ApiError("invalid_request", `allowed_skills: no listed skill "${excerpt(ref, 100)}".`);
    if (seen.has(skill.id)) throw new ApiError("invalid_request", `allowed_skills names the skill "${skill.slug}" twice.`);
    seen.add(skill.id);
    return UUID_PATTERN.test(ref) ? ref.toLowerCase() : ref;
  });
}

/** An expires_at a create asks for: in the future, at most MAX_KEY_LIFETIME_MS away; null for never. */
function expiryOf(expiresAtMs: number | null | undefined, nowMs: number): number | null {
  if (expiresAtMs === undefined || expiresAtMs === null) return null;
  if (expiresAtMs <= nowMs) throw new ApiError("invalid_request", "expires_at must be in the future.");
  if (expiresAtMs - nowMs > MAX_KEY_LIFETIME_MS)
    throw new ApiError("invalid_request", `expires_at must be at most ${MAX_KEY_LIFETIME_MS / 86_400_000} days from now.`);
  return expiresAtMs;
}

/**
 * The limit a create or update asks for: null for none; a limit needs its period (`fallback`, the key's current
 * one, stands in on an update), and a period alone is refused rather than ignored.
 */
function limitOf(
  body: { spend_limit_usd?: bigint | null; spend_limit_period?: SpendPeriod },
  fallback: SpendPeriod | undefined,
): SpendLimit | null {
  const { spend_limit_usd: limitMicros, spend_limit_period: period = fallback } = body;
  if (limitMicros === undefined || limitMicros === null) {
    if (body.spend_limit_period !== undefined)
      throw new ApiError("invalid_request", "spend_limit_period goes with a spend_limit_usd: send both, or neither for no limit.");
    return null;
  }
  if (period === undefined)
    throw new ApiError("invalid_request", "spend_limit_period is required with spend_limit_usd: day, month or total.");
  return { limitMicros, period };
}

/**
 * API keys of the signed-in account (a dashboard session, not an API key):
 *   POST   /v1/keys { name, spend_limit_usd, spend_limit_period, scopes, allowed_skills, expires_at }
 *                        → the whole key, this once, with its id and prefix (scopes ["calls"] unless asked otherwise)
 *   GET    /v1/keys      → the live keys: id, prefix, name, created_at, last_used_at, each one's spending limit, what
 *                          it spent in the current period and when that resets, its scopes, allowed skills and expiry
 *                          (an expired key is listed until revoked, and counts towards MAX_LIVE_KEYS)
 *   PATCH  /v1/keys/:id { spend_limit_usd, spend_limit_period } → the limit set, changed or (null) removed
 *   DELETE /v1/keys/:id  → revoked at once (the next call with it gets 401)
 * Another account's key id is answered as an unknown one: 404. `now` is the clock the periods are read by.
 */

export function keyRoutes(deps: { sessions: Sessions; keys: ApiKeys; skills: SkillRegistry; now?: () => number }): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);
  const json = jsonBody(16_384);
  const now = deps.now ?? Date.now;

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

  router.post("/v1/keys", session, json, async (req, res) => {
    const accountId = req.session!.accountId;
    const body = parseRequest(createKeyBody, req.body ?? {});
    const spendLimit = limitOf(body, undefined);
    const nowMs = now();
    const allowedSkills = allowedSkillsOf(deps.skills, body.allowed_skills);
    const expiresAtMs = expiryOf(body.expires_at, nowMs);
    const live = (await deps.keys.listForAccount(accountId)).filter((k) => k.revokedAtMs === null).length;
    if (live >= MAX_LIVE_KEYS) throw new ApiError("invalid_request", `An account may hold ${MAX_LIVE_KEYS} live keys: revoke one first.`);
    // Durable before it resolves, with its limit: the key is shown this once, and must work from then on.
    const created = await deps.keys.create(accountId, {
      name: body.name ?? "",
      spendLimit,
      nowMs,
      scopes: body.scopes,
      allowedSkills,
      expiresAtMs,
    });
    const limits = await deps.keys.spendLimits([created.record.id], nowMs);
    res.status(201).json(dataEnvelope({ ...view(created.record, limits.get(created.record.id)), key: created.key }));
  });

  router.get("/v1/keys", session, async (req, res) => {
    const live = (await deps.keys.listForAccount(req.session!.accountId)).filter((k) => k.revokedAtMs === null);
    const limits = await deps.keys.spendLimits(
      live.map((k) => k.id),
      now(),
    );
    res.set("cache-control", "no-store");
    res.json(dataEnvelope(live.map((k) => view(k, limits.get(k.id)))));
  });

  router.patch("/v1/keys/:id", session, json, async (req, res) => {
    const accountId = req.session!.accountId;
    const body = parseRequest(updateKeyBody, req.body ?? {});
    const record = await ownLiveKey(req.params, accountId);
    const nowMs = now();
    const current = (await deps.keys.spendLimits([record.id], nowMs)).get(record.id);
    // Durable before it resolves; the key's next hold reads it (limits are never cached).
    if (!(await deps.keys.setSpendLimit(record.id, accountId, limitOf(body, current?.period), nowMs))) {
      throw new ApiError("not_found", "No such key on this account.");
    }
    const limits = await deps.keys.spendLimits([record.id], nowMs);
    res.json(dataEnvelope(view(record, limits.get(record.id))));
  });

  router.delete("/v1/keys/:id", session, async (req, res) => {
    const record = await ownLiveKey(req.params, req.session!.accountId);
    // Durable before it resolves, and forgotten by this gateway's cache at once.
    await deps.keys.revoke(record.id);
    res.json(dataEnvelope({ id: record.id, revoked: true }));
  });

  return router;
}
