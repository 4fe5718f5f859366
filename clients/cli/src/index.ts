export { AGENTS, ALL_AGENTS, DEFAULT_AGENTS, type AgentLocation, agentLocation, detectAgents, resolveAgents } from "./agents";
export { addSkills, listSkills, removeSkills, searchMarketplace, parseInput } from "./commands";
export { resolveConfig, type CliConfig, type GlobalOptions } from "./config";
export { CliError, EXIT, type ExitCode, exitCodeFor } from "./errors";
export { removeWritten, writeFiles } from "./install";
export {
  MANIFEST_FILE,
  MANIFEST_VERSION,
  type Manifest,
  type ManifestSkill,
  type WrittenFile,
  readManifest,
  writeManifest,
} from "./manifest";
export { callTool, createMcpServer, runMcpStdio, toolOf } from "./mcp";
export { renderSkillMd, formatUsd } from "./skill-md";
export { run, buildProgram, type CliIo } from "./cli";
export { type McpSource, checkKey, describeSource, parseSkillList, pinnedFromMarketplace, skillsSource } from "./mcp-source";
export { MCP_CLIENTS, type McpClientId, claudeDesktopConfigFile, installMcpConfig, planMcpInstall } from "./mcp-install";
export { CLI_VERSION } from "./version";
