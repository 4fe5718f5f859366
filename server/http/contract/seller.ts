import { z } from "zod";
import { usdToMicros } from "../../ledger/money";
import { SKILL_DESCRIPTION_RULE, SKILL_NAME_RULE } from "../../catalog/skills";
import { QUALITY_STATS_MAX_DAYS } from "../../gateway/quality-recorder";
import { baseUnits, dataEnvelope, hexAddress, intQuery, isoDate, jsonObject, operation, policyText, skillRef, usdNumber } from "./common";
import { qualityView } from "./catalog";

/** The signed-in account's skills as their seller, and its payout address (server/http/routes/seller.ts). */

/** A USD amount a seller sets (`price`, `max_price`): a string or a number, at most 6 decimals, as base units. */
const usdAmount = (name: string, description: string) =>
  z
    .union([z.string(), z.number()], {
      error: (issue) => (issue.input === undefined ? `${name} is required.` : `${name} must be a USD amount, e.g. "0.01" or 0.01.`),
    })
    .transform((amount, ctx) => {
      try {
        return usdToMicros(String(amount));
      } catch {
        ctx.addIssue({ code: "custom", message: `${name} must be a USD amount with at most 6 decimals, e.g. "0.01".` });
        return z.NEVER;
      }
    })
    .meta({ description });

/** A required field's message when it is absent, another when it has the wrong type. */
const requiredOr = (name: string, wrongType: string) => (issue: { input?: unknown }) =>
  issue.input === undefined ? `${name} is required.` : wrongType;

/**
 * What a seller may set on a skill; the listing checks the rest (slug form, price range, backend, schema). The name and
 * description are refused here, under the text policy, before the listing looks up the backend or calls it.
 */
const fields = {
  name: policyText(SKILL_NAME_RULE, requiredOr("name", "name must be a string.")),
  description: policyText(SKILL_DESCRIPTION_RULE, "description must be a string."),
  pricing: z.enum(["fixed", "usage"], { error: 'pricing must be "fixed" or "usage".' }).meta({
    description:
      "How the skill is priced: `fixed` (the default), one `price` per call; `usage`, what each call used, as its backend reports it in a signed X-Skill-Charge header, at most `max_price`.",
  }),
  price: usdAmount(
    "price",
    'A fixed-price skill\'s price: USD per call, as a string ("0.01") or a number, at most 6 decimals. Not for a usage-priced skill.',
  ),
  max_price: usdAmount(
    "max_price",
    'A usage-priced skill\'s most a call may cost (what each call holds), USD, within the bounds of a price. Only with `"pricing": "usage"`.',
  ),
  backend_url: z.string({ error: requiredOr("backend_url", "backend_url must be a string.") }).meta({
    description: "Where calls are forwarded: reachable on the public internet.",
  }),
  timeout_ms: z.number({ error: "timeout_ms must be a number of milliseconds." }),
  rate_limit_per_min: z.number({ error: "rate_limit_per_min must be a number or null." }).nullable(),
  input_schema: jsonObject("input_schema must be a JSON Schema object or null.")
    .nullable()
    .meta({ description: "The JSON Schema a call's input must satisfy; null for none." }),
  output_schema: jsonObject("output_schema must be a JSON Schema object or null.").nullable().meta({
    description:
      "The skill's output contract: a JSON Schema its 2xx answers promise to match, held to the input schema's bounds. An answer that does not is a 502 skill_bad_output, not charged. null for none.",
  }),
};

/** POST /v1/seller/skills's body. */
export const createSellerSkillBody = z.object(
  {
    slug: z.string({ error: "slug is required: lowercase letters, digits and dashes." }).meta({
      description: "How callers name the skill: lowercase letters, digits and dashes. It never changes.",
    }),
    name: fields.name,
    description: fields.description.optional(),
    pricing: fields.pricing.optional(),
    price: fields.price.optional(),
    max_price: fields.max_price.optional(),
    backend_url: fields.backend_url,
    timeout_ms: fields.timeout_ms.optional(),
    rate_limit_per_min: fields.rate_limit_per_min.optional(),
    input_schema: fields.input_schema.optional(),
    output_schema: fields.output_schema.optional(),
  },
  { error: "Body must be a JSON object." },
);

