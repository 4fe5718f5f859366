import fs from "node:fs";
import path from "node:path";
import { DEFAULT_BASE_URL, type Skill, type SkillGateway } from "@skill-gateway/sdk";
import { resolveAgents, skillsDirsOf } from "./agents";
import { CliError, EXIT } from "./errors";
import { type Removed, removeWritten, writeFiles } from "./install";
import { type ManifestSkill, findSkill, projectDirOf, readManifest, writeManifest } from "./manifest";
import { formatUsd, renderSkillMd } from "./skill-md";

/**
 * What each command does, apart from argument parsing (cli.ts) and printing. Each returns a
 * value that is printed as is with --json, and as text otherwise.
 */

export interface AddResult {
  added: Array<Pick<ManifestSkill, "id" | "slug" | "name" | "price" | "agents"> & { paths: string[] }>;
}

export interface AddOptions {
  /** `--agent` values (`all` for every agent); none: the agents the project has, else DEFAULT_AGENTS. */
  agents?: readonly string[];
  /** The gateway the SKILL.md's curl example calls (the CLI's --url or SKILL_GATEWAY_URL, else the default). */
  gatewayUrl?: string;
}

/**
 * `add`: looks each skill up, writes its SKILL.md into the skills folder of every agent it is for, and pins it in the
 * manifest with every file written, so that `remove` takes every copy away.
 */
export async function addSkills(client: SkillGateway, manifestFile: string, refs: string[], options: AddOptions = {}): Promise<AddResult> {
  const projectDir = projectDirOf(manifestFile);
  const agents = resolveAgents(options.agents ?? [], projectDir);
  const added: AddResult["added"] = [];
  for (const ref of refs) {
    const skill: Skill = await client.skills.get(ref);
    const manifest = readManifest(manifestFile);
    const previous = findSkill(manifest, skill.id) ?? findSkill(manifest, skill.slug);
    const inputSchema = isObject(skill.input_schema) ? skill.input_schema : null;
    const price = skill.price_per_call;
    // A re-add replaces the earlier one: its files go first (edited ones stay, and are ours to overwrite).
    let leftover: Removed | undefined;
    if (previous) leftover = removeWritten(projectDir, previous);
    const content = renderSkillMd({ ...skill, price, inputSchema, gatewayUrl: options.gatewayUrl ?? DEFAULT_BASE_URL });
    const paths = skillsDirsOf(agents).map((dir) => `${dir}/${skill.slug}/SKILL.md`);
    const written = writeFiles(projectDir, Object.fromEntries(paths.map((p) => [p, content])), new Set(previous?.files.map((f) => f.path)));
    const keptDirs = previous ? previous.dirs.filter((d) => !leftover?.removedDirs.includes(d)) : [];
    const entry: ManifestSkill = {
      id: skill.id,
      slug: skill.slug,
      name: skill.name,
      description: skill.description,
      price,
      // A usage-priced skill's price is the most a call costs: the texts written for it say "up to".
      ...(skill.pricing === "usage" ? { pricing: "usage" as const } : {}),
      currency: skill.currency || "USD",
      inputSchema,
      ...(skill.quality !== undefined ? { quality: skill.quality } : {}),
      agents: agents.map((a) => a.id),
      addedAt: new Date().toISOString(),
      files: written.files,
      dirs: [...new Set([...written.dirs, ...keptDirs])].sort((a, b) => b.split("/").length - a.split("/").length),
    };
    manifest.skills = [...manifest.skills.filter((s) => s !== previous), entry];
    writeManifest(manifestFile, manifest);
    added.push({ id: entry.id, slug: entry.slug, name: entry.name, price, agents: entry.agents, paths });
  }
  return { added };
}

export interface ListedSkill {
  slug: string;
  name: string;
  price: number;
  agents: string[];
  files: string[];
}

/** `list`: the manifest's skills. */
export function listSkills(manifestFile: string): ListedSkill[] {
  return readManifest(manifestFile).skills.map((s) => ({
    slug: s.slug,
    name: s.name,
    price: s.price,
    agents: s.agents,
    files: s.files.map((f) => f.path),
  }));
}

export interface RemoveResult {
  removed: Array<{ slug: string } & Removed>;
}

/**
 * `remove`: deletes exactly what `add` wrote for each skill and drops it from the manifest.
 * Every slug is checked first, so an unknown one removes nothing.
 */
export function removeSkills(manifestFile: string, refs: string[]): RemoveResult {
  const manifest = readManifest(manifestFile);
  const unknown = refs.filter((ref) => !findSkill(manifest, ref));
  if (unknown.length > 0) {
    throw new CliError(
      `Not in ${path.basename(manifestFile)}: ${unknown.join(", ")}. See skill-gateway list.`,
      EXIT.notFound,
      "not_in_manifest",
    );
  }
  const projectDir = projectDirOf(manifestFile);
  const removed: RemoveResult["removed"] = [];
  for (const ref of refs) {
    const skill = findSkill(manifest, ref);
    if (!skill) continue; // the same slug given twice
    const result = removeWritten(projectDir, skill);
    removed.push({ slug: skill.slug, ...result });
    manifest.skills = manifest.skills.filter((s) => s !== skill);
    // A folder this skill's add created but that still holds another skill's files passes to
    // that skill, so the last one removed takes it away (`.agents/skills`, `.agents`).
    for (const dir of skill.dirs.filter((d) => !result.removedDirs.includes(d))) {
      const heir = manifest.skills.find((s) => s.files.some((f) => f.path.startsWith(`${dir}/`)));
      if (heir && !heir.dirs.includes(dir)) heir.dirs = [...heir.dirs, dir].sort((a, b) => b.split("/").length - a.split("/").length);
    }
    writeManifest(manifestFile, manifest);
  }
  return { removed };
}

/** `search`: marketplace skills whose slug, name or description holds every word (all skills without words). */
export async function searchMarketplace(client: SkillGateway, words: string[]): Promise<Skill[]> {
  const needles = words.flatMap((w) => w.toLowerCase().split(/\s+/)).filter(Boolean);
  const skills = await client.skills.list();
  return skills.filter((s) => {
    const haystack = `${s.slug} ${s.name} ${s.description}`.toLowerCase();
    return needles.every((n) => haystack.includes(n));
  });
}

/** Parses a call's input: a JSON object, or a usage error naming what is wrong. */
export function parseInput(text: string | undefined): object {
  if (text === undefined || text.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new CliError(`The input is not valid JSON: ${(error as Error).message}`, EXIT.usage, "invalid_input_json");
  }
  if (!isObject(value)) throw new CliError('The input must be a JSON object, like \'{"text": "hi"}\'.', EXIT.usage, "invalid_input_json");
  return value;
}

/** Reads all of stdin (for `call` without --input). */
export async function readStdin(stream: NodeJS.ReadableStream = process.stdin): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks).toString("utf8");
}

/** The text line for a skill file's location, relative to the working directory when shorter. */
export function displayPath(projectDir: string, rel: string, cwd: string): string {
  const shown = path.relative(cwd, path.join(projectDir, rel));
  return shown.startsWith("..") ? path.join(projectDir, rel) : shown;
}

/** A cost line for stderr. */
export function costLine(cost: number, callId: string | undefined): string {
  return `cost: ${formatUsd(cost)} USD${callId ? ` (call ${callId})` : ""}`;
}

/** True when the manifest exists (for list's empty message). */
export function manifestExists(manifestFile: string): boolean {
  return fs.existsSync(manifestFile);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
