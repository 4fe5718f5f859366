// In a clone the SDK is not built: its source stands in (clients/typescript/source.cjs).
import "../../typescript/source.cjs";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { expect } from "chai";
import { type TestStack, startStack } from "../../../test/helpers/gateway";
import { resolveConfig } from "../src/config";
import { CliError, EXIT } from "../src/errors";
import { claudeDesktopConfigFile, installMcpConfig, planMcpInstall } from "../src/mcp-install";
import { describeSource, parseSkillList } from "../src/mcp-source";
import { buildCli } from "./built-cli";

const UPPERCASE_SCHEMA = { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false };
const KEY = "atom_test_not_a_real_key_0123456789";

/** The error a function throws, or a failure when it returns. */
function thrown(fn: () => unknown): CliError {
  try {
    fn();
  } catch (error) {
    return error as CliError;
  }
  throw new Error("expected a throw");
}

describe("skill-gateway mcp: what it serves, said at start", function () {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sg-mcp-unit-"));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("names the missing manifest's absolute path, the folder it started in, and the three ways out", function () {
    const file = path.join(dir, "skill-gateway.json");
    expect(describeSource({ kind: "manifest", file }, "/somewhere/else")).to.equal(
      `No manifest at ${file} (the server was started in /somewhere/else), so there are no tools: add skills with \`skill-gateway add <slug>\` beside it, pass --manifest /absolute/path/to/skill-gateway.json, or name skills with --skills <slug,...>.`,
    );
  });

  it("says an empty manifest has no skills, and names a full one's skills with their prices", function () {
    const file = path.join(dir, "skill-gateway.json");
    fs.writeFileSync(file, JSON.stringify({ version: 1, skills: [] }));
    expect(describeSource({ kind: "manifest", file }, dir)).to.match(/^The manifest .* has no skills, so there are no tools: /);
    const skill = {
      id: "1",
      slug: "echo",
      name: "Echo",
      description: "",
      price: 0.001,
      currency: "USD",
      inputSchema: null,
      agent: "claude",
      addedAt: "2026-01-01T00:00:00Z",
      files: [],
      dirs: [],
    };
    fs.writeFileSync(file, JSON.stringify({ version: 1, skills: [skill] }));
    expect(describeSource({ kind: "manifest", file }, dir)).to.equal(`Serving 1 skill from the manifest ${file}: echo ($0.001/call).`);
  });

  it("a broken manifest stops the start with exit 10", function () {
    const file = path.join(dir, "skill-gateway.json");
    fs.writeFileSync(file, "{");
    expect(thrown(() => describeSource({ kind: "manifest", file }, dir)).exitCode).to.equal(EXIT.manifest);
  });

  it("--skills takes comma-separated slugs, each once, and refuses an empty one", function () {
    expect(parseSkillList("echo, uppercase,echo")).to.deep.equal(["echo", "uppercase"]);
    const error = thrown(() => parseSkillList("echo,,uppercase"));
    expect([error.exitCode, error.code]).to.deep.equal([EXIT.usage, "invalid_option"]);
  });
});

