import fs from "node:fs";
import path from "node:path";
import { CliError, EXIT } from "./errors";

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
  /** The folder whose presence in a project says the agent is used there. */
  marker: string;
  /** The documentation that names the folder. */
  docsUrl: string;
}

export const AGENTS: readonly AgentLocation[] = [
  {
    id: "agents",
    label: "the Agent Skills folder: Codex, Cursor, OpenCode",
    skillsDir: ".agents/skills",
    marker: ".agents",
    docsUrl: "https://developers.openai.com/codex/skills",
  },
  { id: "claude", label: "Claude Code", skillsDir: ".claude/skills", marker: ".claude", docsUrl: "https://code.claude.com/docs/en/skills" },
  { id: "cursor", label: "Cursor", skillsDir: ".cursor/skills", marker: ".cursor", docsUrl: "https://cursor.com/docs/skills" },
  {
    id: "codex",
    label: "OpenAI Codex",
    skillsDir: ".agents/skills",
    marker: ".codex",
    docsUrl: "https://developers.openai.com/codex/skills",
  },
  { id: "opencode", label: "OpenCode", skillsDir: ".opencode/skills", marker: ".opencode", docsUrl: "https://opencode.ai/docs/skills" },
];

/** `--agent all`: every agent above. */
export const ALL_AGENTS = "all";

/**
 * The agents written for when `--agent` is not given and the project shows none: the cross-agent folder (Codex,
 * Cursor, OpenCode) and Claude Code's, which reads only its own.
 */
export const DEFAULT_AGENTS: readonly string[] = ["agents", "claude"];

/** The location of an agent by its `--agent` id, or undefined when it is not one we know. */
export function agentLocation(id: string): AgentLocation | undefined {
  return AGENTS.find((agent) => agent.id === id);
}

/** The agents a project already uses: those whose folder (`.claude/`, `.cursor/`, ...) it has. */
export function detectAgents(projectDir: string): string[] {
  return AGENTS.filter((agent) => {
    try {
      return fs.statSync(path.join(projectDir, agent.marker)).isDirectory();
    } catch {
      return false;
    }
  }).map((agent) => agent.id);
}

/**
 * The agents `add` writes for: those named (`all` for every one), else those the project has, else DEFAULT_AGENTS.
 * An unknown name is a usage error naming the known ones.
 */
export function resolveAgents(named: readonly string[], projectDir: string): AgentLocation[] {
  const ids = named.length > 0 ? named : detectAgents(projectDir);
  const chosen = ids.includes(ALL_AGENTS) ? AGENTS.map((a) => a.id) : ids.length > 0 ? ids : DEFAULT_AGENTS;
  const unknown = chosen.filter((id) => !agentLocation(id));
  if (unknown.length > 0) {
    throw new CliError(
      `Unknown agent ${unknown.map((id) => `"${id}"`).join(", ")}; one of: ${[...AGENTS.map((a) => a.id), ALL_AGENTS].join(", ")}.`,
      EXIT.usage,
      "unknown_agent",
    );
  }
  return [...new Set(chosen)].map((id) => agentLocation(id)!);
}

/** The distinct skills folders of some agents (Codex and `agents` share one), in their order. */
export function skillsDirsOf(agents: readonly AgentLocation[]): string[] {
  return [...new Set(agents.map((a) => a.skillsDir))];
}
