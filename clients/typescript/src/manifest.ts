import type { SkillQuality } from "./types";

/**
 * `skill-gateway.json`, the manifest of an agent's pinned skills: written by the CLI (`skill-gateway add`), read by
 * the CLI, its stdio MCP server and LangChain's `skillToolkit`. This is its one reader, so that a file one of them
 * accepts is never refused (or read differently) by another.
 */
export const MANIFEST_FILE = "skill-gateway.json";
export const MANIFEST_VERSION = 1;

export interface WrittenFile {
  /** Relative to the manifest's folder, with forward slashes. */
  path: string;
  /** SHA-256 of the content written: `remove` keeps a file someone has since edited. */
  sha256: string;
}

export interface ManifestSkill {
  id: string;
  slug: string;
  name: string;
  description: string;
  /** What a call costs the caller, in USD, when the skill was added; for a usage-priced skill, the most a call costs. */
  price: number;
  /** `usage` for a skill that charges what each call used, up to `price`; absent (fixed) in manifests written before. */
  pricing?: "fixed" | "usage";
  currency: string;
  /** The skill's JSON Schema for its input, or null when it takes any object. */
  inputSchema: object | null;
  /** What the gateway measured of the skill this week when it was added (GET /v1/skills's `quality`); absent before. */
  quality?: SkillQuality | null;
  /** The agents (`--agent` ids) it was written for: one SKILL.md in each one's folder, all listed in `files`. */
  agents: string[];
  addedAt: string;
  files: WrittenFile[];
  /** Folders `add` created (they did not exist before), deepest first. */
  dirs: string[];
}

export interface Manifest {
  version: typeof MANIFEST_VERSION;
  skills: ManifestSkill[];
}

/** Why a manifest could not be read: `manifest_missing` (no such file), `manifest_unreadable`, `manifest_invalid`. */
export type ManifestErrorCode = "manifest_missing" | "manifest_unreadable" | "manifest_invalid";

/** A manifest that is missing, unreadable or not a manifest; the message names the file and what is wrong. */
export class ManifestError extends Error {
  override readonly name = "ManifestError";
  constructor(
    message: string,
    readonly code: ManifestErrorCode,
    readonly file: string,
  ) {
    super(message);
  }
}

/** Whether `error` is a ManifestError, by its name and code (two copies of the SDK in one install still match). */
export function isManifestError(error: unknown): error is ManifestError {
  return (
    error instanceof Error &&
    error.name === "ManifestError" &&
    ["manifest_missing", "manifest_unreadable", "manifest_invalid"].includes((error as { code?: unknown }).code as string)
  );
}

export function emptyManifest(): Manifest {
  return { version: MANIFEST_VERSION, skills: [] };
}

/** The manifest in `text` (the content of `file`, named in errors); throws ManifestError when it is not one. */
export function parseManifest(text: string, file: string): Manifest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ManifestError(`The manifest ${file} is not valid JSON.`, "manifest_invalid", file);
  }
  const problem = manifestProblem(withAgentsList(parsed));
  if (problem) throw new ManifestError(`The manifest ${file} is invalid: ${problem}.`, "manifest_invalid", file);
  return parsed as Manifest;
}

/** The minimum of node:fs this needs; the SDK has no Node types (it runs in browsers too, where this is not called). */
interface ReadFileSync {
  readFileSync(file: string, encoding: "utf8"): string;
}
declare const require: (id: string) => unknown;

/**
 * Reads and checks the manifest at `file` (Node only). A missing file throws ManifestError `manifest_missing`: the CLI
 * reads it as an empty manifest, LangChain's toolkit as a mistake.
 */
export function readManifest(file: string): Manifest {
  let text: string;
  try {
    text = (require("node:fs") as ReadFileSync).readFileSync(file, "utf8");
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") throw new ManifestError(`No manifest at ${file}.`, "manifest_missing", file);
    throw new ManifestError(`Cannot read the manifest ${file}: ${(error as Error).message}`, "manifest_unreadable", file);
  }
  return parseManifest(text, file);
}

/**
 * A manifest written before skills could be written for several agents names one per skill, as `agent`: read as
 * `agents: [agent]`. Anything else is returned as it is.
 */
function withAgentsList(value: unknown): unknown {
  if (!isObject(value) || !Array.isArray(value.skills)) return value;
  for (const skill of value.skills) {
    if (isObject(skill) && typeof skill.agent === "string" && skill.agents === undefined) {
      skill.agents = [skill.agent];
      delete skill.agent;
    }
  }
  return value;
}

const QUALITY_FIELDS = ["calls_7d", "success_rate_7d", "p50_ms_7d", "p95_ms_7d"];

/** Why a parsed value is not a manifest, or null when it is one. */
export function manifestProblem(value: unknown): string | null {
  if (!isObject(value)) return "not a JSON object";
  if (value.version !== MANIFEST_VERSION) return `version is ${JSON.stringify(value.version)}, this client reads ${MANIFEST_VERSION}`;
  if (!Array.isArray(value.skills)) return "skills is not an array";
  const seen = new Set<string>();
  for (const [i, skill] of value.skills.entries()) {
    if (!isObject(skill)) return `skills[${i}] is not an object`;
    for (const key of ["id", "slug", "name", "description", "currency", "addedAt"]) {
      if (typeof skill[key] !== "string") return `skills[${i}].${key} is not a string`;
    }
    if (!Array.isArray(skill.agents) || !skill.agents.every((a) => typeof a === "string"))
      return `skills[${i}].agents is not a list of agents`;
    if (typeof skill.price !== "number" || !Number.isFinite(skill.price)) return `skills[${i}].price is not a number`;
    if (skill.pricing !== undefined && skill.pricing !== "fixed" && skill.pricing !== "usage")
      return `skills[${i}].pricing is not "fixed" or "usage"`;
    if (skill.inputSchema !== null && !isObject(skill.inputSchema)) return `skills[${i}].inputSchema is not an object or null`;
    const quality = skill.quality;
    if (quality !== undefined && quality !== null && !(isObject(quality) && QUALITY_FIELDS.every((k) => typeof quality[k] === "number")))
      return `skills[${i}].quality is not the gateway's quality figures or null`;
    if (!Array.isArray(skill.files) || !skill.files.every((f) => isObject(f) && typeof f.path === "string" && typeof f.sha256 === "string"))
      return `skills[${i}].files is not a list of {path, sha256}`;
    if (!Array.isArray(skill.dirs) || !skill.dirs.every((d) => typeof d === "string")) return `skills[${i}].dirs is not a list of paths`;
    if (seen.has(skill.slug as string)) return `skill ${skill.slug} appears twice`;
    seen.add(skill.slug as string);
  }
  return null;
}

/** The smallest amount a price cap can name (one USDC base unit): the cap of a skill added free. */
export const SMALLEST_CAP_USD = 0.000001;

/**
 * The max_price a pinned skill's calls carry: the price it was added at, so that "pinned" holds; a skill added free
 * is held to SMALLEST_CAP_USD (a cap must be above 0, and no seller can list a skill that cheap).
 */
export function pinnedCap(skill: Pick<ManifestSkill, "price">): number {
  return skill.price > 0 ? skill.price : SMALLEST_CAP_USD;
}

/** The skill with this slug or id, if the manifest has it. */
export function findSkill(manifest: Manifest, slugOrId: string): ManifestSkill | undefined {
  return manifest.skills.find((s) => s.slug === slugOrId || s.id === slugOrId);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
