import { type SkillQuality, qualityLine } from "@skill-gateway/sdk";
import { EXIT, type ExitCode } from "./errors";

/**
 * The SKILL.md an agent reads for one gateway skill, in the Agent Skills format (https://agentskills.io/specification,
 * read by Claude Code, Codex, Cursor and OpenCode alike): frontmatter `name` (the slug, which is also its folder's
 * name), `description` (what it does and when to use it: the only part an agent reads before choosing the skill,
 * at most 1024 characters) and `compatibility` (what it needs, at most 500), then a body with when to use it, what
 * it needs, its price, its input, how to call it (the CLI, then curl to the gateway it was added from), what each
 * exit code means, and a note on spending for agents that call it in a loop.
 */

export interface SkillMdInput {
  slug: string;
  name: string;
  description: string;
  /** USD per call; for a usage-priced skill, the most a call costs. */
  price: number;
  /** `usage`: each call costs what it used, up to `price` (the texts say "up to"). */
  pricing?: "fixed" | "usage";
  inputSchema: object | null;
  /** The gateway it was added from: the curl example calls it. */
  gatewayUrl: string;
  /** What the gateway measured of the skill's calls this week when it was added; undefined from a gateway that does not say. */
  quality?: SkillQuality | null;
}

/** The command an agent runs: the project's copy of the CLI, found by npx without a registry. */
export const CLI_COMMAND = "npx -y @skill-gateway/cli";

/** Agent Skills limits the description to 1024 characters. */
export const DESCRIPTION_MAX_CHARS = 1024;

/** A price as people read it: `$0.001`, without float noise (`0.30000000000000004`). */
export function formatUsd(usd: number): string {
  return `$${Number(usd.toPrecision(12))}`;
}

/** Agent Skills limits `compatibility` to 500 characters. */
export const COMPATIBILITY_MAX_CHARS = 500;

/** "up to " before a usage-priced skill's price (the most a call costs), else nothing. */
export const upTo = (skill: { pricing?: "fixed" | "usage" }): string => (skill.pricing === "usage" ? "up to " : "");

/** The frontmatter description: the skill's own words, then when to use it, its price and how it is called. */
export function frontmatterDescription(skill: Pick<SkillMdInput, "slug" | "name" | "description" | "price" | "pricing">): string {
  const own = skill.description.replace(/\s+/g, " ").trim();
  const suffix = `Use when a task needs what "${skill.name}" does and a paid call is worth it: a Skill Gateway skill at ${upTo(skill)}${formatUsd(skill.price)} per call (failed calls are free), run with \`${CLI_COMMAND} call ${skill.slug}\`.`;
  const room = DESCRIPTION_MAX_CHARS - suffix.length - 1;
  const head = own.length > room ? `${own.slice(0, Math.max(0, room - 1)).trimEnd()}…` : own;
  return head ? `${head} ${suffix}` : suffix;
}

/**
 * A YAML scalar for any string: JSON's double-quoted form is valid YAML (its escapes are a
 * subset of YAML's), so colons, quotes and newlines in a seller's text cannot break the frontmatter.
 */
function yamlString(value: string): string {
  return JSON.stringify(value);
}

function exampleInput(schema: object | null): Record<string, unknown> {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> } | null)?.properties;
  if (!properties || typeof properties !== "object") return {};
  const example: Record<string, unknown> = {};
  for (const [key, prop] of Object.entries(properties)) {
    const type = Array.isArray(prop?.type) ? prop.type[0] : prop?.type;
    example[key] =
      type === "number" || type === "integer" ? 1 : type === "boolean" ? true : type === "array" ? [] : type === "object" ? {} : "...";
  }
  return example;
}

/** A USD amount as the X-Max-Price header takes it: decimal text, at most 6 decimals, never 0 (a free skill's cap is one base unit). */
function capText(usd: number): string {
  return usd > 0
    ? Number(usd.toPrecision(12))
        .toFixed(6)
        .replace(/\.?0+$/, "")
    : "0.000001";
}

/** What each exit code of `call` means for an agent, and what to do about it. */
function callExits(price: number): Array<[ExitCode, string]> {
  return [
    [EXIT.ok, "done: the data is on stdout, the cost on stderr"],
    [EXIT.usage, "the command or its --input is malformed (--input must be a JSON object): fix it"],
    [EXIT.notFound, "the skill is not in the marketplace any more"],
    [EXIT.auth, "no API key, or the gateway refused it: SKILL_GATEWAY_API_KEY must hold a valid atom_ key; ask the user"],
    [EXIT.insufficientBalance, `the balance is below ${formatUsd(price)}: stop and ask the user to add funds; retrying cannot help`],
    [EXIT.rateLimited, "rate limited: wait (the message says how long), then try again"],
    [EXIT.badInput, "the input was refused by the skill's schema or its backend (not charged): fix the input"],
    [EXIT.skillFailed, "the skill failed or timed out (not charged): try once more at most, then report it"],
    [EXIT.gateway, "the gateway failed or could not be reached: try later"],
    [EXIT.manifest, "the project's skill-gateway.json is unreadable: report it"],
    [EXIT.forbidden, "the API key may not call this skill (the message says why): stop and ask the user for a key that may"],
    [EXIT.spendLimit, "the API key's spending limit for its period is reached (the message says when it resets): stop and tell the user"],
    [
      EXIT.priceAboveMax,
      `the skill now costs more than the ${formatUsd(price)} it was added at, and nothing was charged: ask the user whether to accept the new price (\`${CLI_COMMAND} add\` it again)`,
    ],
  ];
}

