import fs from "node:fs";
import type { Skill, SkillGateway } from "@skill-gateway/sdk";
import { CliError, EXIT, errorMessageFor } from "./errors";
import { type ManifestSkill, readManifest } from "./manifest";
import { formatUsd } from "./skill-md";

/**
 * Where `skill-gateway mcp` takes its tools from, and what it says about them at start. An MCP client starts the
 * server from a folder of its own choosing (Claude Desktop: not the project), so a server that silently found no
 * manifest would answer `tools: []` and look broken for no reason anyone could see: the server says, on stderr and
 * in its instructions, which manifest it read from which absolute path, or that there was none and what to do.
 */
export type McpSource =
  /** The manifest's skills, read again on every request (skills added while it runs show up). */
  | { kind: "manifest"; file: string }
  /** Skills named by --skills, looked up once at start: each is held to the price it had then. */
  | { kind: "skills"; skills: ManifestSkill[] };

/** Parses --skills: slugs or UUIDs, comma-separated, each once. */
export function parseSkillList(value: string): string[] {
  const refs = [...new Set(value.split(",").map((s) => s.trim()))];
  if (refs.some((r) => r === "")) {
    throw new CliError(
      `--skills takes slugs separated by commas, like "echo,uppercase", not ${JSON.stringify(value)}.`,
      EXIT.usage,
      "invalid_option",
    );
  }
  return refs;
}

/** A marketplace skill as the server serves it: pinned at its current price, as `add` would pin it. */
export function pinnedFromMarketplace(skill: Skill, now = new Date()): ManifestSkill {
  return {
    id: skill.id,
    slug: skill.slug,
    name: skill.name,
    description: skill.description,
    price: skill.price_per_call,
    ...(skill.pricing === "usage" ? { pricing: "usage" as const } : {}),
    currency: skill.currency || "USD",
    inputSchema: typeof skill.input_schema === "object" && skill.input_schema !== null ? skill.input_schema : null,
    ...(skill.quality !== undefined ? { quality: skill.quality } : {}),
    agents: [],
    addedAt: now.toISOString(),
    files: [],
    dirs: [],
  };
}

/** --skills: looks each skill up in the marketplace (an unknown one fails the start, exit 3). */
export async function skillsSource(client: SkillGateway, refs: string[]): Promise<McpSource> {
  const skills: ManifestSkill[] = [];
  for (const ref of refs) skills.push(pinnedFromMarketplace(await client.skills.get(ref)));
  return { kind: "skills", skills };
}

/** The skills a source serves now. */
export function skillsOf(source: McpSource): ManifestSkill[] {
  return source.kind === "skills" ? source.skills : readManifest(source.file).skills;
}

const listed = (skills: ManifestSkill[]) => skills.map((s) => `${s.slug} (${formatUsd(s.price)}/call)`).join(", ");

/**
 * One sentence on what the server serves, for stderr and the server's instructions: the skills and where they came
 * from, or that there are none, why, and the three ways to give it some. Reads (and so checks) the manifest.
 */
export function describeSource(source: McpSource, cwd: string): string {
  if (source.kind === "skills") {
    return `Serving ${source.skills.length} skill${source.skills.length === 1 ? "" : "s"} named by --skills: ${listed(source.skills)}; each call is held to that price.`;
  }
  const fix = `add skills with \`skill-gateway add <slug>\` beside it, pass --manifest /absolute/path/to/skill-gateway.json, or name skills with --skills <slug,...>`;
  if (!fs.existsSync(source.file)) {
    return `No manifest at ${source.file} (the server was started in ${cwd}), so there are no tools: ${fix}.`;
  }
  const skills = readManifest(source.file).skills;
  if (skills.length === 0) return `The manifest ${source.file} has no skills, so there are no tools: ${fix}.`;
  return `Serving ${skills.length} skill${skills.length === 1 ? "" : "s"} from the manifest ${source.file}: ${listed(skills)}.`;
}

/**
 * Checks the API key against the gateway (GET /v1/key, which any valid key may read) and returns the one line to
 * print. A key the gateway refuses stops the start (exit 4, the gateway's reason); a gateway that cannot be reached
 * is reported and the server starts anyway, since the gateway may come up after the MCP client started it.
 */
/** How long each attempt of the start's key check may take: an MCP client waits for the server to start. */
export const KEY_CHECK_TIMEOUT_MS = 5_000;

export async function checkKey(client: SkillGateway): Promise<string> {
  try {
    const key = await client.key({ timeoutMs: KEY_CHECK_TIMEOUT_MS });
    return `API key ${key.prefix}… accepted by ${client.baseUrl}: ${formatUsd(key.available_usd)} available.`;
  } catch (error) {
    const status = (error as { status?: number }).status;
    if (status === 401 || status === 403) {
      throw new CliError(
        `The gateway at ${client.baseUrl} refused the API key: ${errorMessageFor(error)} Set SKILL_GATEWAY_API_KEY (or --api-key) to a valid atom_ key.`,
        EXIT.auth,
        (error as { code?: string }).code ?? "invalid_api_key",
      );
    }
    return `Could not check the API key: the gateway at ${client.baseUrl} did not answer (${errorMessageFor(error)}); starting anyway, calls fail until it does.`;
  }
}
