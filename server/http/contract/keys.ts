import { z } from "zod";
import { usdToMicros } from "../../ledger/money";
import { SPEND_PERIODS } from "../../ledger/spend-limits";
import { KEY_NAME_RULE } from "../../identity/api-keys";
import { KEY_SCOPES, MAX_ALLOWED_SKILLS, MAX_KEY_LIFETIME_MS, SCOPE_MEANING } from "../../identity/scopes";
import {
  METADATA_RULE,
  MAX_METADATA_ENTRIES,
  MAX_METADATA_NAME_CHARS,
  MAX_METADATA_VALUE_CHARS,
  checkMetadata,
} from "../../identity/key-metadata";
import { isSkillRef } from "../../catalog/skills";
import { baseUnits, dataEnvelope, isoDate, operation, policyText, replaceWith, usdNumber, uuidId } from "./common";

/** API keys of the account (server/http/routes/keys.ts), from a dashboard session or a keys:manage key, and their spending limits. */

/** Longest key name. */
export const MAX_KEY_NAME_CHARS = KEY_NAME_RULE.maxChars;
/** The highest spending limit a key may carry: $1,000,000 (far below 2^53 base units, so its JSON number is exact). */
export const MAX_SPEND_LIMIT_MICROS = 1_000_000_000_000n;

const NAME_MESSAGE = `name must be a string of at most ${MAX_KEY_NAME_CHARS} characters.`;
const LIMIT_MESSAGE =
  'spend_limit_usd must be a USD amount above 0 and at most 1000000, with at most 6 decimals (such as "5.00" or 5), or null for no limit.';
const PERIOD_MESSAGE = "spend_limit_period must be day, month or total.";

/**
 * A spending limit in USD, as a string ("5.00") or a JSON number, parsed exactly into base units by the parser prices
 * use (ledger/money.ts usdToMicros): a number whose shortest decimal form has more than 6 decimals (0.1 + 0.2 is
 * 0.30000000000000004) or an exponent (1e-7) is refused rather than rounded. Null: no limit.
 */
export const spendLimitUsd = z
  .union([z.string(), z.number()], {
    error: (issue) =>
      issue.input === undefined ? "spend_limit_usd is required: a USD amount, or null to remove the limit." : LIMIT_MESSAGE,
  })
  .transform((value, ctx) => {
    try {
      const micros = usdToMicros(String(value));
      if (micros > 0n && micros <= MAX_SPEND_LIMIT_MICROS) return micros;
    } catch {
      // Refused below, with the one message.
    }
    ctx.addIssue({ code: "custom", message: LIMIT_MESSAGE });
    return z.NEVER;
  })
  .nullable()
  .meta({ description: 'USD the key may spend per period, as a string ("5.00") or a number, at most 6 decimals; null for no limit.' });

export const spendLimitPeriod = z
  .enum(SPEND_PERIODS as ["day", "month", "total"], { error: PERIOD_MESSAGE })
  .meta({ description: "day: rolls over at 00:00 UTC; month: at 00:00 UTC on the 1st; total: never." });

const SCOPES_MESSAGE = `scopes must be a list of at least one of ${KEY_SCOPES.join(", ")}, each once.`;
const ALLOWED_MESSAGE = `allowed_skills must be a list of 1 to ${MAX_ALLOWED_SKILLS} skill slugs or UUIDs, each once, or null for every skill.`;
const EXPIRES_MESSAGE = "expires_at must be an ISO 8601 time with its offset (2027-01-31T00:00:00Z), or null for never.";

const keyScope = z.enum(KEY_SCOPES as unknown as ["calls", "usage:read", "funds:withdraw", "keys:manage"], { error: SCOPES_MESSAGE });

/** A key's scopes: from the closed vocabulary, at least one, none twice (a duplicate is a mistake worth telling). */
const scopesField = z
  .array(keyScope, { error: SCOPES_MESSAGE })
  .min(1, { error: SCOPES_MESSAGE })
  .max(KEY_SCOPES.length, { error: SCOPES_MESSAGE })
  .refine((scopes) => new Set(scopes).size === scopes.length, { error: SCOPES_MESSAGE })
  .meta({
    description: `What the key may do; ["calls"] when absent. ${KEY_SCOPES.map((scope) => `${scope}: ${SCOPE_MEANING[scope]}`).join("; ")}.`,
  });

/** The skills a key may call, by slug or UUID (checked by shape here; the route checks that each names a listed skill). */
export const allowedSkillsField = z
  .array(z.string({ error: ALLOWED_MESSAGE }).refine(isSkillRef, { error: ALLOWED_MESSAGE }), { error: ALLOWED_MESSAGE })
  .min(1, { error: ALLOWED_MESSAGE })
  .max(MAX_ALLOWED_SKILLS, { error: ALLOWED_MESSAGE })
  .refine((refs) => new Set(refs.map((ref) => ref.toLowerCase())).size === refs.length, { error: ALLOWED_MESSAGE })
  .nullable()
  .meta({
    description: `Only these skills (slugs or UUIDs of listed skills, at most ${MAX_ALLOWED_SKILLS}) may be called with the key: another is 403 skill_not_allowed, and costs nothing. Absent or null: every skill.`,
  });