/** The frontmatter `compatibility`: what a call needs, within the format's 500 characters. */
export function compatibility(skill: Pick<SkillMdInput, "gatewayUrl">): string {
  const text = `Needs network access to the Skill Gateway at ${skill.gatewayUrl}, an API key in the environment variable SKILL_GATEWAY_API_KEY, and either Node.js 20+ with the npm package @skill-gateway/cli or curl.`;
  return text.length <= COMPATIBILITY_MAX_CHARS
    ? text
    : "Needs a Skill Gateway API key in SKILL_GATEWAY_API_KEY, and Node.js 20+ with @skill-gateway/cli or curl.";
}

/** The whole SKILL.md. */
export function renderSkillMd(skill: SkillMdInput): string {
  const example = JSON.stringify(exampleInput(skill.inputSchema));
  const cap = capText(skill.price);
  // A usage-priced skill's every sentence about its price says it is the most a call costs.
  const price = `${upTo(skill)}${formatUsd(skill.price)}`;
  const gateway = skill.gatewayUrl.replace(/\/+$/, "");
  const schemaBlock = skill.inputSchema
    ? [
        "The input is a JSON object matching this JSON Schema (the gateway checks it before charging):",
        "",
        "```json",
        JSON.stringify(skill.inputSchema, null, 2),
        "```",
      ]
    : ["The skill has no input schema: its input is any JSON object."];
  const own = skill.description.trim();
  return [
    "---",
    `name: ${yamlString(skill.slug)}`,
    `description: ${yamlString(frontmatterDescription(skill))}`,
    `compatibility: ${yamlString(compatibility(skill))}`,
    "---",
    "",
    `# ${skill.name}`,
    "",
    own || "(The seller gave no description.)",
    "",
    "## When to use it",
    "",
    `When the task needs what the skill does (above) and the result is worth ${price} per call. It is a paid service on Skill Gateway: every successful call is charged to the user's API key, a failed call is not. Do not call it to explore or to test: read this file instead.`,
    "",
    "## What it needs",
    "",
    `- The command \`${CLI_COMMAND}\` (the npm package \`@skill-gateway/cli\`, Node.js 20 or later; npx runs the project's own copy when it is installed there), or \`skill-gateway\` when it is on the PATH. Without Node.js, curl (below).`,
    "- An API key (`atom_...`) in the environment variable `SKILL_GATEWAY_API_KEY`. Never write the key into a file or a command line; if it is not set, ask the user to set it.",
    `- The gateway: ${gateway}, where this skill was added from. The CLI calls \`$SKILL_GATEWAY_URL\` (else http://127.0.0.1:8787): set it to this gateway if they differ. The curl example below has it written in.`,
    "",
    "## Price",
    "",
    `${price} (USD) per successful call, taken from the balance of the Skill Gateway API key. A call that fails is not charged.`,
    "",
    ...(skill.quality === undefined
      ? []
      : ["## Quality", "", `Measured by the gateway from its own calls when the skill was added: ${qualityLine(skill.quality)}`, ""]),
    "## Input",
    "",
    ...schemaBlock,
    "",
    "## How to call it",
    "",
    "```sh",
    `${CLI_COMMAND} call ${skill.slug} --input '${example}'`,
    "```",
    "",
    `It prints the skill's result (\`data\`) as JSON on stdout and the cost on stderr, and exits with one of these codes (any failure also prints one line on stderr); a call is held to the price above, ${price}:`,
    "",
    "| exit | meaning and what to do |",
    "| --- | --- |",
    ...callExits(skill.price).map(([code, meaning]) => `| ${code} | ${meaning} |`),
    "",
    "Without the CLI, over HTTP:",
    "",
    "```sh",
    `curl -s "${gateway}/v1/skills/${skill.slug}/call" -H "Authorization: Bearer $SKILL_GATEWAY_API_KEY" -H "Content-Type: application/json" -H "X-Max-Price: ${cap}" -d '${example}'`,
    "```",
    "",
    `\`X-Max-Price\` holds the call to the price above: a higher price is refused (409 \`price_above_max\`) and nothing is charged.`,
    'The answer is `{"success": true, "data": ..., "metadata": {"cost": ...}}`, or `{"success": false, "error": "...", "code": "..."}`.',
    "",
    "## Spending in a loop",
    "",
    `Each successful call costs ${price}: N calls cost N × ${price}. Before calling it in a loop, count the calls and tell the user the total if it is more than a few cents. Stop at exit 5 or 11 rather than retrying (more calls cannot succeed), retry exit 8 once at most, and never call it again only to get the same answer. \`${CLI_COMMAND} balance\` shows what the key has left.`,
    "",
  ].join("\n");
}
