import type { SkillRegistry } from "../../catalog/skills";
import type { SpendLimit, SpendLimitStatus, SpendPeriod } from "../../ledger/spend-limits";
import { MAX_KEY_LIFETIME_MS } from "../../identity/scopes";
import { excerpt } from "../../text";
import { UUID_PATTERN } from "../contract/common";
import { ApiError } from "../errors";

/**
 * What the fields of a key's body (POST and PATCH /v1/keys, ./keys.ts) become once checked against what the contract's
 * shape cannot know: the catalogue, the clock, the key's current limit. Each throws the 400 naming what is wrong.
 * `undefined` in, `undefined` out: a field left out is the caller's to default (a create) or to keep (a change).
 */

/**
 * allowed_skills as stored: each a listed skill's slug or UUID (UUIDs in lowercase, as the catalogue keeps them), two
 * naming one skill refused; null for every skill. 400 naming the first that is no skill.
 */
export function allowedSkillsOf(skills: SkillRegistry, refs: string[] | null | undefined): string[] | null | undefined {
  if (refs === undefined || refs === null) return refs;
  const seen = new Set<string>();
  return refs.map((ref) => {
    const skill = skills.resolve(ref);
    if (!skill) throw new ApiError("invalid_request", `allowed_skills: no listed skill "${excerpt(ref, 100)}".`);
    if (seen.has(skill.id)) throw new ApiError("invalid_request", `allowed_skills names the skill "${skill.slug}" twice.`);
    seen.add(skill.id);
    return UUID_PATTERN.test(ref) ? ref.toLowerCase() : ref;
  });
}

/** expires_at: in the future, at most MAX_KEY_LIFETIME_MS away; null for never. */
export function expiryOf(expiresAtMs: number | null | undefined, nowMs: number): number | null | undefined {
  if (expiresAtMs === undefined || expiresAtMs === null) return expiresAtMs;
  if (expiresAtMs <= nowMs) throw new ApiError("invalid_request", "expires_at must be in the future.");
  if (expiresAtMs - nowMs > MAX_KEY_LIFETIME_MS)
    throw new ApiError("invalid_request", `expires_at must be at most ${MAX_KEY_LIFETIME_MS / 86_400_000} days from now.`);
  return expiresAtMs;
}

interface LimitFields {
  spend_limit_usd?: bigint | null;
  spend_limit_period?: SpendPeriod;
}

/** A create's limit: null for none (spend_limit_usd null), undefined when neither field is sent; a limit needs its period. */
export function newLimitOf(body: LimitFields): SpendLimit | null | undefined {
  const { spend_limit_usd: limitMicros, spend_limit_period: period } = body;
  if (limitMicros === undefined || limitMicros === null) {
    if (period !== undefined)
      throw new ApiError("invalid_request", "spend_limit_period goes with a spend_limit_usd: send both, or neither for no limit.");
    return limitMicros;
  }
  if (period === undefined)
    throw new ApiError("invalid_request", "spend_limit_period is required with spend_limit_usd: day, month or total.");
  return { limitMicros, period };
}

/**
 * A change's limit, given the key's `current` one: undefined when neither field is sent (kept); null removes it; an
 * amount keeps the current period unless one is sent; a period alone keeps the current amount (a key without a
 * limit has none to keep: 400).
 */
export function changedLimitOf(body: LimitFields, current: SpendLimitStatus | null): SpendLimit | null | undefined {
  const { spend_limit_usd: limitMicros, spend_limit_period: period } = body;
  if (limitMicros === undefined && period !== undefined) {
    if (current === null)
      throw new ApiError(
        "invalid_request",
        "spend_limit_period alone changes the period of the key's spending limit, and this key has none: send spend_limit_usd too.",
      );
    return { limitMicros: current.limitMicros, period };
  }
  if (limitMicros !== undefined && limitMicros !== null && period === undefined) {
    if (current === null)
      throw new ApiError("invalid_request", "spend_limit_period is required with spend_limit_usd: day, month or total.");
    return { limitMicros, period: current.period };
  }
  return newLimitOf(body);
}
