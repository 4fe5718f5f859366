import { failureText, priceAboveCapText } from "@skill-gateway/sdk";

/**
 * What the model reads when a call fails in an expected way. The SDK's errors are recognised by
 * their HTTP status (duck-typed, so two copies of the SDK in one install still match): 400, 402,
 * 429, 502 and 409 price_above_max become one line the model can act on; anything else is not
 * the model's to fix (a bad API key, an unknown skill, the gateway down) and is thrown. The line
 * is the SDK's failureText (clients/typescript/src/tool-text.ts): the same words as the CLI's
 * stdio MCP server, the hosted one and the Python client, the gateway's own message said once.
 */

/** The shape of the SDK's SkillGatewayError that the mapping needs. */
interface GatewayErrorLike {
  status: number | undefined;
  code: string;
  message: string;
  retryAfterMs?: number;
  /** PriceAboveMaxError's: what the skill costs now, and the cap the call carried, in USD. */
  price?: number;
  maxPrice?: number;
}

function isGatewayError(error: unknown): error is GatewayErrorLike {
  return error instanceof Error && typeof (error as { code?: unknown }).code === "string" && "status" in error;
}

/** A failure reported to the model rather than thrown. */
export interface SkillToolFailure {
  /** The one line the model reads. */
  message: string;
  /** The gateway's snake_case code: `insufficient_balance`, `rate_limited`, ... */
  code: string;
  status: number;
  /** For a 429: when to retry, when the gateway said. */
  retryAfterMs?: number;
}

/** The statuses a model can act on: fix the arguments, add funds, wait, retry or do without. */
const REPORTED = new Set([400, 402, 429, 502]);

/**
 * The failure to report for an expected error (400, 402, 409 price_above_max, 429, 502), or null: throw it. `slug` is
 * the tool's skill, named in the 409's line (the SDK's priceAboveCapText: only the tool's owner can accept a new price).
 */
export function failureOf(error: unknown, slug = "this skill"): SkillToolFailure | null {
  if (!isGatewayError(error) || error.status === undefined) return null;
  const priceRose = error.status === 409 && error.code === "price_above_max";
  if (!REPORTED.has(error.status) && !priceRose) return null;
  const message = priceRose ? priceAboveCapText(slug, error.price, error.maxPrice) : failureText(error);
  const failure: SkillToolFailure = { message, code: error.code, status: error.status };
  if (error.status === 429) failure.retryAfterMs = error.retryAfterMs;
  return failure;
}
