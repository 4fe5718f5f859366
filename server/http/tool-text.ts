/**
 * The sentences an MCP tool result says to a model about a call's money (docs/clients.md, "One contract"): the CLI's
 * stdio MCP server (clients/cli/src/mcp.ts, through the SDK's tool-text) writes the same ones, word for word, and
 * test/http/mcp-contract.test.ts holds the two to it.
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

/**
 * A failed call's text: the gateway's message on one line, ending with "Nothing was charged." unless the message says
 * so already ("You were not charged."): every failure is uncharged (docs/api.md §5), and said once.
 */
export function failureLine(message: string): string {
  const said = message
    .replace(/\s*\n\s*/g, " ")
    .trim()
    .replace(/([^.!?])$/, "$1.");
  return /not charged|nothing was charged/i.test(said) ? said : `${said} Nothing was charged.`;
}
