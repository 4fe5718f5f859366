import type { CallMetadata } from "./types";

/**
 * The sentences a model reads about a call (docs/clients.md, "One contract"), written once for the TypeScript clients:
 * the CLI's stdio MCP server and the LangChain tools use them. They are the hosted MCP server's words
 * (server/http/tool-text.ts), and the Python client's (skill_gateway/_tool_text.py): a test holds each to them.
 */

/** A USD amount as the gateway's metadata writes it: `$0.001`, `$0`, without float noise. */
export function usdText(usd: number): string {
  return `$${Number(usd.toPrecision(12))}`;
}

/**
 * The line after a successful call's data: `Charged $0.001 for echo (call <id>).`, or for an idempotent replay, which
 * charged nothing new, `Already paid: $0.001 for echo (call <id>, replayed).`
 */
export function costLine(metadata: Pick<CallMetadata, "skillId" | "cost" | "callId" | "replayed">): string {
  const usd = usdText(metadata.cost);
  const skill = metadata.skillId || "the skill";
  if (metadata.replayed) return `Already paid: ${usd} for ${skill} (${metadata.callId ? `call ${metadata.callId}, ` : ""}replayed).`;
  return `Charged ${usd} for ${skill}${metadata.callId ? ` (call ${metadata.callId})` : ""}.`;
}

/** A skill's measured quality, as GET /v1/skills's `quality` names it (null: too few calls this week to say). */
export interface QualityFacts {
  calls_7d: number;
  success_rate_7d: number;
  p50_ms_7d: number;
  p95_ms_7d: number;
}

/** A whole number with thousands separators, the same in every locale: `1,250`. */
const countText = (n: number) => String(Math.trunc(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");

/**
 * The sentence a tool description says of a skill's measured quality: `Succeeded 99.2% of 1,250 calls this week, p95
 * 340 ms.` The rate is rounded down to a tenth of a percent (never better than measured); without figures (too few
 * calls), `Too few calls this week to measure its success rate.`
 */
export function qualityLine(quality: QualityFacts | null | undefined): string {
  if (!quality) return "Too few calls this week to measure its success rate.";
  const tenths = Math.floor(Math.round(quality.success_rate_7d * 10_000) / 10);
  const rate = `${Math.floor(tenths / 10)}${tenths % 10 === 0 ? "" : `.${tenths % 10}`}`;
  const calls = `${countText(quality.calls_7d)} call${quality.calls_7d === 1 ? "" : "s"}`;
  const p95 = Number.isInteger(quality.p95_ms_7d) ? countText(quality.p95_ms_7d) : String(quality.p95_ms_7d);
  return `Succeeded ${rate}% of ${calls} this week, p95 ${p95} ms.`;
}

/** What to do next after a failure of each code, when the gateway's own message does not say it. */
const NEXT_STEP: Record<string, string> = {
  invalid_input: "Fix the arguments and call again.",
  skill_rejected_input: "Fix the arguments and call again.",
  invalid_request: "Fix the arguments and call again.",
  key_spend_limit_reached: "Paid calls with this API key are refused until the limit allows them.",
  skill_not_allowed: "Do without it, or use a key allowed to call it.",
  skill_error: "You may retry, or do without it.",
  skill_timeout: "You may retry, or do without it.",
  skill_unreachable: "You may retry, or do without it.",
  skill_invalid_response: "You may retry, or do without it.",
  skill_backend_forbidden: "Do without it.",
};

const oneLine = (text: string) =>
  text
    .replace(/\s*\n\s*/g, " ")
    .trim()
    .replace(/([^.!?])$/, "$1.");

/**
 * A failed call's text, one line: the gateway's message, then "Nothing was charged." unless the message says so
 * already (every failure the gateway answers is uncharged, and it is said once), then what to do next when the message
 * does not say it (a 429's wait, from Retry-After).
 */
export function failureLine(message: string, code?: string, retryAfterSec?: number): string {
  const said = oneLine(message);
  const charged = /not charged|nothing was charged/i.test(said) ? "" : " Nothing was charged.";
  const limited = code === "rate_limited" || code === "daily_limit_reached";
  const next = limited ? (retryAfterSec !== undefined ? `Retry after ${retryAfterSec} s.` : "Retry later.") : NEXT_STEP[code ?? ""];
  return `${said}${charged}${next ? ` ${next}` : ""}`;
}

/**
 * What a model reads when a tool's call was refused because the skill now costs more than the cap the tool carries
 * (409 `price_above_max`): what happened, that nothing was charged, and that only its owner can accept the new price.
 * A model cannot change a tool's cap, so the gateway's own advice (send a higher max_price) is not for it. `price` and
 * `cap` in USD; either may be unknown.
 */
export function priceAboveCapText(slug: string, price: number | undefined, cap: number | undefined): string {
  const now = price !== undefined ? ` now costs ${usdText(price)} per call,` : " now costs";
  const capped = cap !== undefined ? ` the ${usdText(cap)} cap its tool was given` : " the cap its tool was given";
  return `The skill "${slug}"${now} more than${capped}: nothing was charged. You cannot raise the cap: tell your owner, who must re-add the skill to accept the new price, and do without it until then.`;
}

/** The shape of the SDK's SkillGatewayError that the text needs (duck-typed: two copies of the SDK still match). */
interface GatewayErrorLike {
  status: number | undefined;
  code: string;
  message: string;
  retryAfterMs?: number;
}

function isGatewayError(error: unknown): error is GatewayErrorLike {
  return error instanceof Error && typeof (error as { code?: unknown }).code === "string" && "status" in error;
}

/**
 * The text for any error a call threw. The gateway's answers (a status) are failureLine. Without an answer (the SDK's
 * `timeout`, `connection_error`) the gateway may have charged the call: that is said, with the safe retry.
 */
export function failureText(error: unknown): string {
  if (!isGatewayError(error)) return oneLine(error instanceof Error ? error.message : String(error));
  if (error.status === undefined)
    return `${oneLine(error.message)} No answer came, so the call may have been charged; a retry with the same Idempotency-Key is charged at most once.`;
  const retryAfterSec = error.retryAfterMs !== undefined ? Math.ceil(error.retryAfterMs / 1000) : undefined;
  return failureLine(error.message, error.code, retryAfterSec);
}