describe("skill-gateway mcp install", function () {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sg-mcp-install-"));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const config = (env: NodeJS.ProcessEnv = { SKILL_GATEWAY_API_KEY: KEY }) => resolveConfig({}, env, dir);
  const paths = { node: "/usr/bin/node", launcher: "/opt/sg/bin/skill-gateway.cjs", home: "/home/u" };

  it("claude-code: the project's .mcp.json, absolute paths, the key as ${SKILL_GATEWAY_API_KEY}, never its value", function () {
    const result = installMcpConfig({ client: "claude-code", config: config(), env: {}, ...paths });
    expect(result.file).to.equal(path.join(dir, ".mcp.json"));
    const written = fs.readFileSync(result.file, "utf8");
    expect(written).to.not.include(KEY);
    expect(JSON.parse(written)).to.deep.equal({
      mcpServers: {
        "skill-gateway": {
          command: "/usr/bin/node",
          args: ["/opt/sg/bin/skill-gateway.cjs", "mcp", "--manifest", path.join(dir, "skill-gateway.json")],
          env: { SKILL_GATEWAY_API_KEY: "${SKILL_GATEWAY_API_KEY}" },
        },
      },
    });
  });

  it("cursor: .cursor/mcp.json with ${env:SKILL_GATEWAY_API_KEY}, keeping the servers already there, with --skills", function () {
    const file = path.join(dir, ".cursor", "mcp.json");
    fs.mkdirSync(path.dirname(file));
    fs.writeFileSync(file, JSON.stringify({ mcpServers: { other: { command: "x" } }, extra: 1 }));
    const withUrl = resolveConfig({ url: "https://gw.example" }, { SKILL_GATEWAY_API_KEY: KEY }, dir);
    installMcpConfig({ client: "cursor", config: withUrl, env: {}, skills: ["echo", "uppercase"], ...paths });
    const written = fs.readFileSync(file, "utf8");
    expect(written).to.not.include(KEY);
    expect(JSON.parse(written)).to.deep.equal({
      mcpServers: {
        other: { command: "x" },
        "skill-gateway": {
          command: "/usr/bin/node",
          args: ["/opt/sg/bin/skill-gateway.cjs", "mcp", "--skills", "echo,uppercase"],
          env: { SKILL_GATEWAY_API_KEY: "${env:SKILL_GATEWAY_API_KEY}", SKILL_GATEWAY_URL: "https://gw.example" },
        },
      },
      extra: 1,
    });
  });

  it("claude-desktop: the user's file (by platform) holds the key from the environment, readable by the user only", function () {
    expect(claudeDesktopConfigFile("darwin", {}, "/Users/u")).to.equal(
      "/Users/u/Library/Application Support/Claude/claude_desktop_config.json",
    );
    expect(claudeDesktopConfigFile("linux", {}, "/home/u")).to.equal("/home/u/.config/Claude/claude_desktop_config.json");
    expect(claudeDesktopConfigFile("linux", { XDG_CONFIG_HOME: "/xdg" }, "/home/u")).to.equal("/xdg/Claude/claude_desktop_config.json");
    expect(planMcpInstall({ client: "claude-desktop", config: config(), env: {}, platform: "linux", ...paths }).file).to.equal(
      "/home/u/.config/Claude/claude_desktop_config.json",
    );

    const file = path.join(dir, "desktop", "claude_desktop_config.json");
    installMcpConfig({ client: "claude-desktop", config: config(), env: {}, configFile: file, ...paths });
    expect(JSON.parse(fs.readFileSync(file, "utf8")).mcpServers["skill-gateway"].env).to.deep.equal({ SKILL_GATEWAY_API_KEY: KEY });
    expect(fs.statSync(file).mode & 0o777).to.equal(0o600);
  });

  it("claude-desktop without a key in the environment exits 4, writing nothing", function () {
    const file = path.join(dir, "claude_desktop_config.json");
    const error = thrown(() => installMcpConfig({ client: "claude-desktop", config: config({}), env: {}, configFile: file, ...paths }));
    expect([error.exitCode, error.code]).to.deep.equal([EXIT.auth, "missing_api_key"]);
    expect(error.message).to.include("SKILL_GATEWAY_API_KEY");
    expect(fs.existsSync(file)).to.equal(false);
  });

  it("refuses to overwrite a configuration that is not a JSON object (exit 10), leaving it as it was", function () {
    const file = path.join(dir, ".mcp.json");
    fs.writeFileSync(file, "{ not json");
    const error = thrown(() => installMcpConfig({ client: "claude-code", config: config(), env: {}, ...paths }));
    expect([error.exitCode, error.code]).to.deep.equal([EXIT.manifest, "config_invalid"]);
    expect(fs.readFileSync(file, "utf8")).to.equal("{ not json");
  });
});

