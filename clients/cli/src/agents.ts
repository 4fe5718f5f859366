/**
 * Where each agent reads project skills: an Agent Skills folder `<dir>/<slug>/SKILL.md`,
 * relative to the project (the manifest's folder). Only agents whose own documentation
 * names the folder are listed; the README cites each source.
 */
export interface AgentLocation {
  /** The `--agent` value. */
  id: string;
  /** Who reads it. */
  label: string;
  /** The skills folder, relative to the project, with forward slashes. */
  skillsDir: string;
  /** The documentation that names the folder. */
  docsUrl: string;
}

/** The default: the cross-agent folder of the Agent Skills standard, read by Codex, Cursor and OpenCode. */
export const DEFAULT_AGENT = "agents";

export const AGENTS: readonly AgentLocation[] = [
  {
    id: "agents",
    label: "the Agent Skills folder: Codex, Cursor, OpenCode",
    skillsDir: ".agents/skills",
    docsUrl: "https://developers.openai.com/codex/skills",
  },
  { id: "claude", label: "Claude Code", skillsDir: ".claude/skills", docsUrl: "https://code.claude.com/docs/en/skills" },
  { id: "cursor", label: "Cursor", skillsDir: ".cursor/skills", docsUrl: "https://cursor.com/docs/skills" },
  { id: "codex", label: "OpenAI Codex", skillsDir: ".agents/skills", docsUrl: "https://developers.openai.com/codex/skills" },
  { id: "opencode", label: "OpenCode", skillsDir: ".opencode/skills", docsUrl: "https://opencode.ai/docs/skills" },
];

/** The location of an agent by its `--agent` id, or undefined when it is not one we know. */
export function agentLocation(id: string): AgentLocation | undefined {
  return AGENTS.find((agent) => agent.id === id);
}
