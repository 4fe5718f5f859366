import { z } from "zod";
import { usdToMicros } from "../../ledger/money";
import { ApiError } from "../errors";
import { jsonObject, operation, replaceWith, usdNumber } from "./common";

/**
 * The spec's two call endpoints (SPEC.md 4.1 and 4.2) and the dashboard's "try it" form, which
 * answers exactly as the per-skill endpoint does. The skill's own `input` is checked against the
 * seller's JSON Schema by catalog/, never here: these schemas check only the envelope around it.
 */

const CALL_ERRORS = [
  "skill_not_found",
  "skill_not_allowed",
  "price_above_max",
  "invalid_input",
  "skill_rejected_input",
  "insufficient_balance",
  "key_spend_limit_reached",
  "daily_limit_reached",
  "idempotency_key_in_use",
  "idempotency_key_reused",
  "skill_error",
  "skill_timeout",
  "skill_unreachable",
  "skill_invalid_response",
  "skill_bad_output",
  "skill_bad_charge",
  "skill_backend_forbidden",
  "limits_unavailable",
  "database_unavailable",
] as const;

const skillData = z.unknown().meta({ description: "What the skill answered: its own JSON." });

/**
 * What every call's input must be to reach the skill with the values sent (../json-body.ts
 * refuses the rest before anything runs): said in the API document, where clients read it.
 */
const EXACT_INPUT =
  "Numbers must be ones JSON carries exactly: an integer past ±(2^53 - 1) or a number beyond about 1.8e308 is refused with 400 invalid_json (send it as a string), as is a body that is not UTF-8.";

/** The highest max_price a call may name: $1,000,000, as a key's spending limit (far below 2^53 base units: its JSON number is exact). */
export const MAX_MAX_PRICE_MICROS = 1_000_000_000_000n;

const MAX_PRICE_MESSAGE = 'must be a USD amount above 0 and at most 1000000, with at most 6 decimals (such as "0.002" or 0.002).';

/**
 * A call's max_price in base units, from a JSON string or number or a header's text; undefined for anything else. Read
 * as strictly as prices are (ledger/money.ts usdToMicros), and more: digits, a point and at most 6 decimals, nothing
 * around them (no sign, exponent or space), above 0 and at most MAX_MAX_PRICE_MICROS. A JSON number is read by its
 * shortest decimal form, so 0.1 + 0.2 (0.30000000000000004) is refused rather than rounded.
 */
export function parseMaxPrice(value: unknown): bigint | undefined {
  if (typeof value !== "string" && typeof value !== "number") return undefined;
  const text = String(value);
  if (!/^\d+(\.\d{1,6})?$/.test(text)) return undefined;
  const micros = usdToMicros(text);
  return micros > 0n && micros <= MAX_MAX_PRICE_MICROS ? micros : undefined;
}

/**
 * A max_price read outside a body (the X-Max-Price header, MCP's `_meta.max_price`), named `name` in its 400: base
 * units, or undefined when absent.
 */
export function maxPriceOf(value: unknown, name: string): bigint | undefined {
  if (value === undefined) return undefined;
  const micros = parseMaxPrice(value);
  if (micros === undefined) throw new ApiError("invalid_request", `${name} ${MAX_PRICE_MESSAGE}`);
  return micros;
}

/** A max_price field or header, parsed into base units, or the 400 naming `name`. */
const maxPrice = (name: string) =>
  z.union([z.string(), z.number()], { error: `${name} ${MAX_PRICE_MESSAGE}` }).transform((value, ctx) => {
    const micros = parseMaxPrice(value);
    if (micros !== undefined) return micros;
    ctx.addIssue({ code: "custom", message: `${name} ${MAX_PRICE_MESSAGE}` });
    return z.NEVER;
  });

const MAX_PRICE_MEANING =
  "The most this call may cost, in USD (what it would charge: GET /v1/skills' price_per_call): a skill priced above it is refused with 409 price_above_max, naming the current price, and nothing is held or charged. Above 0, at most 6 decimals.";

/** POST /v1/call's body (SPEC 2.1). */
export const callRequestBody = z
  .object(
    {
      skill_id: z
        .string({ error: "skill_id is required: a skill slug or UUID." })
        .refine((ref) => ref.trim() !== "", { error: "skill_id is required: a skill slug or UUID." })
        .meta({ description: "The skill's slug or UUID." }),
      input: jsonObject("input is required and must be a JSON object.").meta({ description: `The skill's parameters. ${EXACT_INPUT}` }),
      max_price: maxPrice("max_price")
        .nullable()
        .optional()
        .meta({
          description: `${MAX_PRICE_MEANING} A string ("0.002") or a number; null or absent: any price.`,
          override: replaceWith({ type: ["string", "number", "null"] }),
        }),
    },
    { error: "Request body must be a JSON object with skill_id and input." },
  )
  .meta({ id: "CallRequest" });

/** The per-skill endpoint's body: the skill's parameters, flat (an empty body is `{}`). */
export const skillParametersBody = jsonObject("Request body must be a JSON object of the skill's parameters.").meta({
  id: "SkillParameters",
  description: `The skill's own parameters, as a flat JSON object (no wrapper). ${EXACT_INPUT}`,
});

export const skillIdParams = z.object({ skillId: z.string().meta({ description: "The skill's slug or UUID." }) });

/** The header that carries a call's max_price where the body cannot (the per-skill endpoint, whose body is the skill's). */
export const MAX_PRICE_HEADER = "x-max-price";

