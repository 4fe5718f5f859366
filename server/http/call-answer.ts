import type { Refusal } from "../errors";
import type { CallAnswer, CallAnswers, CallBudget, CallEnd, CallResult } from "../gateway/call-result";
import { usdText } from "../ledger/money";
import type { RateDecision } from "../gateway/rate-limit";
import { callMetadata, errorEnvelope, successEnvelope } from "./envelope";
import { ERROR_STATUS } from "./errors";

/**
 * What a call's end becomes on the wire. The call service decides how a call ended (data, or a
 * code and message, and the charge); here it becomes the status and body (rendered inside the
 * charge's commit, since the body is stored for an idempotent replay) and the headers.
 */
export const callAnswers: CallAnswers = {
  render(end: CallEnd): CallAnswer {
    const metadata = {
      skillId: end.skillSlug,
      responseTimeMs: end.responseTimeMs,
      chargedMicros: end.chargedMicros,
      ...(end.callId !== undefined ? { callId: end.callId } : {}),
    };
    if (end.result.ok) return { status: 200, body: JSON.stringify(successEnvelope(end.endpoint, end.result.data, metadata)) };
    const { code, message, details } = end.result;
    return {
      status: ERROR_STATUS[code],
      body: JSON.stringify(
        errorEnvelope(code, message, { ...details, metadata: callMetadata(end.endpoint, { ...metadata, chargedMicros: 0n }) }),
      ),
    };
  },
};

/** A call's whole response: status, headers and the serialized body (a replay is sent byte for byte). */
export interface CallResponse extends CallAnswer {
  headers: Record<string, string>;
}

/**
 * The answer to a request refused before any call began (no such skill, an idempotency key in use or reused): the
 * error envelope alone, with no call metadata, since no call was made.
 */
export function refusedAnswer(refused: Refusal): CallAnswer {
  return { status: ERROR_STATUS[refused.code], body: JSON.stringify(errorEnvelope(refused.code, refused.message, refused.details)) };
}

/**
 * The response to a call's result, its headers added: rate limit, Retry-After, the call id, or that it is a replay;
 * and, on a charged call, what its payer has left (budgetHeaders).
 */
export function callResponse(result: CallResult<unknown>): CallResponse {
  if (result.kind === "replayed") return { status: result.status, body: result.body, headers: { "idempotent-replayed": "true" } };
  if (result.kind === "refused") return { ...refusedAnswer(result.refusal), headers: {} };
  const headers = result.rate ? rateHeaders(result.rate) : {};
  if (result.retryAfterMs !== undefined) headers["retry-after"] = String(Math.max(1, Math.ceil(result.retryAfterMs / 1000)));
  if (result.callId) headers["x-call-id"] = result.callId;
  if (result.budget) Object.assign(headers, budgetHeaders(result.budget));
  return { status: result.status, body: result.body, headers };
}

/** The budget headers' names (docs/keys.md, Budgets). */
export const BALANCE_AVAILABLE_HEADER = "x-balance-available";
export const KEY_SPEND_REMAINING_HEADER = "x-key-spend-remaining";

/**
 * What a charged call's payer has left, as USD decimal strings ("9.999", "5.00"): the account's available balance, and
 * for a key with a spending limit what it may still spend in its period. Both were read in the charge's transaction.
 */
function budgetHeaders(budget: CallBudget): Record<string, string> {
  const headers: Record<string, string> = { [BALANCE_AVAILABLE_HEADER]: usdText(budget.availableMicros) };
  if (budget.keySpendRemainingMicros !== undefined) headers[KEY_SPEND_REMAINING_HEADER] = usdText(budget.keySpendRemainingMicros);
  return headers;
}

/**
 * The IETF draft RateLimit headers (draft-ietf-httpapi-ratelimit-headers-06: RateLimit-Policy, -Limit, -Remaining,
 * -Reset) for the headline (per-key) limit: the style every limited endpoint sends (./rate-limits.ts sends the same).
 */
function rateHeaders(d: RateDecision): Record<string, string> {
  return {
    "ratelimit-policy": `${d.rule.limit};w=${Math.ceil(d.rule.windowMs / 1000)}`,
    "ratelimit-limit": String(d.rule.limit),
    "ratelimit-remaining": String(d.remaining),
    "ratelimit-reset": String(Math.max(0, Math.ceil(d.resetMs / 1000))),
  };
}
