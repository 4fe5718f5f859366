/**
 * A first call to one skill, written for each way of calling the gateway (docs/clients.md):
 * curl, the TypeScript SDK, the Python client, the CLI and an MCP client's configuration.
 * Pure (no DOM): the getting-started card shows them with the key just created filled in,
 * next to that key's one-time display, and the unit tests pin them.
 */

import { shellQuote } from "./curl";

export type SnippetLanguage = "curl" | "typescript" | "python" | "cli" | "mcp";

/** The tabs, in the order shown: the first is selected. */
export const SNIPPET_LANGUAGES: ReadonlyArray<{ id: SnippetLanguage; label: string }> = [
  { id: "curl", label: "curl" },
  { id: "typescript", label: "TypeScript SDK" },
  { id: "python", label: "Python" },
  { id: "cli", label: "CLI" },
  { id: "mcp", label: "MCP config" },
];

/** What a snippet calls, and with which key. */
export interface SnippetTarget {
  /** The gateway's origin, e.g. http://127.0.0.1:8787. */
  origin: string;
  /** An API key (atom_…), or a placeholder such as $SKILL_GATEWAY_API_KEY. */
  key: string;
  slug: string;
  input: Record<string, unknown>;
}

/** A JSON value as a Python literal: JSON's strings and numbers are Python's; null, true and false are not. */
export function pythonLiteral(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (Array.isArray(value)) return `[${value.map(pythonLiteral).join(", ")}]`;
  if (typeof value === "object")
    return `{${Object.entries(value)
      .map(([name, item]) => `${JSON.stringify(name)}: ${pythonLiteral(item)}`)
      .join(", ")}}`;
  return JSON.stringify(value);
}

/** The snippet for one language. */
export function snippet(language: SnippetLanguage, target: SnippetTarget): string {
  const origin = target.origin.replace(/\/+$/, "");
  const input = JSON.stringify(target.input);
  switch (language) {
    case "curl":
      return [
        `curl -s ${shellQuote(`${origin}/v1/call`)}`,
        `  -H "Authorization: Bearer ${target.key}"`,
        `  -H 'Content-Type: application/json'`,
        `  -d ${shellQuote(JSON.stringify({ skill_id: target.slug, input: target.input }))}`,
      ].join(" \\\n");
    case "typescript":
      return [
        `import { SkillGateway } from "@skill-gateway/sdk";`,
        ``,
        `const client = new SkillGateway({ apiKey: ${JSON.stringify(target.key)}, baseUrl: ${JSON.stringify(origin)} });`,
        `const { data, metadata } = await client.call(${JSON.stringify(target.slug)}, ${input});`,
        "console.log(data, `$${metadata.cost}`, `${metadata.responseTimeMs} ms`);",
      ].join("\n");
    case "python":
      return [
        `from skill_gateway import SkillGateway`,
        ``,
        `with SkillGateway(api_key=${JSON.stringify(target.key)}, base_url=${JSON.stringify(origin)}) as client:`,
        `    result = client.call(${JSON.stringify(target.slug)}, ${pythonLiteral(target.input)})`,
        `    print(result.data, result.metadata.cost)`,
      ].join("\n");
    case "cli":
      return [
        `export SKILL_GATEWAY_API_KEY=${shellQuote(target.key)} SKILL_GATEWAY_URL=${shellQuote(origin)}`,
        `skill-gateway call ${shellQuote(target.slug)} --input ${shellQuote(input)}`,
      ].join("\n");
    case "mcp":
      return JSON.stringify(
        {
          mcpServers: {
            "skill-gateway": {
              type: "http",
              url: `${origin}/mcp?skills=${encodeURIComponent(target.slug)}`,
              headers: { Authorization: `Bearer ${target.key}` },
            },
          },
        },
        null,
        2,
      );
  }
}