/** PATCH /v1/seller/skills/:id's body: the fields to change; `listed: true` lists the skill again. */
export const updateSellerSkillBody = z.object(
  {
    slug: z
      .undefined({ error: "slug cannot change: callers name the skill by it. Unlist this skill and create another." })
      .optional()
      .meta({ description: "Never: the slug cannot change.", override: { not: {} } }),
    name: fields.name.optional(),
    description: fields.description.optional(),
    pricing: fields.pricing.optional(),
    price: fields.price.optional(),
    max_price: fields.max_price.optional(),
    backend_url: fields.backend_url.optional(),
    timeout_ms: fields.timeout_ms.optional(),
    rate_limit_per_min: fields.rate_limit_per_min.optional(),
    input_schema: fields.input_schema.optional(),
    output_schema: fields.output_schema.optional(),
    listed: z.boolean({ error: "listed must be true or false." }).optional(),
  },
  { error: "Body must be a JSON object." },
);

export type UpdateSellerSkillBody = z.output<typeof updateSellerSkillBody>;

/** PUT /v1/seller/payout-address's body. */
export const payoutAddressBody = z.object(
  { address: z.string({ error: "address must be a 0x-prefixed 20-byte hex address." }) },
  { error: "Body must be a JSON object." },
);

export const sellerSkillView = z
  .strictObject({
    id: z.string(),
    slug: z.string(),
    name: z.string(),
    description: z.string(),
    pricing: z.enum(["fixed", "usage"]),
    price: z.number().optional().meta({ description: "A fixed-price skill's price per call, USD." }),
    max_price: z.number().optional().meta({ description: "A usage-priced skill's most a call may cost, USD." }),
    backend_url: z.string(),
    timeout_ms: z.number().int(),
    rate_limit_per_min: z.number().nullable(),
    input_schema: z.record(z.string(), z.unknown()).nullable(),
    output_schema: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({ description: "The skill's output contract, when it has one: the JSON Schema its 2xx answers promise to match." }),
    listed: z.boolean(),
    created_at: isoDate,
    updated_at: isoDate,
  })
  .meta({ id: "SellerSkill" });

export const backendCheckView = z
  .strictObject({
    reachable: z.boolean().meta({ description: "Whether an HTTP answer came back (always true here: a dead backend is refused)." }),
    ok: z.boolean().meta({ description: "Whether it was a 2xx with JSON, as a call needs." }),
    status: z.number().int().nullable().meta({ description: "The HTTP status, or null when none came (a timeout)." }),
    latency_ms: z.number(),
    snippet: z.string().meta({ description: "The start of the answer (at most 200 characters), or of what went wrong." }),
    message: z.string().meta({ description: "What the answer means, in plain words." }),
  })
  .meta({ id: "BackendCheck", description: "What the skill's backend answered the listing's signed test call." });

/** PATCH and DELETE /v1/seller/skills/:id's path: a slug or UUID (anything else is answered as an unknown skill, 404). */
export const sellerSkillParams = z.object({
  id: skillRef("No such skill among yours.").meta({ description: "The skill's UUID or slug." }),
});
/** A call whose answer broke the skill's output schema, as its seller sees it: never the buyer or the answer. */
export const outputFailureView = z
  .strictObject({
    call_id: z.string().meta({ description: "The call's id (its X-Call-Id)." }),
    endpoint: z.enum(["call", "skill_call", "x402"]).meta({ description: "Which call endpoint it came through." }),
    problem: z.string().meta({
      description:
        "The first problem found: the place in the skill's output schema and what failed there, such as `#/properties/text/type: must be string`. Never a value of the answer.",
    }),
    created_at: isoDate,
  })
  .meta({ id: "OutputFailure" });

