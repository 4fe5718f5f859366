import { isManifestError, readManifest } from "@skill-gateway/sdk";

/**
 * What the toolkit needs of each skill the CLI pinned in `skill-gateway.json`, read by the SDK's manifest reader (the
 * one the CLI uses: a manifest one accepts, the other reads the same).
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

/** The manifest's skills. A missing, unreadable or invalid file throws (a toolkit with no tools is a mistake). */
export function readPinnedSkills(file: string): PinnedSkill[] {
  try {
    return readManifest(file).skills.map((skill) => ({
      slug: skill.slug,
      name: skill.name,
      description: skill.description,
      price: skill.price,
      ...(skill.pricing === "usage" ? { pricing: "usage" as const } : {}),
      inputSchema: skill.inputSchema,
    }));
  } catch (error) {
    if (isManifestError(error) && error.code === "manifest_missing") {
      throw new Error(`No Skill Gateway manifest at ${file}: add skills with \`skill-gateway add <slug>\`, or pass { slugs }.`);
    }
    throw error;
  }
}
