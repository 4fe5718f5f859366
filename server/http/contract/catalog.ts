import { z } from "zod";
import { dataEnvelope, operation } from "./common";

/** The public marketplace: GET /v1/skills and GET /v1/skills/:skillId (server/http/routes/read.ts). */

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