/** How many output failures GET /v1/seller/skills/:id/output-failures answers with, at most. */
export const OUTPUT_FAILURES_LIMIT = 50;

/** GET /v1/seller/skills/:id/stats's query. */
export const sellerStatsQuery = z.object({
  days: intQuery("days", 7, 1, QUALITY_STATS_MAX_DAYS).meta({ description: "UTC days back, today included." }),
});

/** The figures of some calls of a skill, as its seller sees them (one day's, or the whole range's). */
const statsFigures = {
  calls: z.number().int().meta({ description: "Every call counted: successes, and failures whoever's doing they were." }),
  successes: z.number().int(),
  seller_failures: z.number().int().meta({ description: "Failures that were the skill's own (a 502): they count against it." }),
  buyer_failures: z.number().int().meta({
    description: "Calls refused for the caller's doing: input refused (400), no funds (402), limits (429). They do not count.",
  }),
  gateway_failures: z.number().int().meta({ description: "Calls the gateway itself failed (500). They do not count either." }),
  success_rate: z.number().nullable().meta({
    description: "Successes over successes and the skill's own failures, 0 to 1, rounded down to 4 decimals; null without such calls.",
  }),
  p50_ms: z.number().nullable().meta({ description: "Latency: half the counted calls answered within this (a bucket's bound, ms)." }),
  p95_ms: z.number().nullable(),
  p99_ms: z.number().nullable(),
  revenue: usdNumber.meta({ description: "What the calls captured from their buyers, USD, before the platform's fee." }),
  revenue_base_units: baseUnits,
};

export const sellerStatsView = z
  .strictObject({
    skill_id: z.string(),
    slug: z.string(),
    from: z.iso.date().meta({ description: "The first day covered (UTC)." }),
    to: z.iso.date().meta({ description: "The last day covered (UTC): today." }),
    quality: qualityView.nullable().meta({ description: "What the marketplace shows of the skill now (GET /v1/skills/:skillId)." }),
    totals: z.strictObject(statsFigures),
    days: z.array(z.strictObject({ date: z.iso.date(), ...statsFigures })).meta({ description: "One per day, oldest first." }),
    failures: z
      .array(
        z.strictObject({
          code: z.string().meta({ description: "The error code the calls ended with." }),
          fault: z.enum(["seller", "buyer", "gateway"]).meta({ description: "Whose doing it was." }),
          calls: z.number().int(),
        }),
      )
      .meta({ description: "Failures by code over the range, most first." }),
    output_contract_failures: z.number().int().meta({
      description:
        "Calls whose answers broke the skill's output schema (skill_bad_output); their first problems are in GET /v1/seller/skills/{id}/output-failures.",
    }),
    charge_header_failures: z.number().int().meta({
      description: "Calls whose X-Skill-Charge header was missing its signature, malformed or above max_price (skill_bad_charge).",
    }),
  })
  .meta({ id: "SellerSkillStats" });

/** POST /v1/seller/skills's answer: the skill, its signing secret (this once), and what its backend answered. */
export const listedSellerSkillView = sellerSkillView.extend({ signing_secret: z.string(), backend_check: backendCheckView });
/** PATCH /v1/seller/skills/:id's answer: backend_check when backend_url changed. */
export const editedSellerSkillView = sellerSkillView.extend({ backend_check: backendCheckView.optional() });
/** GET /v1/seller/payout-address's answer. */
export const payoutAddressView = z.strictObject({ address: hexAddress.nullable() });
/** PUT /v1/seller/payout-address's answer. */
export const payoutAddressSetView = z.strictObject({ address: hexAddress, created: z.boolean() });

const LISTING_ERRORS = ["slug_taken"] as const;