/** When the key stops working, as epoch ms (the route checks it is in the future, within MAX_KEY_LIFETIME_MS). */
export const expiresAtField = z
  .string({ error: EXPIRES_MESSAGE })
  .refine((text) => z.iso.datetime({ offset: true }).safeParse(text).success, { error: EXPIRES_MESSAGE })
  .transform((text) => Date.parse(text))
  .meta({ override: replaceWith({ type: "string", format: "date-time" }) })
  .nullable()
  .meta({
    description: `When the key stops authenticating (401 key_expired from then on): in the future, at most ${MAX_KEY_LIFETIME_MS / 86_400_000} days away. Absent or null: never.`,
  });

/** What its maker says the key is for: a small map of strings (server/identity/key-metadata.ts bounds it). */
const metadataField = z
  .unknown()
  .transform((value, ctx) => {
    if (value === null) return {};
    const checked = checkMetadata(value);
    if (checked.ok) return checked.metadata;
    ctx.addIssue({ code: "custom", message: checked.message });
    return z.NEVER;
  })
  .meta({
    override: replaceWith({
      type: ["object", "null"],
      maxProperties: MAX_METADATA_ENTRIES,
      propertyNames: { pattern: `^[A-Za-z0-9][A-Za-z0-9_.:-]{0,${MAX_METADATA_NAME_CHARS - 1}}$` },
      additionalProperties: { type: "string", maxLength: MAX_METADATA_VALUE_CHARS },
      description: `What the key is for, shown with it and in usage (which agent, which end user): ${METADATA_RULE}`,
    }),
  });

/** The fields a key's body may hold, for the message that names an unknown one. */
const KEY_FIELDS = ["name", "spend_limit_usd", "spend_limit_period", "scopes", "allowed_skills", "expires_at", "metadata"];

/**
 * A key's body is strict: a field the gateway does not know is refused, not ignored, so that a misspelt restriction
 * (`allowed_skill`) never makes a key wider than its maker meant.
 */
const keyBodyError = (issue: { code?: string; keys?: string[] }) =>
  issue.code === "unrecognized_keys"
    ? `Unknown field ${JSON.stringify(issue.keys?.[0] ?? "")}: a key's fields are ${KEY_FIELDS.join(", ")}.`
    : "Body must be a JSON object.";

/**
 * POST /v1/keys's body: an optional name (an empty body names the key ""), an optional spending limit with its period,
 * what the key may do (its scopes, the least, ["calls"], by default; the skills it may call; when it expires), and
 * its metadata.
 */
export const createKeyBody = z.strictObject(
  {
    name: policyText(KEY_NAME_RULE, NAME_MESSAGE)
      .optional()
      .meta({
        description: `A label for the key: at most ${MAX_KEY_NAME_CHARS} characters once trimmed, no control or invisible characters.`,
      }),
    spend_limit_usd: spendLimitUsd.optional(),
    spend_limit_period: spendLimitPeriod.optional().meta({ description: "Required with spend_limit_usd." }),
    scopes: scopesField.optional(),
    allowed_skills: allowedSkillsField.optional(),
    expires_at: expiresAtField.optional(),
    metadata: metadataField.optional(),
  },
  { error: keyBodyError },
);

/**
 * PATCH /v1/keys/:id's body: any of the key's fields, each replaced by what is sent (metadata whole); a field left out
 * is unchanged. At least one.
 */
export const updateKeyBody = z
  .strictObject(
    {
      name: policyText(KEY_NAME_RULE, NAME_MESSAGE).optional().meta({ description: "The key's new label." }),
      spend_limit_usd: spendLimitUsd.optional().meta({
        description: 'The new limit in USD, as a string ("5.00") or a number, at most 6 decimals; null removes the limit.',
      }),
      spend_limit_period: spendLimitPeriod.optional().meta({
        description: "The limit's new period; with spend_limit_usd left out, the key's current amount over it (the key needs a limit).",
      }),
      scopes: scopesField.optional().meta({ description: "The key's new scopes, replacing the old ones." }),
      allowed_skills: allowedSkillsField.optional(),
      expires_at: expiresAtField.optional(),
      metadata: metadataField
        .optional()
        .meta({ description: `The key's new metadata, replacing all of it ({} or null: none). ${METADATA_RULE}` }),
    },
    { error: keyBodyError },
  )
  .refine((body) => Object.values(body).some((value) => value !== undefined), {
    error: `Send at least one field to change: ${KEY_FIELDS.join(", ")}.`,
  });

/** PATCH and DELETE /v1/keys/:id's path: a key id is a UUID (anything else is answered as an unknown key, 404). */
export const keyParams = z.object({ id: uuidId("No such key on this account.").meta({ description: "The key's id (GET /v1/keys)." }) });

