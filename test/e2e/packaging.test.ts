import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { expect } from "chai";
import { type PackedClients, clientsVersion, packClients } from "../../scripts/pack-clients";
import { docSnippet } from "../helpers/doc-snippets";
import { type TestStack, startStack } from "../helpers/gateway";
import { installScratchProject } from "../helpers/scratch-project";

/**
 * The clients as a developer gets them: packed by `npm run pack:clients` (from a clean copy of their sources),
 * installed into a project outside the repository (under os.tmpdir(), with nothing of the repository on Node's
 * resolution path), and run there against a real gateway. The snippets are docs/clients.md's, run as written.
 *
 * Nothing reaches the network: npm installs offline from its cache (test/helpers/scratch-project.ts), every npm
 * and npx run here has `npm_config_offline` set so that any registry request fails instead, pip installs with
 * --no-index, and the gateway and its skill backend are on loopback.
 */

const DOC = path.join(__dirname, "..", "..", "docs", "clients.md");
const PYTHON = "/usr/bin/python3";
const UPPERCASE_SCHEMA = { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false };

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

describe("the clients, packed and installed in a project outside the repository", function () {
  this.timeout(120_000);
  let root: string;
  let app: string;
  let venvPython: string;
  let packed: PackedClients;
  let stack: TestStack;
  let env: NodeJS.ProcessEnv;

  /** Runs a command in the scratch project with the clients' environment. */
  const exec = (file: string, args: string[], options: { input?: string } = {}): Promise<Run> =>
    new Promise((resolve) => {
      const child = execFile(file, args, { cwd: app, env }, (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin?.end(options.input ?? "");
    });
  const writeSnippet = (name: string) => {
    fs.writeFileSync(path.join(app, name), docSnippet(DOC, name));
    return name;
  };

  before(async function () {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "sg-packaging-"));
    app = path.join(root, "app");
    fs.mkdirSync(app);
    const venv = path.join(root, "venv");
    venvPython = path.join(venv, "bin", "python");
    // What does not need the packages starts while they are packed: the gateway, and the virtual environment
    // (Debian's httpx comes from the system's site-packages; the client itself only from the wheel).
    const startedStack = startStack().then((started) => (stack = started));
    const venvMade = promisify(execFile)(PYTHON, ["-m", "venv", "--system-site-packages", venv]);
    // Awaited below; a failure meanwhile must not be an unhandled rejection.
    startedStack.catch(() => {});
    venvMade.catch(() => {});
    packed = await packClients(path.join(root, "packed"));
    await Promise.all([
      startedStack,
      installScratchProject(
        app,
        [
          { tarball: packed.sdk, repoDir: "clients/typescript" },
          { tarball: packed.cli, repoDir: "clients/cli" },
          { tarball: packed.langchain, repoDir: "clients/langchain" },
        ],
        ["@langchain/core"],
      ),
      venvMade.then(() => promisify(execFile)(venvPython, ["-m", "pip", "install", "--quiet", "--no-index", "--no-deps", packed.wheel])),
    ]);
    await stack.addSkill("uppercase", "/echo", { priceMicros: 2_000n, inputSchema: UPPERCASE_SCHEMA });
    env = {};
    for (const [key, value] of Object.entries(process.env)) {
      if (!/^(npm_|NODE_OPTIONS$|TS_NODE_|PYTHONPATH$)/i.test(key)) env[key] = value;
    }
    Object.assign(env, {
      SKILL_GATEWAY_API_KEY: stack.key,
      SKILL_GATEWAY_URL: stack.url,
      npm_config_offline: "true",
      npm_config_update_notifier: "false",
    });
  });
  after(async function () {
    await stack?.close();
    if (root) fs.rmSync(root, { recursive: true, force: true });
  });

  it("packs the npm packages with dist/ (JavaScript and declarations), README and package.json only", async function () {
    const list = async (tarball: string) => (await promisify(execFile)("tar", ["-tzf", tarball])).stdout.trim().split("\n").sort();
    for (const [tarball, extra] of [
      [packed.sdk, []],
      [packed.cli, ["package/bin/skill-gateway.cjs"]],
      [packed.langchain, []],
    ] as const) {
      const files = await list(tarball);
      const unexpected = files.filter(
        (f) => !/^package\/dist\/[\w-]+\.(js|d\.ts)$/.test(f) && !["package/README.md", "package/package.json", ...extra].includes(f),
      );
      expect(unexpected, path.basename(tarball)).to.deep.equal([]);
      expect(files, path.basename(tarball)).to.include.members(["package/dist/index.js", "package/dist/index.d.ts"]);
    }
    expect(path.basename(packed.wheel)).to.equal(`skill_gateway-${packed.version}-py3-none-any.whl`);
    expect(fs.existsSync(packed.sdist), packed.sdist).to.equal(true);
    // Installed for real, from the tarballs: no link back into the repository, and no ts-node to fall back on.
    expect(fs.lstatSync(path.join(app, "node_modules", "@skill-gateway", "cli")).isSymbolicLink()).to.equal(false);
    const tsNode = await exec(process.execPath, ["-e", 'require.resolve("ts-node")']);
    expect(tsNode.code, "ts-node resolvable from the scratch project").to.not.equal(0);
    const version = await exec("npx", ["-y", "@skill-gateway/cli", "--version"]);
    expect(version.stdout, version.stderr).to.equal(`${packed.version}\n`);
  });

  it("the SDK calls a skill (docs/clients.md, sdk.mjs)", async function () {
    const before = await stack.available();
    const run = await exec(process.execPath, [writeSnippet("sdk.mjs")]);
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.equal('{"text":"hi"} 0.002\n');
    expect(before - (await stack.available())).to.equal(2_000n);
  });

  it("the CLI adds, calls and removes a skill through npx -y @skill-gateway/cli (cli.sh)", async function () {
    const before = await stack.available();
    const run = await exec("bash", ["-euo", "pipefail", writeSnippet("cli.sh")]);
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.include("added uppercase ($0.002/call): .claude/skills/uppercase/SKILL.md");
    expect(run.stdout).to.include('"text": "hi"');
    expect(run.stdout).to.include("removed uppercase: .claude/skills/uppercase/SKILL.md");
    expect(run.stderr).to.match(/cost: \$0\.002 USD/);
    expect(before - (await stack.available())).to.equal(2_000n);
    expect(fs.existsSync(path.join(app, ".claude")), ".claude/ left behind").to.equal(false);
    expect(JSON.parse(fs.readFileSync(path.join(app, "skill-gateway.json"), "utf8")).skills).to.deep.equal([]);
  });

  it("the CLI's stdio MCP server, started as its configuration says (mcp.json), serves the skill to the official MCP client", async function () {
    const config = JSON.parse(docSnippet(DOC, "mcp.json")) as { mcpServers: Record<string, { command: string; args: string[] }> };
    const server = config.mcpServers["skill-gateway"];
    const transport = new StdioClientTransport({
      command: server.command,
      args: server.args,
      cwd: app,
      env: env as Record<string, string>,
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const client = new Client({ name: "packaging-test", version: "0.0.0" });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).to.deep.equal(["uppercase"]);
      const before = await stack.available();
      const result = await client.callTool({ name: "uppercase", arguments: { text: "hi" } });
      expect(result.isError, JSON.stringify(result)).to.not.equal(true);
      expect((result.structuredContent as { data: unknown }).data).to.deep.equal({ text: "hi" });
      expect(before - (await stack.available())).to.equal(2_000n);
    } finally {
      await client.close();
    }
    // What it serves and that the key was accepted, said on stderr (an MCP client's log) as it starts.
    expect(stderr).to.match(/skill-gateway mcp: API key atom_\w+… accepted by http:\/\/127\.0\.0\.1:\d+: \$[\d.]+ available\./);
    expect(stderr).to.include("skill-gateway mcp: Serving 1 skill named by --skills: uppercase ($0.002/call)");
  });

  it("LangChain calls a skill as a tool, with one @langchain/core in the project (langchain.mjs)", async function () {
    const cores: string[] = [];
    const walk = (dir: string) => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        if (!entry.isDirectory()) continue;
        const full = path.join(dir, entry.name);
        if (full.endsWith(`${path.sep}@langchain${path.sep}core`)) cores.push(path.relative(app, full));
        walk(full);
      }
    };
    walk(path.join(app, "node_modules"));
    expect(cores).to.deep.equal(["node_modules/@langchain/core"]);

    const before = await stack.available();
    const run = await exec(process.execPath, [writeSnippet("langchain.mjs")]);
    expect(run.code, run.stderr).to.equal(0);
    expect(JSON.parse(run.stdout)).to.deep.equal({ text: "hi" });
    expect(before - (await stack.available())).to.equal(2_000n);
  });

  it("the Python wheel's client calls a skill from a fresh virtual environment (client.py)", async function () {
    const where = await exec(venvPython, ["-c", "import skill_gateway; print(skill_gateway.__file__, skill_gateway.__version__)"]);
    // The wheel's copy, in the environment's site-packages: not the repository's source.
    expect(where.stdout.trim()).to.match(/\/site-packages\/skill_gateway\/__init__\.py \S+$/);
    expect(where.stdout.startsWith(`${path.join(root, "venv")}${path.sep}`), where.stdout).to.equal(true);
    expect(where.stdout.trim().endsWith(` ${packed.version}`)).to.equal(true);

    const before = await stack.available();
    const run = await exec(venvPython, [writeSnippet("client.py")]);
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.equal("{'text': 'hi'} 0.002\n");
    expect(before - (await stack.available())).to.equal(2_000n);
  });
});