export const sellerOperations = [
  operation({
    method: "post",
    path: "/v1/seller/skills",
    tag: "Seller",
    summary: "List a new skill",
    description:
      "The gateway first makes one signed test call to the backend (input {}, the skill's timeout but at most 5 s, under the egress policy): a backend that gives no HTTP answer at all is refused with 400. Otherwise the skill is listed and backend_check says what came back. The answer holds the skill's signing secret, this once: the gateway signs every call it forwards with it.",
    auth: "session",
    body: createSellerSkillBody,
    responses: [
      {
        status: 201,
        description: "The skill, listed.",
        schema: dataEnvelope(listedSellerSkillView),
      },
    ],
    errors: [...LISTING_ERRORS],
  }),
  operation({
    method: "get",
    path: "/v1/seller/skills",
    tag: "Seller",
    summary: "The account's skills, listed or not",
    auth: "session",
    responses: [{ status: 200, description: "The skills.", schema: dataEnvelope(z.array(sellerSkillView)) }],
    errors: [],
  }),
  operation({
    method: "patch",
    path: "/v1/seller/skills/{id}",
    tag: "Seller",
    summary: "Edit one of the account's skills",
    auth: "session",
    params: sellerSkillParams,
    body: updateSellerSkillBody,
    description:
      "A new backend_url gets the listing's signed test call first: refused with 400 when nothing answers, else saved, and backend_check says what came back.",
    responses: [
      {
        status: 200,
        description: "The skill as it is now; backend_check when backend_url changed.",
        schema: dataEnvelope(editedSellerSkillView),
      },
    ],
    errors: ["not_found", ...LISTING_ERRORS],
  }),
  operation({
    method: "get",
    path: "/v1/seller/skills/{id}/output-failures",
    tag: "Seller",
    summary: "The skill's latest calls whose answers broke its output schema",
    description: `Newest first, at most ${OUTPUT_FAILURES_LIMIT}: each a 502 skill_bad_output that nobody was charged for, with the first problem found. What the answer held, and who called, are never shown.`,
    auth: "session",
    params: sellerSkillParams,
    responses: [{ status: 200, description: "The failures.", schema: dataEnvelope(z.array(outputFailureView)) }],
    errors: ["not_found"],
  }),
  operation({
    method: "get",
    path: "/v1/seller/skills/{id}/stats",
    tag: "Seller",
    summary: "The skill's calls, failures, latency and revenue, day by day",
    description: `From the gateway's roll-up of the skill's calls (hourly counts, never the calls log): each UTC day of the last \`days\` (at most ${QUALITY_STATS_MAX_DAYS}), and their totals. A call is counted once its line in the calls log is committed; a replica adds its counts to the roll-up every few seconds, and before answering this. Another seller's skill is answered as an unknown one: 404.`,
    auth: "session",
    params: sellerSkillParams,
    query: sellerStatsQuery,
    responses: [{ status: 200, description: "The skill's figures.", schema: dataEnvelope(sellerStatsView) }],
    errors: ["not_found", "invalid_request"],
  }),
  operation({
    method: "delete",
    path: "/v1/seller/skills/{id}",
    tag: "Seller",
    summary: "Unlist one of the account's skills",
    auth: "session",
    params: sellerSkillParams,
    responses: [{ status: 200, description: "The skill, unlisted: calls get 404 from now on.", schema: dataEnvelope(sellerSkillView) }],
    errors: ["not_found"],
  }),
  operation({
    method: "get",
    path: "/v1/seller/payout-address",
    tag: "Seller",
    summary: "The address settlement pays the account's earnings to",
    auth: "session",
    responses: [{ status: 200, description: "null when none is set.", schema: dataEnvelope(payoutAddressView) }],
    errors: [],
  }),
  operation({
    method: "put",
    path: "/v1/seller/payout-address",
    tag: "Seller",
    summary: "Set the payout address, once",
    description: "The address must be the account's embedded wallet, or one it signed in with (SIWE).",
    auth: "session",
    body: payoutAddressBody,
    responses: [
      {
        status: 200,
        description: "The payout address.",
        schema: dataEnvelope(payoutAddressSetView),
      },
    ],
    errors: ["payout_address_refused"],
  }),
];