export const keyView = z
  .strictObject({
    id: z.string(),
    prefix: z.string().meta({ description: "The key's visible start, to recognise it by." }),
    name: z.string(),
    created_at: isoDate.nullable(),
    last_used_at: isoDate.nullable(),
    spend_limit_usd: usdNumber.nullable().meta({ description: "What the key may spend per period, in USD; null: no limit." }),
    spend_limit_base_units: baseUnits.nullable(),
    spend_limit_period: z.enum(SPEND_PERIODS as ["day", "month", "total"]).nullable(),
    spent_usd: usdNumber
      .nullable()
      .meta({ description: "What the key spent in the current period (calls in flight included), in USD; null without a limit." }),
    spent_base_units: baseUnits.nullable(),
    resets_at: isoDate
      .nullable()
      .meta({ description: "When the current period ends and spent_usd starts again from 0; null for total, or without a limit." }),
    scopes: z.array(z.enum(KEY_SCOPES as unknown as [string, ...string[]])).meta({ description: "What the key may do." }),
    allowed_skills: z
      .array(z.string())
      .nullable()
      .meta({ description: "The skills the key may call, as its maker named them; null: every skill." }),
    expires_at: isoDate.nullable().meta({ description: "When the key stops authenticating; null: never." }),
    metadata: z
      .record(z.string(), z.string())
      .meta({ description: "What the key's maker says it is for (which agent, which end user); {} for nothing." }),
  })
  .meta({ id: "ApiKey" });

/** A key as the routes build it (routes/keys.ts view): typed from keyView, so tsc refuses a field the contract lacks or misses one it has. */
export type KeyView = z.input<typeof keyView>;

/** POST /v1/keys's answer: the key, and the whole key this once. */
export const createdKeyView = keyView.extend({ key: z.string().regex(/^atom_/) });

/** DELETE /v1/keys/:id's answer. */
export const revokedKeyView = z.strictObject({ id: z.string(), revoked: z.literal(true) });

/** A management key's refusal: it asked for more than it may grant (server/identity/key-authority.ts). */
const MANAGE_NOTE =
  " With a keys:manage key (docs/keys.md, Keys made by code): never keys:manage or funds:withdraw, usage:read only if the managing key has it, and skills, expiry and spending limit no wider than its own (its own are the defaults); anything more is 403 authority_exceeded.";

export const keyOperations = [
  operation({
    method: "post",
    path: "/v1/keys",
    tag: "Keys",
    summary: "Create an API key",
    description:
      'The whole key (atom_...) is in this answer only; the gateway keeps its hash. With spend_limit_usd and spend_limit_period, a call that would take the key past its limit for the period is refused with 402 key_spend_limit_reached. The key has the scopes asked for, ["calls"] by default (docs/keys.md).' +
      MANAGE_NOTE,
    auth: "account",
    scope: "keys:manage",
    body: createKeyBody,
    bodyOptional: true,
    responses: [
      {
        status: 201,
        description: "The key, shown this once.",
        schema: dataEnvelope(createdKeyView),
      },
    ],
    errors: ["authority_exceeded"],
  }),
  operation({
    method: "get",
    path: "/v1/keys",
    tag: "Keys",
    summary: "The account's live keys",
    auth: "account",
    scope: "keys:manage",
    responses: [
      {
        status: 200,
        description:
          "Live keys, without their secret, each with its spending limit, what it spent in the current period and when that resets, its scopes, allowed skills, expiry and metadata.",
        schema: dataEnvelope(z.array(keyView)),
      },
    ],
    errors: [],
  }),
  operation({
    method: "patch",
    path: "/v1/keys/{id}",
    tag: "Keys",
    summary: "Change a key: its name, spending limit, scopes, allowed skills, expiry or metadata",
    description:
      "Every field sent is changed, in one transaction; a field left out is kept. Applies to the key's next request, on every replica (their caches forget the key as they do a revoked one). A new spending amount keeps what the period spent: a limit lowered below it refuses calls until the period resets; a raised one lets them through at once. A new period starts its count at zero. expires_at: in the future and at most 366 days away, or null for never; an expired key is given a new life this way." +
      MANAGE_NOTE +
      " A keys:manage key changes only the keys it could have made, never itself.",
    auth: "account",
    scope: "keys:manage",
    params: keyParams,
    body: updateKeyBody,
    responses: [{ status: 200, description: "The key as GET /v1/keys lists it.", schema: dataEnvelope(keyView) }],
    errors: ["not_found", "authority_exceeded"],
  }),
  operation({
    method: "delete",
    path: "/v1/keys/{id}",
    tag: "Keys",
    summary: "Revoke a key at once",
    description: "A keys:manage key revokes only the keys it could have made (403 authority_exceeded for another), and itself.",
    auth: "account",
    scope: "keys:manage",
    params: keyParams,
    responses: [
      {
        status: 200,
        description: "Revoked: the next call with it gets 401.",
        schema: dataEnvelope(revokedKeyView),
      },
    ],
    errors: ["not_found", "authority_exceeded"],
  }),
];
