/**
 * The SKILL.md an agent reads for one gateway skill: Agent Skills frontmatter (`name`,
 * `description`) and a body with what the skill does, its price, its input schema and how to
 * call it through the gateway.
 */

export interface SkillMdInput {
  slug: string;
  name: string;
  description: string;
  /** USD per call. */
  price: number;
  inputSchema: object | null;
}

/** Agent Skills limits the description to 1024 characters. */
export const DESCRIPTION_MAX_CHARS = 1024;

/** A price as people read it: `$0.001`, without float noise (`0.30000000000000004`). */
export function formatUsd(usd: number): string {
  return `$${Number(usd.toPrecision(12))}`;
}

/** The frontmatter description: the skill's own words, then that it is a paid gateway skill and its price. */
export function frontmatterDescription(skill: SkillMdInput): string {
  const own = skill.description.replace(/\s+/g, " ").trim();
  const suffix = `Paid skill "${skill.name}" on Skill Gateway, ${formatUsd(skill.price)} per call; call it with \`skill-gateway call ${skill.slug}\`.`;
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

/** The whole SKILL.md. */
export function renderSkillMd(skill: SkillMdInput): string {
  const example = JSON.stringify(exampleInput(skill.inputSchema));
  const cap = capText(skill.price);
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
    "---",
    "",
    `# ${skill.name}`,
    "",
    own || "(The seller gave no description.)",
    "",
    "## Price",
    "",
    `${formatUsd(skill.price)} (USD) per successful call, taken from the balance of the Skill Gateway API key. A call that fails is not charged.`,
    "",
    "## Input",
    "",
    ...schemaBlock,
    "",
    "## How to call it",
    "",
    "With the Skill Gateway CLI (it reads the API key from `SKILL_GATEWAY_API_KEY` and the gateway from `SKILL_GATEWAY_URL`):",
    "",
    "```sh",
    `skill-gateway call ${skill.slug} --input '${example}'`,
    "```",
    "",
    "It prints the skill's result (`data`) as JSON on stdout and the cost on stderr; it exits non-zero with one line on stderr when the call fails (exit 5: the balance is too low, 7: the input was refused, 8: the skill failed, 11: the API key's spending limit is reached until it resets, 12: the skill's price rose since it was added, and nothing was charged: re-add it with `skill-gateway add` to accept the new price).",
    "",
    "Or over HTTP:",
    "",
    "```sh",
    `curl -s "$SKILL_GATEWAY_URL/v1/skills/${skill.slug}/call" -H "Authorization: Bearer $SKILL_GATEWAY_API_KEY" -H "Content-Type: application/json" -H "X-Max-Price: ${cap}" -d '${example}'`,
    "```",
    "",
    `\`X-Max-Price\` holds the call to the price above: a higher price is refused (409 \`price_above_max\`) and nothing is charged.`,
    "",
    'The answer is `{"success": true, "data": ..., "metadata": {"cost": ...}}`, or `{"success": false, "error": "...", "code": "..."}`.',
    "",
  ].join("\n");
}
