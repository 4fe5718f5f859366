export {
  skillTool,
  toolFromSpec,
  describe,
  schemaOf,
  formatUsd,
  OPEN_SCHEMA,
  type SkillSpec,
  type SkillTool,
  type SkillToolArtifact,
  type SkillToolOptions,
} from "./tool";
export { skillToolkit, type SkillToolkitOptions } from "./toolkit";
export { failureOf, type SkillToolFailure } from "./errors";
export { readPinnedSkills, DEFAULT_MANIFEST, type PinnedSkill } from "./manifest";
/** The smallest amount a price cap can name: a free skill's tools are held to it (the SDK's, shared with the CLI). */
export { SMALLEST_CAP_USD } from "@skill-gateway/sdk";