describe("skill-gateway mcp against a real gateway", function () {
  let stack: TestStack;
  let built: { launcher: string; dir: string };
  let dir: string;

  before(async function () {
    [built, stack] = await Promise.all([buildCli(), startStack()]);
    await stack.addSkill("uppercase", "/echo", { priceMicros: 2_000n, inputSchema: UPPERCASE_SCHEMA });
  });
  after(async function () {
    await stack?.close();
    if (built) fs.rmSync(built.dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sg-mcp-e2e-"));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const env = (key: string) => ({ ...(process.env as Record<string, string>), SKILL_GATEWAY_URL: stack.url, SKILL_GATEWAY_API_KEY: key });

  /** Connects the official MCP client to `command args` and returns it with what the server wrote on stderr. */
  async function connect(command: string, args: string[], cwd: string, environment: Record<string, string>) {
    const transport = new StdioClientTransport({ command, args, cwd, env: environment, stderr: "pipe" });
    const log = { text: "" };
    transport.stderr?.on("data", (chunk: Buffer) => (log.text += chunk.toString()));
    const client = new Client({ name: "mcp-start-test", version: "0.0.0" });
    await client.connect(transport);
    return { client, log };
  }

  it("started where there is no manifest, says so on stderr and in its instructions instead of serving nothing silently", async function () {
    const { client, log } = await connect(process.execPath, [built.launcher, "mcp"], dir, env(stack.key));
    try {
      expect((await client.listTools()).tools).to.deep.equal([]);
      const missing = `No manifest at ${fs.realpathSync(dir)}/skill-gateway.json`;
      expect(client.getInstructions()).to.include(missing);
      expect(log.text.split("\n")).to.include.members([
        `skill-gateway mcp: ${missing} (the server was started in ${fs.realpathSync(dir)}), so there are no tools: add skills with \`skill-gateway add <slug>\` beside it, pass --manifest /absolute/path/to/skill-gateway.json, or name skills with --skills <slug,...>.`,
      ]);
      expect(log.text).to.match(/^skill-gateway mcp: API key atom_\w+… accepted by http:\/\/127\.0\.0\.1:\d+: \$10 available\.$/m);
    } finally {
      await client.close();
    }
  });

  it("--skills echo,uppercase serves them without a manifest, at their current prices", async function () {
    const { client, log } = await connect(process.execPath, [built.launcher, "mcp", "--skills", "echo,uppercase"], dir, env(stack.key));
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => [t.name, t.inputSchema])).to.deep.equal([
        ["echo", { type: "object" }],
        ["uppercase", UPPERCASE_SCHEMA],
      ]);
      const before = await stack.available();
      const result = await client.callTool({ name: "uppercase", arguments: { text: "hi" } });
      expect((result.structuredContent as { data: unknown }).data).to.deep.equal({ text: "hi" });
      expect(before - (await stack.available())).to.equal(2_000n);
      expect(log.text).to.include("skill-gateway mcp: Serving 2 skills named by --skills: echo ($0.001/call), uppercase ($0.002/call);");
      expect(client.getInstructions()).to.include("Serving 2 skills named by --skills");
      expect(fs.readdirSync(dir)).to.deep.equal([]);
    } finally {
      await client.close();
    }
  });

  it("a key the gateway refuses stops the start with one line and exit 4; an unknown --skills slug with exit 3", async function () {
    const run = (args: string[], key: string) =>
      new Promise<{ code: number; stderr: string }>((resolve) => {
        const child = execFile(process.execPath, [built.launcher, ...args], { cwd: dir, env: env(key) }, (error, _stdout, stderr) =>
          resolve({ code: error ? Number((error as { code?: number }).code) : 0, stderr }),
        );
        child.stdin?.end();
      });
    const refused = await run(["mcp"], "atom_not_a_key_of_this_gateway_000000");
    expect(refused.code).to.equal(EXIT.auth);
    expect(refused.stderr.trimEnd().split("\n")).to.have.length(1);
    expect(refused.stderr).to.match(
      /^skill-gateway: The gateway at http:\/\/127\.0\.0\.1:\d+ refused the API key: .+ Set SKILL_GATEWAY_API_KEY/,
    );

    const unknown = await run(["mcp", "--skills", "echo,nope"], stack.key);
    expect(unknown.code, unknown.stderr).to.equal(EXIT.notFound);
  });

  it("mcp install --client claude-code writes a .mcp.json whose server, started as Claude Code would, serves the skills", async function () {
    const install = await new Promise<{ code: number; stdout: string }>((resolve) => {
      execFile(
        process.execPath,
        [built.launcher, "mcp", "install", "--client", "claude-code", "--skills", "uppercase"],
        { cwd: dir, env: env(stack.key) },
        (error, stdout) => resolve({ code: error ? 1 : 0, stdout }),
      );
    });
    expect(install.code).to.equal(0);
    expect(install.stdout).to.include(`wrote ${fs.realpathSync(dir)}/.mcp.json`);
    const written = fs.readFileSync(path.join(dir, ".mcp.json"), "utf8");
    expect(written).to.not.include(stack.key);
    const server = JSON.parse(written).mcpServers["skill-gateway"] as { command: string; args: string[]; env: Record<string, string> };
    expect(path.isAbsolute(server.command) && path.isAbsolute(server.args[0])).to.equal(true);
    // Claude Code expands ${VAR} in env from its own environment, and starts the server wherever it likes.
    const expanded = Object.fromEntries(
      Object.entries(server.env).map(([k, v]) => [
        k,
        v.replace(/\$\{(\w+)\}/g, (_, name: string) => (env(stack.key) as Record<string, string>)[name]),
      ]),
    );
    const { client } = await connect(server.command, server.args, os.tmpdir(), { ...(process.env as Record<string, string>), ...expanded });
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).to.deep.equal(["uppercase"]);
    } finally {
      await client.close();
    }
  });
});
