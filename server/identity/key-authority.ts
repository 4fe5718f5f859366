import { type Refusal, refusal } from "../errors";
import { usdText } from "../ledger/money";
import type { SpendLimit, SpendPeriod } from "../ledger/spend-limits";
import type { KeyScope } from "./scopes";

/**
 * What a `keys:manage` key may make, change and revoke (the provisioning API: docs/keys.md, "Keys made by code"). A
 * dashboard session may do everything; a management key only hands out keys no wider than itself, so that a leaked
 * management key is worth no more than the owner let it be:
 *
 * - scopes: `calls` (the point of provisioning: keys for agents), and `usage:read` only if the management key holds
 *   it itself; never `keys:manage` (a management key cannot make another, nor widen itself) nor `funds:withdraw`;
 * - allowed skills: when the management key is held to some skills, so is every key it makes, to those or fewer;
 * - expiry: when the management key expires, every key it makes expires no later;
 * - spending limit: when the management key has one, every key it makes has one no wider: an amount no higher, over
 *   the same period or a longer one ($5 a month spends no more in a day than $5 a day does). Each key on its own:
 *   the limits are not shared, so ten keys may each spend that much.
 *
 * The keys it may change or revoke are those it could have made (so never itself, nor a key the owner made wider),
 * and what it changes them to must be one it could make. It may revoke itself.
 */

/** What of a key the rules compare. */
export interface KeyShape {
  scopes: readonly KeyScope[];
  /** Slugs or UUIDs as the key's maker named them; null for every skill. */
  allowedSkills: readonly string[] | null;
  expiresAtMs: number | null;
  spendLimit: SpendLimit | null;
}

/**
 * The one name of the skill a reference names, to compare two keys' allowed skills: the catalogue's id of a listed
 * skill, else the reference itself in lowercase. (Identity does not know the catalogue: the route passes it.)
 */
export type SkillCanon = (ref: string) => string;

/** Scopes a management key never grants: only a dashboard session may. */
export const SESSION_ONLY_SCOPES: readonly KeyScope[] = ["keys:manage", "funds:withdraw"];

/** How much longer each period is than a day: a limit over a longer period spends no more per day. */
const PERIOD_LENGTH: Record<SpendPeriod, number> = { day: 0, month: 1, total: 2 };
const PERIOD_WORDS: Record<SpendPeriod, string> = { day: "per day", month: "per month", total: "in total" };

/** The scopes a management key may give a key. */
export function grantableScopes(manager: Pick<KeyShape, "scopes">): KeyScope[] {
  return ["calls", ...manager.scopes.filter((scope) => scope === "usage:read")];
}

/**
 * Why `manager` may not hand out a key shaped as `key` (a key it makes, or one it changes, as it would be after the
 * change), or undefined when it may. The first reason found, in the order of the rules above.
 */
export function grantRefusal(manager: KeyShape, key: KeyShape, canon: SkillCanon): Refusal<"authority_exceeded"> | undefined {
  const refused = (message: string) => refusal("authority_exceeded", message);
  const grantable = grantableScopes(manager);
  for (const scope of key.scopes) {
    if (grantable.includes(scope)) continue;
    return refused(
      SESSION_ONLY_SCOPES.includes(scope)
        ? `A keys:manage key cannot give a key the ${scope} scope: only a dashboard session can.`
        : `This keys:manage key cannot give a key the ${scope} scope, which it does not hold itself.`,
    );
  }
  if (manager.allowedSkills !== null) {
    const allowed = new Set(manager.allowedSkills.map(canon));
    const listed = manager.allowedSkills.join(", ");
    if (key.allowedSkills === null)
      return refused(`This keys:manage key may call only ${listed}: a key it makes may not call every skill (allowed_skills: null).`);
    const outside = key.allowedSkills.find((ref) => !allowed.has(canon(ref)));
    if (outside !== undefined) return refused(`This keys:manage key may call only ${listed}: "${outside}" is not one of them.`);
  }
  if (manager.expiresAtMs !== null) {
    const at = new Date(manager.expiresAtMs).toISOString();
    if (key.expiresAtMs === null || key.expiresAtMs > manager.expiresAtMs)
      return refused(`This keys:manage key expires at ${at}: a key it makes or changes must expire no later.`);
  }
  if (manager.spendLimit !== null) {
    const { limitMicros, period } = manager.spendLimit;
    const longer = (Object.keys(PERIOD_LENGTH) as SpendPeriod[]).filter((p) => PERIOD_LENGTH[p] >= PERIOD_LENGTH[period]);
    const within =
      key.spendLimit !== null && key.spendLimit.limitMicros <= limitMicros && PERIOD_LENGTH[key.spendLimit.period] >= PERIOD_LENGTH[period];
    if (!within)
      return refused(
        `This keys:manage key may spend $${usdText(limitMicros)} ${PERIOD_WORDS[period]}: a key it makes or changes needs a spending limit of at most that, ${longer.map((p) => PERIOD_WORDS[p]).join(" or ")}.`,
      );
  }
  return undefined;
}

/**
 * Why `manager` may not change or revoke the key `target` as it is now, or undefined when it may: a key it could not
 * have made is the dashboard's to change. `self`: the target is the manager itself, which may revoke itself (and
 * never change itself: it holds keys:manage).
 */
export function targetRefusal(
  manager: KeyShape,
  target: KeyShape,
  canon: SkillCanon,
  action: "change" | "revoke",
  self: boolean,
): Refusal<"authority_exceeded"> | undefined {
  if (self && action === "revoke") return undefined;
  if (self) return refusal("authority_exceeded", "A keys:manage key cannot change itself: only a dashboard session can.");
  const wider = grantRefusal(manager, target, canon);
  if (wider === undefined) return undefined;
  return refusal(
    "authority_exceeded",
    `This key may do more than this keys:manage key may grant, so only a dashboard session can ${action} it. (${wider.message})`,
  );
}

/**
 * What a key made by `manager` gets for what its maker left out: the manager's own allowed skills, expiry and
 * spending limit (so that the key is no wider than its maker without being told), the least scope otherwise.
 */
export function inheritedDefaults(manager: KeyShape): Omit<KeyShape, "scopes"> {
  return { allowedSkills: manager.allowedSkills, expiresAtMs: manager.expiresAtMs, spendLimit: manager.spendLimit };
}
