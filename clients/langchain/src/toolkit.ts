import type { SkillGateway } from "@skill-gateway/sdk";
import { DEFAULT_MANIFEST, readPinnedSkills } from "./manifest";
import { type SkillTool, type SkillToolOptions, skillTool, toolFromSpec } from "./tool";

export interface SkillToolkitOptions extends SkillToolOptions {
  /**
   * The CLI's manifest: its skills, with the schema and price pinned when they were added (no
   * network). Default `./skill-gateway.json` when `slugs` is not given.
   */
  manifest?: string;
  /** These skills of the marketplace, fetched now (their current schema and price). */
  slugs?: string[];
}

/** The tools for the manifest's skills, or for `slugs`: one tool per skill, in order. */
export async function skillToolkit(client: SkillGateway, options: SkillToolkitOptions = {}): Promise<SkillTool[]> {
  if (options.manifest !== undefined && options.slugs !== undefined)
    throw new TypeError("skillToolkit: pass either manifest or slugs, not both.");
  const tools: SkillToolOptions = { costNote: options.costNote };
  if (options.slugs !== undefined) return Promise.all(options.slugs.map((slug) => skillTool(client, slug, tools)));
  return readPinnedSkills(options.manifest ?? DEFAULT_MANIFEST).map((skill) => toolFromSpec(client, skill, tools));
}
