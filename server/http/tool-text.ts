/**
 * The sentences an MCP tool result says to a model about a call's money (docs/clients.md, "One contract"): the CLI's
 * stdio MCP server (clients/cli/src/mcp.ts, through the SDK's clients/typescript/src/tool-text.ts) writes the same
 * ones, word for word: neither package may import the other, and test/http/tool-text.test.ts holds the two copies
 * together (the Python client's, clients/python/src/skill_gateway/_tool_text.py, is held by the same cases).
 */

/** What a call's metadata says of its money and identity, as POST /v1/call's metadata names it. */
export interface CostFacts {
  skill_id?: string;
  price_paid?: number;
  call_id?: string;
  /** True when the answer is an idempotent replay of an earlier call's: nothing new was charged. */
  replayed?: boolean;
}

/**
 * The line after a successful call's data: `Charged $0.001 for echo (call <id>).`, or for a replay, which charged
 * nothing new, `Already paid: $0.001 for echo (call <id>, replayed).`
 */
export function costLine(facts: CostFacts): string {
  const usd = `$${facts.price_paid ?? 0}`;
  const skill = facts.skill_id ?? "the skill";
  if (facts.replayed) return `Already paid: ${usd} for ${skill} (${facts.call_id ? `call ${facts.call_id}, ` : ""}replayed).`;
  return `Charged ${usd} for ${skill}${facts.call_id ? ` (call ${facts.call_id})` : ""}.`;
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

/**
 * A failed call's text, one line: the gateway's message, then "Nothing was charged." unless the message says so
 * already ("You were not charged."): every failure is uncharged (docs/api.md §5), and said once; then what to do next,
 * when the message does not say it (a 429's wait, from Retry-After).
 */
export function failureLine(message: string, code?: string, retryAfterSec?: number): string {
  const said = message
    .replace(/\s*\n\s*/g, " ")
    .trim()
    .replace(/([^.!?])$/, "$1.");
  const charged = /not charged|nothing was charged/i.test(said) ? "" : " Nothing was charged.";
  const limited = code === "rate_limited" || code === "daily_limit_reached";
  const next = limited ? (retryAfterSec !== undefined ? `Retry after ${retryAfterSec} s.` : "Retry later.") : NEXT_STEP[code ?? ""];
  return `${said}${charged}${next ? ` ${next}` : ""}`;
}
