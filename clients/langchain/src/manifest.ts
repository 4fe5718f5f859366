import fs from "node:fs";

/**
 * The CLI's `skill-gateway.json` (version 1), read-only: what the toolkit needs of each pinned
 * skill. The CLI (clients/cli/src/manifest.ts) owns the format and writes it; this reads the
 * same file without depending on the CLI package.
 */
export const DEFAULT_MANIFEST = "./skill-gateway.json";

export interface PinnedSkill {
  slug: string;
  name: string;
  description: string;
  /** USD per call, as pinned when the skill was added; for a usage-priced skill, the most a call costs. */
  price: number;
  /** `usage` when the CLI pinned a usage-priced skill. */
  pricing?: "fixed" | "usage";
  /** The pinned JSON Schema, or null: any object. */
  inputSchema: object | null;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** The manifest's skills. A missing, unreadable or invalid file throws (a toolkit with no tools is a mistake). */
export function readPinnedSkills(file: string): PinnedSkill[] {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      throw new Error(`No Skill Gateway manifest at ${file}: add skills with \`skill-gateway add <slug>\`, or pass { slugs }.`);
    }
    throw new Error(`Cannot read the manifest ${file}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`The manifest ${file} is not valid JSON.`);
  }
  if (!isObject(parsed) || parsed.version !== 1 || !Array.isArray(parsed.skills)) {
    throw new Error(`The manifest ${file} is not a version 1 skill-gateway.json.`);
  }
  return parsed.skills.map((skill, i) => {
    if (!isObject(skill) || typeof skill.slug !== "string" || typeof skill.name !== "string" || typeof skill.description !== "string") {
      throw new Error(`The manifest ${file} is invalid: skills[${i}] lacks a slug, name or description.`);
    }
    if (typeof skill.price !== "number" || !Number.isFinite(skill.price))
      throw new Error(`The manifest ${file} is invalid: skills[${i}].price is not a number.`);
    if (skill.inputSchema !== null && !isObject(skill.inputSchema))
      throw new Error(`The manifest ${file} is invalid: skills[${i}].inputSchema is not an object or null.`);
    return {
      slug: skill.slug,
      name: skill.name,
      description: skill.description,
      price: skill.price,
      ...(skill.pricing === "usage" ? { pricing: "usage" as const } : {}),
      inputSchema: skill.inputSchema,
    };
  });
}
