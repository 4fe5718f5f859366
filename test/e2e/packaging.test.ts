import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { expect } from "chai";
import { type PackedClients, clientsVersion, packClients } from "../../scripts/pack-clients";
import { CLIENT_DOCS, languageOf, runnable } from "../helpers/client-snippets";
import { type DocBlock, docBlocks, docSnippet } from "../helpers/doc-snippets";
import { type TestStack, startStack } from "../helpers/gateway";
import { installScratchProject } from "../helpers/scratch-project";

/**
 * The clients as a developer gets them: packed by `npm run pack:clients` (from a clean copy of their sources),
 * installed into a project outside the repository (under os.tmpdir(), with nothing of the repository on Node's
 * resolution path), and run there against a real gateway. The snippets are the clients' documents' (the four READMEs,
 * docs/clients.md, docs/mcp.md, docs/x402.md), run as written or checked, each block by its marker
 * (test/helpers/doc-snippets.ts; the inventory is in docs/clients.md, "Every snippet, and how it is checked").
 *
 * Nothing reaches the network: npm installs offline from its cache (test/helpers/scratch-project.ts), every npm
 * and npx run here has `npm_config_offline` set so that any registry request fails instead, pip installs with
 * --no-index, and the gateway and its skill backend are on loopback.
 */

const REPO = path.join(__dirname, "..", "..");
const DOC = path.join(REPO, "docs", "clients.md");
const PYTHON = "/usr/bin/python3";
const UPPERCASE_SCHEMA = { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false };

/** Snippets the its above run, each with assertions of its own (x402.mjs: test/x402/x402-snippet.test.ts). */
const RUN_ABOVE: Record<string, string[]> = {
  "docs/clients.md": ["sdk.mjs", "cli.sh", "mcp.json", "langchain.mjs", "client.py", "x402.mjs"],
  "docs/x402.md": ["x402.mjs"],
};

