// In a clone the SDK is not built: its source stands in (clients/typescript/source.cjs).
import "../../typescript/source.cjs";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { expect } from "chai";
import { type TestStack, startStack } from "../../../test/helpers/gateway";
import { scratchDirs } from "../../../test/helpers/scratch-dirs";
import { EXIT } from "../src/errors";
import { LAUNCHER, buildCli } from "./built-cli";
import type { Manifest } from "../src/manifest";

let built: { launcher: string; dir: string } | undefined;
const UPPERCASE_SCHEMA = { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false };

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real CLI as a child process (asynchronously: the gateway answers from this process): the built one
 * unless `launcher` says otherwise.
 */
function cli(
  stack: TestStack,
  cwd: string,
  args: string[],
  options: { key?: string; input?: string; launcher?: string } = {},
): Promise<Run> {
  return new Promise((resolve) => {
    const env = { ...process.env, SKILL_GATEWAY_URL: stack.url, SKILL_GATEWAY_API_KEY: options.key ?? stack.key };
    const launcher = options.launcher ?? built!.launcher;
    const child = execFile(process.execPath, [launcher, ...args], { cwd, env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
    child.stdin?.end(options.input ?? "");
  });
}

function mcpClient(
  stack: TestStack,
  cwd: string,
  key: string,
  launcher = built!.launcher,
): { client: Client; transport: StdioClientTransport } {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [launcher, "mcp"],
    cwd,
    env: { ...(process.env as Record<string, string>), SKILL_GATEWAY_URL: stack.url, SKILL_GATEWAY_API_KEY: key },
    stderr: "pipe",
  });
  return { client: new Client({ name: "cli-e2e", version: "0.0.0" }), transport };
}

const text = (result: object) =>
  (((result as { content?: unknown }).content ?? []) as Array<{ type: string; text?: string }>).map((c) => c.text ?? "").join("\n");