/** The call endpoints' request headers the contract names: X-Max-Price (read by maxPriceOf, as the document says). */
const maxPriceHeaders = z.object({
  [MAX_PRICE_HEADER]: z
    .string()
    .regex(/^\d+(\.\d{1,6})?$/)
    .optional()
    .meta({
      description: `${MAX_PRICE_MEANING} A decimal string ("0.002"). On POST /v1/call too, beside the body's max_price: the lower one holds.`,
    }),
});

/**
 * The numbers of a refusal a client acts on, beside `error` and `code` (402 and 409 price_above_max): USD, as the
 * API's JSON writes amounts.
 */
export const refusalDetails = z
  .looseObject({
    price: usdNumber.meta({ description: "What the call would have cost." }),
    available: usdNumber.optional().meta({ description: "402: the account's available balance." }),
    limit: usdNumber.optional().meta({ description: "402 key_spend_limit_reached: the key's spending limit per period." }),
    spent: usdNumber
      .optional()
      .meta({ description: "402 key_spend_limit_reached: what the key's current period has spent, calls in flight included." }),
    period: z.enum(["day", "month", "total"]).optional().meta({ description: "402 key_spend_limit_reached: the limit's period." }),
    resets_at: z
      .string()
      .nullable()
      .optional()
      .meta({ format: "date-time", description: "402 key_spend_limit_reached: when the period's count starts again; null: never." }),
    max_price: usdNumber.optional().meta({ description: "409 price_above_max: the call's max_price." }),
  })
  .meta({ id: "RefusalDetails" });

/** The headers of a charged call's answer: what the payer has left, read in the transaction that charged it. */
export const BUDGET_HEADERS = {
  "x-balance-available": {
    description: 'On a charged call: the account\'s available balance after the charge, a USD decimal string ("9.999").',
    optional: true,
  },
  "x-key-spend-remaining": {
    description:
      "On a charged call with a key that has a spending limit: what the key may still spend in its current period after the charge, a USD decimal string.",
    optional: true,
  },
} as const;

/** SPEC 2.2: snake_case metadata on POST /v1/call. */
export const callMetadata = z
  .strictObject({
    skill_id: z.string(),
    response_time_ms: z.number(),
    price_paid: z.number().meta({ description: "USD charged; 0 when the call was not charged." }),
    call_id: z.string().optional().meta({
      description:
        "The call's id, as in the X-Call-Id header (and in a replay of the answer): on every 200, and on an error of a call with a line in the calls log.",
    }),
  })
  .meta({ id: "CallMetadata" });

/** SPEC 2.2: camelCase metadata on POST /v1/skills/:skillId/call. */
export const skillCallMetadata = z
  .strictObject({
    skillId: z.string(),
    cost: z.number().meta({ description: "USD charged; 0 when the call was not charged." }),
    responseTime: z.number().meta({ description: "Milliseconds." }),
    callId: z.string().optional().meta({
      description:
        "The call's id, as in the X-Call-Id header (and in a replay of the answer): on every 200, and on an error of a call with a line in the calls log.",
    }),
  })
  .meta({ id: "SkillCallMetadata" });

const callSuccess = z.strictObject({ success: z.literal(true), data: skillData, metadata: callMetadata }).meta({ id: "CallSuccess" });
export const skillCallSuccess = z
  .strictObject({ success: z.literal(true), data: skillData, metadata: skillCallMetadata })
  .meta({ id: "SkillCallSuccess" });

/** POST /v1/skills/:skillId/try's body. */
export const tryRequestBody = z.object(
  {
    key_id: z.string({ error: "key_id is required: the id of one of your API keys." }).meta({ description: "One of your API keys' ids." }),
    input: jsonObject("input must be a JSON object of the skill's parameters.").nullable().optional(),
  },
  { error: "Send { key_id, input }." },
);

export const callOperations = [
  operation({
    method: "post",
    path: "/v1/call",
    tag: "Calls",
    summary: "Call a skill (general form)",
    description:
      "Charges the skill's price from the key's balance, atomically: a failed call is never charged. Send Idempotency-Key to make retries safe.",
    auth: "api_key",
    scope: "calls",
    headers: maxPriceHeaders,
    body: callRequestBody,
    responses: [{ status: 200, description: "The skill's answer, and what the call cost.", schema: callSuccess, headers: BUDGET_HEADERS }],
    errors: [...CALL_ERRORS],
    errorFields: { metadata: callMetadata, details: refusalDetails },
  }),
  operation({
    method: "post",
    path: "/v1/skills/{skillId}/call",
    tag: "Calls",
    summary: "Call a skill (per-skill form)",
    description: "The body is the skill's parameters, flat; the metadata is camelCase.",
    auth: "api_key",
    scope: "calls",
    params: skillIdParams,
    headers: maxPriceHeaders,
    body: skillParametersBody,
    bodyOptional: true,
    responses: [
      { status: 200, description: "The skill's answer, and what the call cost.", schema: skillCallSuccess, headers: BUDGET_HEADERS },
    ],
    errors: [...CALL_ERRORS],
    errorFields: { metadata: skillCallMetadata, details: refusalDetails },
  }),
  operation({
    method: "post",
    path: "/v1/skills/{skillId}/try",
    tag: "Calls",
    summary: "Try a skill from the dashboard, as one of your keys",
    description: "Answers exactly what POST /v1/skills/{skillId}/call would, with the same charge.",
    auth: "session",
    params: skillIdParams,
    body: tryRequestBody,
    responses: [{ status: 200, description: "The skill's answer, and what the call cost.", schema: skillCallSuccess }],
    // The key picked by id is checked as a header's would be: expired (401 key_expired), without calls (403).
    errors: [...CALL_ERRORS.filter((code) => code !== "price_above_max"), "not_found", "key_expired", "scope_missing"],
    errorFields: { metadata: skillCallMetadata, details: refusalDetails },
  }),
];
