export {
  skillTool,
  toolFromSpec,
  describe,
  schemaOf,
  formatUsd,
  OPEN_SCHEMA,
  SMALLEST_CAP_USD,
  type SkillSpec,
  type SkillTool,
  type SkillToolArtifact,
  type SkillToolOptions,
} from "./tool";
export { skillToolkit, type SkillToolkitOptions } from "./toolkit";
export { failureOf, type SkillToolFailure } from "./errors";
export { readPinnedSkills, DEFAULT_MANIFEST, type PinnedSkill } from "./manifest";