describe("skill-gateway CLI against a real gateway", function () {
  let stack: TestStack;
  const scratch = scratchDirs("sg-cli-e2e-");
  let dir: string;

  before(async function () {
    built = await buildCli();
    stack = await startStack();
    await stack.addSkill("uppercase", "/echo", {
      description: "Echoes text: a stand-in for an upper-casing skill.",
      priceMicros: 2_000n,
      inputSchema: UPPERCASE_SCHEMA,
    });
  });
  after(async function () {
    await stack?.close();
    if (built) fs.rmSync(built.dir, { recursive: true, force: true });
  });
  beforeEach(function () {
    dir = scratch.make();
  });
  afterEach(() => scratch.removeAll());

  it("adds, lists, serves over MCP and removes skills (the issue's end-to-end test)", async function () {
    // The command a clone runs from the source tree (LAUNCHER, through ts-node, compiling as it starts: about 3 s of
    // CPU a process) adds the skills and serves them over MCP; the package's build lists and removes them.
    this.timeout(60_000);
    const source = { launcher: LAUNCHER };
    const add = await cli(stack, dir, ["add", "echo", "uppercase", "--agent", "agents"], source);
    expect(add.code, add.stderr).to.equal(0);
    expect(add.stdout).to.include("added echo ($0.001/call): .agents/skills/echo/SKILL.md");

    const manifest = JSON.parse(fs.readFileSync(path.join(dir, "skill-gateway.json"), "utf8")) as Manifest;
    expect(manifest.skills.map((s) => [s.slug, s.price, s.inputSchema])).to.deep.equal([
      ["echo", 0.001, null],
      ["uppercase", 0.002, UPPERCASE_SCHEMA],
    ]);
    expect(manifest.skills[0].files.map((f) => f.path)).to.deep.equal([".agents/skills/echo/SKILL.md"]);
    const echoMd = fs.readFileSync(path.join(dir, ".agents/skills/echo/SKILL.md"), "utf8");
    expect(echoMd).to.match(/^---\nname: "echo"\ndescription: ".*\$0\.001 per call.*"\ncompatibility: ".*"\n---\n/);
    expect(fs.readFileSync(path.join(dir, ".agents/skills/uppercase/SKILL.md"), "utf8")).to.include('"required": [\n    "text"\n  ]');

    const list = await cli(stack, dir, ["list"]);
    expect(list.code).to.equal(0);
    expect(list.stdout).to.match(/echo\s+echo\s+\$0\.001\s+\.agents\/skills\/echo\/SKILL\.md/);
    expect(list.stdout).to.match(/uppercase\s+uppercase\s+\$0\.002\s+\.agents\/skills\/uppercase\/SKILL\.md/);

    const { client, transport } = mcpClient(stack, dir, stack.key, LAUNCHER);
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).to.deep.equal(["echo", "uppercase"]);
      expect(tools[0].inputSchema).to.deep.equal({ type: "object" });
      expect(tools[1].inputSchema).to.deep.equal(UPPERCASE_SCHEMA);
      expect(tools[1].description).to.include("$0.002 USD per successful call");

      const before = await stack.available();
      const paid = await client.callTool({ name: "uppercase", arguments: { text: "hi" } });
      expect(paid.isError ?? false).to.equal(false);
      expect((paid.structuredContent as { data: unknown }).data).to.deep.equal({ text: "hi" });
      expect(text(paid))
        .to.include('{"text":"hi"}')
        .and.match(/Charged \$0\.002 for uppercase \(call [0-9a-f-]{36}\)\./);
      expect(before - (await stack.available())).to.equal(2_000n);

      const afterPaid = await stack.available();
      const failed = await client.callTool({ name: "fail", arguments: {} });
      expect(failed.isError, "fail is not in the manifest").to.equal(true);
      expect(text(failed)).to.include('No tool "fail"');
      expect(await stack.available()).to.equal(afterPaid);
    } finally {
      await client.close();
    }

    const remove = await cli(stack, dir, ["remove", "echo"]);
    expect(remove.code, remove.stderr).to.equal(0);
    expect(fs.existsSync(path.join(dir, ".agents/skills/echo"))).to.equal(false);
    expect(fs.existsSync(path.join(dir, ".agents/skills/uppercase/SKILL.md"))).to.equal(true);
    const left = JSON.parse(fs.readFileSync(path.join(dir, "skill-gateway.json"), "utf8")) as Manifest;
    expect(left.skills.map((s) => s.slug)).to.deep.equal(["uppercase"]);

    const removeLast = await cli(stack, dir, ["remove", "uppercase"]);
    expect(removeLast.code).to.equal(0);
    expect(fs.readdirSync(dir)).to.deep.equal(["skill-gateway.json"]); // .agents, created by add, is gone too
  });

  it("answers a failing skill and a zero balance over MCP with isError, charging nothing", async function () {
    expect((await cli(stack, dir, ["add", "fail", "echo"])).code).to.equal(0);
    const poor = await stack.addBuyer("0");
    for (const [key, name, expected] of [
      [stack.key, "fail", "You were not charged. You may retry, or do without it."],
      [poor.key, "echo", "Insufficient balance: this call costs $0.001 and $0.00 is available"],
    ] as const) {
      const { client, transport } = mcpClient(stack, dir, key);
      await client.connect(transport);
      try {
        const before = [await stack.available(), await stack.available(poor.accountId)];
        const result = await client.callTool({ name, arguments: {} });
        expect(result.isError, name).to.equal(true);
        expect(text(result)).to.include(expected);
        expect([await stack.available(), await stack.available(poor.accountId)]).to.deep.equal(before);
      } finally {
        await client.close();
      }
    }
  });

  describe("one contract with the hosted MCP server", function () {
    /** A result with its call ids and timings made constant, to compare two calls of the same thing. */
    const comparable = (result: object) =>
      JSON.parse(
        JSON.stringify(result)
          .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<call>")
          .replace(/"response_time_ms":[0-9.]+/g, '"response_time_ms":0')
          .replace(/"balance_available":"[0-9.]+"/g, '"balance_available":"<usd>"'),
      ) as Record<string, unknown>;

    it("answers the same call with the same result shape and cost line over stdio and over POST /mcp", async function () {
      this.timeout(60_000);
      expect((await cli(stack, dir, ["add", "uppercase"])).code).to.equal(0);
      const stdio = mcpClient(stack, dir, stack.key);
      const hosted = new Client({ name: "contract-test", version: "1.0.0" });
      const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
      await stdio.client.connect(stdio.transport);
      await hosted.connect(
        new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${stack.key}` } },
        }),
      );
      try {
        const args = { name: "uppercase", arguments: { text: "hi" } };
        const fromStdio = comparable(await stdio.client.callTool(args));
        const fromHosted = comparable(await hosted.callTool(args));
        expect(fromStdio).to.deep.equal(fromHosted);
        expect(fromHosted.content).to.deep.equal([
          { type: "text", text: '{"text":"hi"}' },
          { type: "text", text: "Charged $0.002 for uppercase (call <call>)." },
        ]);
        expect(Object.keys((fromHosted.structuredContent as { metadata: object }).metadata)).to.have.members([
          "skill_id",
          "response_time_ms",
          "price_paid",
          "call_id",
        ]);

        // A refusal: the same text, said once, and the same fields.
        const invalid = { name: "uppercase", arguments: { text: 42 } };
        const refusedStdio = (await stdio.client.callTool(invalid)) as Record<string, unknown>;
        const refusedHosted = (await hosted.callTool(invalid)) as Record<string, unknown>;
        expect(refusedStdio.content).to.deep.equal(refusedHosted.content);
        expect((refusedHosted.content as Array<{ text: string }>)[0].text).to.match(
          /^Input does not match the skill's schema: .+\. Nothing was charged\. Fix the arguments and call again\.$/,
        );
        expect(Object.keys(refusedStdio.structuredContent as object)).to.have.members(
          Object.keys(refusedHosted.structuredContent as object),
        );
      } finally {
        await stdio.client.close();
        await hosted.close();
      }
    });
  });

  describe("pinned prices", function () {
    it("holds call and the MCP tools to the price pinned at add; a higher price exits 12, uncharged, until re-added", async function () {
      this.timeout(120_000);
      await stack.addSkill("pricey", "/echo", { priceMicros: 1_000n });
      expect((await cli(stack, dir, ["add", "pricey"])).code).to.equal(0);
      expect((await cli(stack, dir, ["call", "pricey"])).code).to.equal(0);
      // The seller raises the price: the pinned skill's calls are refused, nothing charged.
      await stack.addSkill("pricey", "/echo", { priceMicros: 200_000n });
      const before = await stack.available();
      const refused = await cli(stack, dir, ["call", "pricey"]);
      expect(refused.code, refused.stderr).to.equal(EXIT.priceAboveMax);
      expect(refused.stderr).to.equal(
        "skill-gateway: The price of pricey rose to $0.2 per call since it was added at $0.001: nothing was charged. Re-add the skill to accept the new price: skill-gateway add pricey\n",
      );
      const json = await cli(stack, dir, ["--json", "call", "pricey"]);
      expect([json.code, JSON.parse(json.stderr).code]).to.deep.equal([EXIT.priceAboveMax, "price_above_max"]);

      const { client, transport } = mcpClient(stack, dir, stack.key);
      await client.connect(transport);
      try {
        const result = await client.callTool({ name: "pricey", arguments: {} });
        expect(result.isError).to.equal(true);
        // The LangChain tools' words (the SDK's priceAboveCapText): a model cannot raise a cap, its owner can.
        expect(text(result)).to.equal(
          'The skill "pricey" now costs $0.2 per call, more than the $0.001 cap its tool was given: nothing was charged. You cannot raise the cap: tell your owner, who must re-add the skill to accept the new price, and do without it until then.',
        );
      } finally {
        await client.close();
      }
      expect(await stack.available()).to.equal(before);

      // An explicit --max-price decides instead of the pinned one; a skill not in the manifest has no cap.
      const accepted = await cli(stack, dir, ["call", "pricey", "--max-price", "0.2"]);
      expect(accepted.code, accepted.stderr).to.equal(0);
      expect(accepted.stderr).to.match(/^cost: \$0\.2 USD/);
      const explicit = await cli(stack, dir, ["call", "echo", "--max-price", "0.0005"]);
      expect(explicit.code).to.equal(EXIT.priceAboveMax);
      expect(explicit.stderr).to.match(
        /^skill-gateway: The skill "echo" costs \$0\.001 per call, above this call's max_price of \$0\.0005/,
      );
      expect((await cli(stack, dir, ["call", "pricey", "--max-price", "0"])).code).to.equal(EXIT.usage);

      // Re-added, the new price is pinned and the calls go through.
      expect((await cli(stack, dir, ["add", "pricey"])).code).to.equal(0);
      const after = await cli(stack, dir, ["call", "pricey"]);
      expect(after.code, after.stderr).to.equal(0);
      expect(after.stderr).to.match(/^cost: \$0\.2 USD/);
    });

    it("puts what the key has left in an MCP tool result's _meta", async function () {
      expect((await cli(stack, dir, ["add", "echo"])).code).to.equal(0);
      const limited = await stack.gw.keys.create(stack.buyerId, { spendLimit: { limitMicros: 5_000n, period: "day" } });
      const { client, transport } = mcpClient(stack, dir, limited.key);
      await client.connect(transport);
      try {
        const result = await client.callTool({ name: "echo", arguments: {} });
        // The hosted server's names (balance_available, key_spend_remaining: USD strings), as issue 26 section 3 asks.
        expect(result._meta).to.deep.include({ key_spend_remaining: "0.004" });
        expect(Number((result._meta as Record<string, string>).balance_available) * 1e6).to.be.closeTo(
          Number(await stack.available()),
          0.5,
        );
      } finally {
        await client.close();
      }
    });
  });

  describe("call, balance, usage, search", function () {
    it("prints data on stdout and the cost on stderr, from --input or stdin", async function () {
      const fromFlag = await cli(stack, dir, ["call", "echo", "--input", '{"hello":"world"}']);
      expect([fromFlag.code, JSON.parse(fromFlag.stdout)]).to.deep.equal([0, { hello: "world" }]);
      expect(fromFlag.stderr).to.match(/^cost: \$0\.001 USD \(call [^)]+\)\n$/);
      const fromStdin = await cli(stack, dir, ["call", "echo"], { input: '{"a":1}' });
      expect(JSON.parse(fromStdin.stdout)).to.deep.equal({ a: 1 });
      const json = await cli(stack, dir, ["--json", "call", "echo", "--input", "{}"]);
      expect(JSON.parse(json.stdout).metadata).to.include({ skillId: "echo", cost: 0.001 });
    });

    it("shows the balance and the usage", async function () {
      const balance = await cli(stack, dir, ["--json", "balance"]);
      expect(balance.code).to.equal(0);
      expect(JSON.parse(balance.stdout).available_base_units).to.equal(String(await stack.available()));
      await cli(stack, dir, ["call", "echo"]);
      const usage = await cli(stack, dir, ["--json", "usage", "--limit", "1"]);
      expect(JSON.parse(usage.stdout).calls.map((c: { skill_id: string }) => c.skill_id)).to.deep.equal(["echo"]);
    });

    it("searches the marketplace by words", async function () {
      const found = await cli(stack, dir, ["--json", "search", "upper", "stand-in"]);
      expect(JSON.parse(found.stdout).map((s: { slug: string }) => s.slug)).to.deep.equal(["uppercase"]);
    });
  });

  describe("failures: one line on stderr and a distinct exit code", function () {
    const cases: Array<[string, string[], number, RegExp, { key?: string; input?: string }?]> = [
      ["an unknown skill", ["add", "no-such-skill"], EXIT.notFound, /^skill-gateway: .*\n$/],
      ["a bad API key", ["balance"], EXIT.auth, /^skill-gateway: .*\n$/, { key: "atom_nope" }],
      ["input that is not JSON", ["call", "echo", "--input", "{nope"], EXIT.usage, /^skill-gateway: The input is not valid JSON/],
      [
        "input the schema refuses",
        ["call", "uppercase", "--input", '{"text":1}'],
        EXIT.badInput,
        /^skill-gateway: Input does not match the skill's schema/,
      ],
      ["a failing skill", ["call", "fail"], EXIT.skillFailed, /^skill-gateway: .*\n$/],
      ["an unknown command", ["frobnicate"], EXIT.usage, /^error: unknown command 'frobnicate'\n$/],
      [
        "an unknown agent",
        ["add", "echo", "--agent", "notepad"],
        EXIT.usage,
        /^error: option '--agent <agents>' argument 'notepad' is invalid\. Allowed: agents, claude, cursor, codex, opencode, all\.\n$/,
      ],
      ["removing what is not there", ["remove", "echo"], EXIT.notFound, /^skill-gateway: Not in skill-gateway.json: echo/],
    ];
    for (const [what, args, code, stderr, options] of cases) {
      it(`exits ${code} on ${what}`, async function () {
        const result = await cli(stack, dir, args, options);
        expect(result.code, result.stderr).to.equal(code);
        expect(result.stderr).to.match(stderr);
        expect(result.stderr.trimEnd().split("\n"), result.stderr).to.have.length(1);
      });
    }

    it("exits 5 when the balance is too low, naming the shortfall", async function () {
      const poor = await stack.addBuyer("0");
      const result = await cli(stack, dir, ["call", "echo"], { key: poor.key });
      expect(result.code).to.equal(EXIT.insufficientBalance);
      expect(result.stderr).to.equal("skill-gateway: Insufficient balance: this call costs $0.001 and $0.00 is available. Add funds.\n");
    });

    it("exits 11 when the key's spending limit is reached, saying when it resets", async function () {
      // The limit covers one call of echo ($0.001), not two.
      const limited = await stack.gw.keys.create(stack.buyerId, { spendLimit: { limitMicros: 1_500n, period: "total" } });
      expect((await cli(stack, dir, ["call", "echo"], { key: limited.key })).code).to.equal(0);
      const result = await cli(stack, dir, ["call", "echo"], { key: limited.key });
      expect(result.code).to.equal(EXIT.spendLimit);
      expect(result.stderr).to.equal(
        "skill-gateway: This key's spending limit of $0.0015 in total is reached ($0.001 spent, this call costs $0.001); it does not reset: raise or remove the limit to go on.\n",
      );
    });

    it("prints errors as JSON with --json", async function () {
      const result = await cli(stack, dir, ["--json", "add", "no-such-skill"]);
      expect(JSON.parse(result.stderr)).to.include({ code: "skill_not_found" });
    });
  });

  it("writes for every agent named (repeated or comma-separated), and remove takes every copy away", async function () {
    const add = await cli(stack, dir, ["add", "echo", "--agent", "claude", "--agent", "cursor,opencode"]);
    expect(add.code, add.stderr).to.equal(0);
    expect(add.stdout).to.equal(
      "added echo ($0.001/call): .claude/skills/echo/SKILL.md, .cursor/skills/echo/SKILL.md, .opencode/skills/echo/SKILL.md\n",
    );
    const md = fs.readFileSync(path.join(dir, ".cursor/skills/echo/SKILL.md"), "utf8");
    expect(md).to.include(`curl -s "${stack.url}/v1/skills/echo/call"`);
    const remove = await cli(stack, dir, ["remove", "echo"]);
    expect(remove.code, remove.stderr).to.equal(0);
    expect(fs.readdirSync(dir)).to.deep.equal(["skill-gateway.json"]);
  });

  it("writes for a named agent where it reads skills, and --help works on every command", async function () {
    const add = await cli(stack, dir, ["add", "echo", "--agent", "claude"]);
    expect(add.code, add.stderr).to.equal(0);
    expect(fs.existsSync(path.join(dir, ".claude/skills/echo/SKILL.md"))).to.equal(true);
    expect(fs.existsSync(path.join(dir, ".agents")), "only the agent named").to.equal(false);
    for (const command of ["add", "list", "search", "remove", "call", "balance", "usage", "mcp"]) {
      const help = await cli(stack, dir, [command, "--help"]);
      expect([help.code, help.stdout.split("\n")[0]], command).to.deep.equal([
        0,
        `Usage: skill-gateway ${command}${help.stdout.split("\n")[0].slice(`Usage: skill-gateway ${command}`.length)}`,
      ]);
    }
  });
});
