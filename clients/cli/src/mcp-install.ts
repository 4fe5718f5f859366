import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { type Command, Option } from "commander";
import type { CliIo } from "./cli";
import type { CliConfig } from "./config";
import { CliError, EXIT } from "./errors";
import { projectDirOf } from "./manifest";
import { parseSkillList } from "./mcp-source";

/**
 * `skill-gateway mcp install --client <client>`: writes the MCP client's configuration for this server, with
 * absolute paths (the node binary, this package's launcher, the manifest), so that it works from whatever folder the
 * client starts it in, and with the key taken from the environment:
 *
 * - claude-code: the project's `.mcp.json` (committed, shared with the team), the key as `${SKILL_GATEWAY_API_KEY}`,
 *   which Claude Code expands from its own environment when it starts the server;
 * - cursor: the project's `.cursor/mcp.json` (committed as well), the key as `${env:SKILL_GATEWAY_API_KEY}`, Cursor's
 *   interpolation of its environment;
 * - claude-desktop: the user's `claude_desktop_config.json` (outside any project). Claude Desktop neither expands
 *   variables nor starts with the shell's environment, so the key's value is written there, in a file only the user
 *   may read (mode 600).
 *
 * A literal key is never written into a file inside the project.
 */

export const MCP_CLIENTS = ["claude-desktop", "claude-code", "cursor"] as const;
export type McpClientId = (typeof MCP_CLIENTS)[number];
export const SERVER_KEY = "skill-gateway";

export interface McpServerEntry {
  command: string;
  args: string[];
  env: Record<string, string>;
}

export interface McpInstallResult {
  client: McpClientId;
  file: string;
  entry: McpServerEntry;
  /** How the server gets the key, for the user. */
  keyNote: string;
}

/** Where Claude Desktop keeps its configuration on this platform. */
export function claudeDesktopConfigFile(platform: NodeJS.Platform, env: NodeJS.ProcessEnv, home: string): string {
  if (platform === "darwin") return path.join(home, "Library", "Application Support", "Claude", "claude_desktop_config.json");
  if (platform === "win32") return path.join(env.APPDATA || path.join(home, "AppData", "Roaming"), "Claude", "claude_desktop_config.json");
  return path.join(env.XDG_CONFIG_HOME || path.join(home, ".config"), "Claude", "claude_desktop_config.json");
}

/** The launcher of this package (bin/skill-gateway.cjs), absolute and with links resolved. */
export function launcherPath(): string {
  return fs.realpathSync(path.join(__dirname, "..", "bin", "skill-gateway.cjs"));
}

export interface McpInstallOptions {
  client: McpClientId;
  config: CliConfig;
  env: NodeJS.ProcessEnv;
  /** --skills: serve these instead of the manifest. */
  skills?: string[];
  /** --config: the file to write instead of the client's usual one. */
  configFile?: string;
  /** Defaults: process.execPath, launcherPath(), process.platform, os.homedir(). */
  node?: string;
  launcher?: string;
  platform?: NodeJS.Platform;
  home?: string;
}

/** The configuration entry and the file it goes to, without writing anything. */
export function planMcpInstall(options: McpInstallOptions): McpInstallResult {
  const { client, config } = options;
  const projectDir = projectDirOf(config.manifestFile);
  const args = [
    options.launcher ?? launcherPath(),
    "mcp",
    ...(options.skills ? ["--skills", options.skills.join(",")] : ["--manifest", config.manifestFile]),
  ];
  const env: Record<string, string> = {};
  let file: string;
  let keyNote: string;
  if (client === "claude-desktop") {
    if (config.apiKey === undefined) {
      throw new CliError(
        "No API key: set SKILL_GATEWAY_API_KEY (or pass --api-key). Claude Desktop does not see your shell's environment, so its configuration must hold the key.",
        EXIT.auth,
        "missing_api_key",
      );
    }
    env.SKILL_GATEWAY_API_KEY = config.apiKey;
    file = options.configFile ?? claudeDesktopConfigFile(options.platform ?? process.platform, options.env, options.home ?? os.homedir());
    keyNote = "the key's value is in that file (outside the project, readable by you only)";
  } else {
    env.SKILL_GATEWAY_API_KEY = client === "claude-code" ? "${SKILL_GATEWAY_API_KEY}" : "${env:SKILL_GATEWAY_API_KEY}";
    file = options.configFile ?? path.join(projectDir, client === "claude-code" ? ".mcp.json" : path.join(".cursor", "mcp.json"));
    const app = client === "claude-code" ? "claude" : "Cursor";
    keyNote = `the file names the variable, not the key: set SKILL_GATEWAY_API_KEY in the environment ${app} starts in`;
  }
  if (config.baseUrl !== undefined) env.SKILL_GATEWAY_URL = config.baseUrl;
  return { client, file: path.resolve(file), entry: { command: options.node ?? process.execPath, args, env }, keyNote };
}

