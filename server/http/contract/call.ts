import { z } from "zod";
import { jsonObject, operation } from "./common";

/**
 * The spec's two call endpoints (SPEC.md 4.1 and 4.2) and the dashboard's "try it" form, which
 * answers exactly as the per-skill endpoint does. The skill's own `input` is checked against the
 * seller's JSON Schema by catalog/, never here: these schemas check only the envelope around it.
 */

const CALL_ERRORS = [
  "skill_not_found",
  "skill_not_allowed",
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

/** POST /v1/call's body (SPEC 2.1). */
export const callRequestBody = z
  .object(
    {
      skill_id: z
        .string({ error: "skill_id is required: a skill slug or UUID." })
        .refine((ref) => ref.trim() !== "", { error: "skill_id is required: a skill slug or UUID." })
        .meta({ description: "The skill's slug or UUID." }),
      input: jsonObject("input is required and must be a JSON object.").meta({ description: `The skill's parameters. ${EXACT_INPUT}` }),
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

/** SPEC 2.2: snake_case metadata on POST /v1/call. */
export const callMetadata = z
  .strictObject({
    skill_id: z.string(),
    response_time_ms: z.number(),
    price_paid: z.number().meta({ description: "USD charged; 0 when the call was not charged." }),
  })
  .meta({ id: "CallMetadata" });

/** SPEC 2.2: camelCase metadata on POST /v1/skills/:skillId/call. */
export const skillCallMetadata = z
  .strictObject({
    skillId: z.string(),
    cost: z.number().meta({ description: "USD charged; 0 when the call was not charged." }),
    responseTime: z.number().meta({ description: "Milliseconds." }),
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
    body: callRequestBody,
    responses: [{ status: 200, description: "The skill's answer, and what the call cost.", schema: callSuccess }],
    errors: [...CALL_ERRORS],
    errorFields: { metadata: callMetadata },
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
    body: skillParametersBody,
    bodyOptional: true,
    responses: [{ status: 200, description: "The skill's answer, and what the call cost.", schema: skillCallSuccess }],
    errors: [...CALL_ERRORS],
    errorFields: { metadata: skillCallMetadata },
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
    errors: [...CALL_ERRORS, "not_found", "key_expired", "scope_missing"],
    errorFields: { metadata: skillCallMetadata },
  }),
];
