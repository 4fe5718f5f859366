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