/** Writes the entry into the client's file, keeping every other server and setting in it. */
export function installMcpConfig(options: McpInstallOptions): McpInstallResult {
  const plan = planMcpInstall(options);
  let existing: Record<string, unknown> = {};
  if (fs.existsSync(plan.file)) {
    try {
      const parsed = JSON.parse(fs.readFileSync(plan.file, "utf8")) as unknown;
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not a JSON object");
      existing = parsed as Record<string, unknown>;
    } catch (error) {
      throw new CliError(
        `${plan.file} is not a JSON object (${(error as Error).message}); fix or move it, then run this again.`,
        EXIT.manifest,
        "config_invalid",
      );
    }
  }
  const servers = existing.mcpServers;
  if (servers !== undefined && (typeof servers !== "object" || servers === null || Array.isArray(servers))) {
    throw new CliError(`${plan.file}: "mcpServers" is not an object; fix it, then run this again.`, EXIT.manifest, "config_invalid");
  }
  const next = { ...existing, mcpServers: { ...(servers as Record<string, unknown> | undefined), [SERVER_KEY]: plan.entry } };
  fs.mkdirSync(path.dirname(plan.file), { recursive: true });
  const tmp = `${plan.file}.${randomBytes(4).toString("hex")}.tmp`;
  // The desktop file holds the key: only its owner may read it.
  fs.writeFileSync(tmp, `${JSON.stringify(next, null, 2)}\n`, { mode: plan.client === "claude-desktop" ? 0o600 : 0o644 });
  fs.renameSync(tmp, plan.file);
  return plan;
}

/** Adds `mcp install` under the `mcp` command. */
export function addMcpInstallCommand(mcp: Command, configOf: (cmd: Command) => CliConfig, io: CliIo): void {
  mcp
    .command("install")
    .description("write an MCP client's configuration for this server: absolute paths, and the key from the environment")
    .addOption(new Option("--client <client>", "the MCP client").choices([...MCP_CLIENTS]).makeOptionMandatory())
    .option("--skills <slugs>", "serve these marketplace skills (comma-separated) instead of the manifest's", parseSkillList)
    .option("--config <file>", "write this file instead of the client's usual one")
    .action((options: { client: McpClientId; skills?: string[]; config?: string }, cmd: Command) => {
      const config = configOf(cmd);
      const result = installMcpConfig({
        client: options.client,
        config,
        env: io.env,
        // `mcp` itself takes --skills too, and commander gives it to the first command that names it.
        skills: options.skills ?? cmd.parent?.opts<{ skills?: string[] }>().skills,
        configFile: options.config === undefined ? undefined : path.resolve(io.cwd, options.config),
      });
      if (config.json) {
        const shown = { ...result.entry, env: { ...result.entry.env, SKILL_GATEWAY_API_KEY: "(written)" } };
        io.stdout(`${JSON.stringify({ client: result.client, file: result.file, server: shown }, null, 2)}\n`);
        return;
      }
      io.stdout(
        `wrote ${result.file}: the server "${SERVER_KEY}" runs ${[result.entry.command, ...result.entry.args].join(" ")}\n` +
          `key: ${result.keyNote}. Restart ${options.client} to load it.\n`,
      );
    });
}