const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
const re = (source: string) => new RegExp(source.replaceAll("<uuid>", UUID));
/** The SDK's quick start: the data, the cost, the time and the call's id. */
const SDK_QUICK_START = re("^\\{ hello: 'world' \\} \\$0\\.001 [\\d.]+ ms <uuid>\n$");
/** LangChain's quick start: the ToolMessage of the model's call of uppercase, with the skill's data. */
const LANGCHAIN_QUICK_START = /^ToolMessage \{[\s\S]*"content": "\{\\"text\\":\\"hi\\"\}",[\s\S]*"tool_call_id": "call_1"/;

/**
 * What each other snippet prints on stdout, by document and name. A snippet that prints nothing is held to its exit
 * status: each awaits calls that throw (or raise) on any failure.
 */
const EXPECTED: Record<string, RegExp> = {
  "docs/clients.md cli-overview.sh": re(
    "^added echo \\(\\$0\\.001/call\\): \\.claude/skills/echo/SKILL\\.md\nadded uppercase \\(\\$0\\.002/call\\): \\.claude/skills/uppercase/SKILL\\.md\n" +
      '\\{\n  "text": "hi"\n\\}\nSLUG +NAME +PRICE +WRITTEN TO\n[\\s\\S]*\nremoved echo: \\.claude/skills/echo/SKILL\\.md\n$',
  ),
  "docs/clients.md python-overview.py": /^\{'text': 'hi'\} 0\.002\n$/,
  "clients/typescript/README.md quick-start.ts": SDK_QUICK_START,
  "clients/typescript/README.md price-cap.ts": /^\d+\.\d+ undefined\n$/, // what is left; the key has no spending limit
  "clients/typescript/README.md errors.ts": /^$/, // the call succeeds: neither branch prints
  "clients/typescript/README.md reads.ts": re("^(<uuid> 0\\.00[12]\n)+$"),
  "clients/typescript/README.md keys.ts": /^$/,
  "clients/cli/README.md commands.sh": re(
    "^SLUG +PRICE +NAME +DESCRIPTION\nuppercase +\\$0\\.002 +uppercase *\nadded echo [^\n]*\nadded uppercase [^\n]*\nSLUG +NAME +PRICE +WRITTEN TO\n" +
      '[\\s\\S]*\\{\n  "text": "hi"\n\\}\n\\{\n  "text": "hi"\n\\}\navailable: \\$[\\d.]+ USDC\nheld: \\$0 USDC\nWHEN +SKILL +STATUS +COST +MS\n' +
      "[\\s\\S]*\nremoved echo: [^\n]*echo/SKILL\\.md\n$",
  ),
  "clients/cli/README.md keys.sh": re(
    "^ID +NAME +SCOPES[^\n]*\n[\\s\\S]*agent for u_42 +calls +echo +\\$0\\.5/day +\\S+ +agent=researcher-7 end_user=u_42\n" +
      "ID +NAME[^\n]*\n<uuid> +agent for u_42 +calls +echo +\\$0\\.5/day +never +end_user=u_43\nrevoked <uuid>\n$",
  ),
  "clients/langchain/README.md quick-start.ts": LANGCHAIN_QUICK_START,
  "clients/python/README.md quick_start.py": re(
    "^\\{'hello': 'world'\\} 0\\.001\nuppercase <uuid> [\\d.]+\n\\d+\\.\\d+\n(\\S+ (echo|uppercase) 0\\.00[12]\n)+$",
  ),
  "clients/python/README.md quick_start_async.py": re("^0\\.020\n(<uuid>\n)+$"), // 20 calls of echo
  "clients/python/README.md price_cap.py": /^\d+\.\d+ None\n$/,
  "clients/python/README.md tool_schema.py": /^$/,
  "clients/python/README.md tool_result.py": re(
    '^\\{"text": "hi"\\}\nCharged \\$0\\.002 for uppercase \\(call <uuid>\\)\\.\n\\{"text": "hi"\\}\nCharged \\$0\\.002 for uppercase \\(call <uuid>\\)\\. False\n$',
  ),
  "clients/python/README.md errors.py": /^$/,
  "clients/python/README.md keys.py": re("(^|\n)<uuid> agent for u_42 \\{'agent': 'researcher-7', 'end_user': 'u_42'\\}\n$"),
  "docs/mcp.md hosted-client.ts": re('^\\{"hello":"world"\\}\nCharged \\$0\\.001 for echo \\(call <uuid>\\)\\.\n$'),
};

/** The two lines the stdio MCP server writes on stderr as it starts (the CLI's README shows a sample). */
const MCP_KEY_LINE = /^skill-gateway mcp: API key atom_\w+… accepted by \S+: \$[\d.]+ available\.$/;
const MCP_SERVING_LINE =
  /^skill-gateway mcp: Serving \d+ skills? (?:from the manifest \S+: (?<manifest>[\w-]+ \(\$[\d.]+\/call\)(?:, [\w-]+ \(\$[\d.]+\/call\))*)\.|named by --skills: (?<named>[\w-]+ \(\$[\d.]+\/call\)(?:, [\w-]+ \(\$[\d.]+\/call\))*); each call is held to that price\.)$/;

interface McpServerConfig {
  command: string;
  args: string[];
  env?: Record<string, string>;
}

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
  const exec = (file: string, args: string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> =>
    new Promise((resolve) => {
      const child = execFile(file, args, { cwd: app, env: options.env ?? env }, (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin?.end(options.input ?? "");
    });
  const writeSnippet = (name: string) => {
    fs.writeFileSync(path.join(app, name), docSnippet(DOC, name));
    return name;
  };

  before(async function () {
    // Packing is tsc three times and setuptools twice: about a minute, over 100 s on the 2-core machine under load.
    this.timeout(300_000);
    root = fs.mkdtempSync(path.join(os.tmpdir(), "sg-packaging-"));
    app = path.join(root, "app");
    fs.mkdirSync(app);
    const venv = path.join(root, "venv");
    venvPython = path.join(venv, "bin", "python");
    // What does not need the packages starts while they are packed: the gateway, and the virtual environment
    // (Debian's httpx comes from the system's site-packages; the client itself only from the wheel).
    const startedStack = startStack().then((started) => (stack = started));
    // Without a pip of its own (ensurepip copying one in costs about 4 s of CPU): the system's pip installs the wheel
    // into it (`pip --python`, pip 22.3 and later), which puts the same files in the same place.
    const venvMade = promisify(execFile)(PYTHON, ["-m", "venv", "--system-site-packages", "--without-pip", venv]);
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
      venvMade.then(() =>
        promisify(execFile)(PYTHON, ["-m", "pip", "--python", venvPython, "install", "--quiet", "--no-index", "--no-deps", packed.wheel]),
      ),
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
    // The same patterns hold the CLI README's sample of these lines (its mcp-start-lines check below).
    const lines = stderr.split("\n");
    expect(
      lines.filter((line) => MCP_KEY_LINE.test(line) || MCP_SERVING_LINE.test(line)),
      stderr,
    ).to.have.lengthOf(2);
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

  describe("every code block of the clients' documents: run as written from the project, or checked", function () {
    let managementKey: string;
    before(async () => {
      managementKey = (await stack.gw.keys.create(stack.buyerId, { scopes: ["calls", "keys:manage"] })).key;
    });

    const firstOf = new Map<string, string>();
    const passed = new Set<string>();
    for (const doc of CLIENT_DOCS) {
      const blocks = docBlocks(path.join(REPO, doc));
      it(`${doc}: marks every code block snippet:, checked: or not run: (the inventory in docs/clients.md)`, function () {
        expect(blocks.filter((b) => !b.marker).map((b) => `${doc}:${b.line}`)).to.deep.equal([]);
      });
      for (const block of blocks) {
        const marker = block.marker;
        if (marker?.kind === "checked") {
          it(`${doc}:${block.line}: holds the ${marker.check} block to what is real`, async function () {
            await CHECKS[marker.check](block);
          });
        }
        if (marker?.kind !== "snippet" || RUN_ABOVE[doc]?.includes(marker.name) || languageOf(marker.name) === "json") continue;
        // A snippet written twice, word for word (a README's and this overview's), is run once.
        const twin = `${marker.given ?? ""}\n${block.code}`;
        const first = firstOf.get(twin);
        if (first === undefined) firstOf.set(twin, `${doc} ${marker.name}`);
        else {
          it(`${doc}: ${marker.name} is ${first}, word for word, run there`, function () {
            expect(passed.has(first), `${first} passed`).to.equal(true);
          });
          continue;
        }
        it(`${doc}: runs ${marker.name}${marker.given ? `, given ${marker.given}` : ""}`, async function () {
          const expected = EXPECTED[`${doc} ${marker.name}`];
          expect(expected, `what ${doc}'s ${marker.name} prints, in EXPECTED`).to.not.equal(undefined);
          const { file, text, runner } = runnable({ ...block, marker });
          fs.writeFileSync(path.join(app, file), text);
          const runEnv: NodeJS.ProcessEnv = {
            ...env,
            // skill-gateway on the PATH, as `npm install -g` or an npm script would have it.
            PATH: `${path.join(app, "node_modules", ".bin")}${path.delimiter}${env.PATH}`,
            SKILL_GATEWAY_MANAGEMENT_KEY: managementKey,
            ...(marker.given === "management-key" && runner === "bash" ? { SKILL_GATEWAY_API_KEY: managementKey } : {}),
          };
          const command = runner === "node" ? process.execPath : runner === "python" ? venvPython : "bash";
          const args = runner === "bash" ? ["-euo", "pipefail", file] : [file];
          const run = await exec(command, args, { env: runEnv });
          expect(run.code, `${run.stderr}\n${run.stdout}`).to.equal(0);
          expect(run.stdout, run.stderr).to.match(expected);
          passed.add(`${doc} ${marker.name}`);
        });
      }
    }

    /** Checks of the blocks that are not run as such. */
    const CHECKS: Record<string, (block: DocBlock) => Promise<void> | void> = {
      // The files npm run pack:clients writes, named as the packing named them.
      "packed-files": (block) => {
        const named = block.code
          .trim()
          .split("\n")
          .map((line) => path.basename(line.split(/\s+/)[0]));
        expect(named.sort()).to.deep.equal(
          [packed.sdk, packed.cli, packed.langchain, packed.wheel, packed.sdist].map((f) => path.basename(f)).sort(),
        );
      },
      // Every package file an install names is one the packing wrote (this project installed those same files).
      install: (block) => {
        const named = [...block.code.matchAll(/[\w.-]+\.(?:tgz|whl)\b/g)].map((m) => m[0]);
        expect(named.length, block.code).to.be.above(0);
        const files = [packed.sdk, packed.cli, packed.langchain, packed.wheel].map((f) => path.basename(f));
        for (const name of named) expect(files, block.code).to.include(name);
      },
      // The sample of what the stdio server says as it starts: the lines the stdio test above reads from it.
      "mcp-start-lines": (block) => {
        const [key, serving] = block.code.trim().split("\n");
        expect(key).to.match(MCP_KEY_LINE);
        expect(serving).to.match(MCP_SERVING_LINE);
      },
      // The configuration by hand: the shape `mcp install` writes, and a command the installed package has.
      "mcp-config": async (block) => {
        const server = (JSON.parse(block.code) as { mcpServers: Record<string, McpServerConfig> }).mcpServers["skill-gateway"];
        expect([server.command, ...server.args.slice(0, 3)]).to.deep.equal(["npx", "-y", "@skill-gateway/cli", "mcp"]);
        const install = await exec("npx", ["-y", "@skill-gateway/cli", "mcp", "install", "--client", "claude-code"]);
        expect(install.code, install.stderr).to.equal(0);
        const written = JSON.parse(fs.readFileSync(path.join(app, ".mcp.json"), "utf8")) as { mcpServers: Record<string, McpServerConfig> };
        fs.rmSync(path.join(app, ".mcp.json"));
        const made = written.mcpServers["skill-gateway"];
        expect(Object.keys(made.env ?? {}).sort()).to.deep.equal(Object.keys(server.env ?? {}).sort());
        expect(made.env?.SKILL_GATEWAY_API_KEY).to.equal(server.env?.SKILL_GATEWAY_API_KEY);
        const manifestAt = server.args.indexOf("--manifest");
        expect(made.args.slice(made.args.indexOf("mcp"))).to.deep.equal([
          "mcp",
          "--manifest",
          path.join(fs.realpathSync(app), "skill-gateway.json"),
        ]);
        expect(server.args.slice(3, manifestAt + 1)).to.deep.equal(["--manifest"]);
        expect(fs.existsSync(made.args[0]), made.args[0]).to.equal(true); // the installed package's launcher
      },
      // The hosted server's configuration: JSON once its comment line is gone, naming /mcp and a bearer key.
      "hosted-mcp-config": (block) => {
        const config = JSON.parse(block.code.replace(/^\s*\/\/.*$/gm, "")) as {
          mcpServers: Record<string, { type: string; url: string; headers: Record<string, string> }>;
        };
        const server = config.mcpServers["skill-gateway"];
        expect([server.type, new URL(server.url).pathname]).to.deep.equal(["http", "/mcp"]);
        expect(server.headers.Authorization).to.match(/^Bearer atom_/);
      },
    };
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
