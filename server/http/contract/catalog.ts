import { z } from "zod";
import { QUALITY_MIN_CALLS } from "../../gateway/quality";
import { dataEnvelope, operation } from "./common";

/** The public marketplace: GET /v1/skills and GET /v1/skills/:skillId (server/http/routes/read.ts). */

/** A skill's measured quality over the last 7 days (docs/selling.md, Quality), from the gateway's own calls. */
export const qualityView = z
  .strictObject({
    calls_7d: z.number().int().meta({
      description:
        "The calls of the last 7 days the skill is judged on: its successes and its own failures (a 502). Calls refused for the caller's doing (bad input, no funds, limits) or the gateway's are not counted.",
    }),
    success_rate_7d: z.number().meta({ description: "Successes over calls_7d, from 0 to 1, rounded down to 4 decimals (0.992 is 99.2%)." }),
    p50_ms_7d: z.number().meta({
      description: "Half of those calls answered within this many milliseconds: the bound of a fixed, log-scale latency bucket.",
    }),
    p95_ms_7d: z
      .number()
      .meta({ description: "95% of those calls answered within this many milliseconds (a bucket's bound, as p50_ms_7d)." }),
  })
  .meta({ id: "SkillQuality" });

/** A listed skill as the marketplace shows it. */
export const skillView = z
  .strictObject({
    id: z.string().meta({ description: "The skill's UUID." }),
    slug: z.string(),
    name: z.string(),
    description: z.string(),
    pricing: z.enum(["fixed", "usage"]).meta({
      description:
        "How the skill is priced: `fixed`, `price` per call; `usage`, what each call used as its backend reports it, up to `max_price` (a call holds the most and is charged what it used: `price_paid`/`cost` in its metadata).",
    }),
    price: z.number().optional().meta({ description: "A fixed-price skill's listed price per call, USD (absent for usage pricing)." }),
    max_price: z
      .number()
      .optional()
      .meta({ description: "A usage-priced skill's most one call may cost, USD, before the fee (absent for a fixed price)." }),
    price_per_call: z.number().meta({
      description:
        "What a caller pays per call, USD: the price, plus the fee when it is charged on top; for a usage-priced skill, the most a call may cost (what it holds).",
    }),
    currency: z.literal("USDC"),
    rate_limit_per_min: z.number().nullable(),
    input_schema: z.record(z.string(), z.unknown()).nullable().meta({ description: "The JSON Schema a call's input must satisfy." }),
    output_schema: z.record(z.string(), z.unknown()).optional().meta({
      description:
        "The skill's output contract, when it has one: the JSON Schema its answers promise to match. An answer that does not is a 502 skill_bad_output, not charged.",
    }),
    seller: z.strictObject({ name: z.string(), address: z.string().nullable() }),
    quality: qualityView.nullable().meta({
      description: `What the gateway measured of the skill's calls over the last 7 days; null while it has fewer than ${QUALITY_MIN_CALLS} such calls (too few to say).`,
    }),
  })
  .meta({ id: "Skill" });

export const skillParams = z.object({ skillId: z.string().meta({ description: "The skill's slug or UUID." }) });

export const catalogOperations = [
  operation({
    method: "get",
    path: "/v1/skills",
    tag: "Marketplace",
    summary: "List the listed skills",
    auth: "none",
    responses: [{ status: 200, description: "Every listed skill.", schema: dataEnvelope(z.array(skillView)) }],
    errors: [],
  }),
  operation({
    method: "get",
    path: "/v1/skills/{skillId}",
    tag: "Marketplace",
    summary: "One listed skill",
    auth: "none",
    params: skillParams,
    responses: [{ status: 200, description: "The skill.", schema: dataEnvelope(skillView) }],
    errors: ["skill_not_found", "invalid_request"],
  }),
];