describe("npm run pack:clients: one version for the four clients", function () {
  const REPO = path.join(__dirname, "..", "..");
  let copy: string;
  beforeEach(() => {
    copy = fs.mkdtempSync(path.join(os.tmpdir(), "sg-versions-"));
    for (const file of [
      "clients/typescript/package.json",
      "clients/cli/package.json",
      "clients/langchain/package.json",
      "clients/python/src/skill_gateway/_version.py",
    ]) {
      fs.mkdirSync(path.dirname(path.join(copy, file)), { recursive: true });
      fs.copyFileSync(path.join(REPO, file), path.join(copy, file));
    }
  });
  afterEach(() => fs.rmSync(copy, { recursive: true, force: true }));

  it("reads the version every client carries", function () {
    const sdk = JSON.parse(fs.readFileSync(path.join(REPO, "clients/typescript/package.json"), "utf8")) as { version: string };
    expect(clientsVersion(copy)).to.equal(sdk.version);
  });

  it("refuses to pack when one file says another version, naming each file", function () {
    const file = path.join(copy, "clients/python/src/skill_gateway/_version.py");
    fs.writeFileSync(file, '__version__ = "9.9.9"\n');
    expect(() => clientsVersion(copy)).to.throw(/The clients' versions differ[\s\S]*_version\.py: 9\.9\.9/);
    fs.copyFileSync(path.join(REPO, "clients/python/src/skill_gateway/_version.py"), file);
    const cli = path.join(copy, "clients/cli/package.json");
    const pkg = JSON.parse(fs.readFileSync(cli, "utf8")) as { dependencies: Record<string, string> };
    pkg.dependencies["@skill-gateway/sdk"] = "^0.0.1";
    fs.writeFileSync(cli, JSON.stringify(pkg));
    expect(() => clientsVersion(copy)).to.throw(/clients\/cli\/package\.json dependency @skill-gateway\/sdk: \^0\.0\.1/);
  });
});
