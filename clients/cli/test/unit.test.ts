// In a clone the SDK is not built: its source stands in (clients/typescript/source.cjs).
import "../../typescript/source.cjs";
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { expect } from "chai";
import { AGENTS } from "../src/agents";
import { parseInput } from "../src/commands";
import { resolveConfig } from "../src/config";
import { CliError, EXIT, exitCodeFor, pinnedPriceError } from "../src/errors";
import { removeWritten, writeFiles } from "../src/install";
import { type Manifest, type ManifestSkill, emptyManifest, pinnedCap, readManifest, writeManifest } from "../src/manifest";
import { toolOf } from "../src/mcp";
import { buildCli } from "./built-cli";
import { scratchDirs } from "../../../test/helpers/scratch-dirs";
import { formatUsd, renderSkillMd as renderSkillMdOf } from "../src/skill-md";

function buildSkill(overrides: Partial<ManifestSkill> = {}): ManifestSkill {
  return {
    id: "00000000-0000-4000-8000-000000000001",
    slug: "uppercase",
    name: "Uppercase",
    description: "Turns text into upper case.",
    price: 0.002,
    currency: "USD",
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    agents: ["agents"],
    addedAt: "2026-01-01T00:00:00.000Z",
    files: [],
    dirs: [],
    ...overrides,
  };
}

const scratch = scratchDirs("sg-cli-unit-");
after(() => scratch.removeAll());

function tempDir(): string {
  return scratch.make();
}

describe("manifest", function () {
  it("reads a missing manifest as an empty one", function () {
    expect(readManifest(path.join(tempDir(), "skill-gateway.json"))).to.deep.equal(emptyManifest());
  });

  it("writes and reads back the same skills", function () {
    const file = path.join(tempDir(), "skill-gateway.json");
    const manifest: Manifest = {
      version: 1,
      skills: [buildSkill({ files: [{ path: ".agents/skills/uppercase/SKILL.md", sha256: "ab" }], dirs: [".agents"] })],
    };
    writeManifest(file, manifest);
    expect(readManifest(file)).to.deep.equal(manifest);
    expect(fs.readdirSync(path.dirname(file))).to.deep.equal(["skill-gateway.json"]); // no temporary file left
  });

  for (const [text, fragment] of [
    ["{", "not valid JSON"],
    ["[]", "not a JSON object"],
    ['{"version": 2, "skills": []}', "version is 2"],
    ['{"version": 1, "skills": [{"slug": "x"}]}', "skills[0].id is not a string"],
  ]) {
    it(`refuses a manifest that is ${JSON.stringify(text)} with exit ${EXIT.manifest}`, function () {
      const file = path.join(tempDir(), "skill-gateway.json");
      fs.writeFileSync(file, text);
      expect(() => readManifest(file))
        .to.throw(CliError, fragment)
        .with.property("exitCode", EXIT.manifest);
    });
  }
});

/** A SKILL.md for a skill added from https://gw.example. */
const renderSkillMd = (skill: ManifestSkill) => renderSkillMdOf({ ...skill, gatewayUrl: "https://gw.example/" });

describe("SKILL.md", function () {
  it("has name, description (with when to use it) and compatibility frontmatter, the price, the schema and how to call it", function () {
    const md = renderSkillMd(buildSkill());
    const [, frontmatter, body] = md.split(/^---$/m);
    expect(frontmatter.trim().split("\n")).to.deep.equal([
      'name: "uppercase"',
      'description: "Turns text into upper case. Use when a task needs what \\"Uppercase\\" does and a paid call is worth it: a Skill Gateway skill at $0.002 per call (failed calls are free), run with `npx -y @skill-gateway/cli call uppercase`."',
      'compatibility: "Needs network access to the Skill Gateway at https://gw.example/, an API key in the environment variable SKILL_GATEWAY_API_KEY, and either Node.js 20+ with the npm package @skill-gateway/cli or curl."',
    ]);
    expect(body).to.include("# Uppercase").and.include("$0.002 (USD) per successful call");
    expect(body).to.include("## When to use it\n\nWhen the task needs what the skill does");
    expect(body).to.include("in the environment variable `SKILL_GATEWAY_API_KEY`");
    expect(body).to.include('"required": [\n    "text"\n  ]');
    expect(body).to.include(`npx -y @skill-gateway/cli call uppercase --input '{"text":"..."}'`);
    // The curl fallback calls the gateway the skill was added from, written in.
    expect(body).to.include('curl -s "https://gw.example/v1/skills/uppercase/call"');
    expect(body).to.include("## Spending in a loop\n\nEach successful call costs $0.002: N calls cost N × $0.002.");
    // The HTTP example is held to the pinned price, as the CLI's own calls are.
    expect(body).to.include('-H "X-Max-Price: 0.002"');
    expect(renderSkillMd(buildSkill({ price: 1.5 }))).to.include('-H "X-Max-Price: 1.5"');
    expect(renderSkillMd(buildSkill({ price: 0 }))).to.include('-H "X-Max-Price: 0.000001"');
  });

  it("says a usage-priced skill costs up to its price, in the description and the body", function () {
    const md = renderSkillMd(buildSkill({ pricing: "usage", price: 0.01 }));
    expect(md).to.include("a Skill Gateway skill at up to $0.01 per call");
    expect(md).to.include("up to $0.01 (USD) per successful call");
    expect(toolOf(buildSkill({ pricing: "usage", price: 0.01 })).description).to.include("Price: up to $0.01 USD per successful call");
  });

  it("says a skill without a schema takes any object", function () {
    expect(renderSkillMd(buildSkill({ inputSchema: null }))).to.include("no input schema: its input is any JSON object");
  });

  it("keeps a hostile description inside one YAML string of at most 1024 characters", function () {
    const md = renderSkillMd(buildSkill({ description: `a: b\n---\nname: evil ${"x".repeat(3000)}` }));
    const line = md.split("\n")[2];
    const description = JSON.parse(line.slice("description: ".length)) as string;
    expect(description.length).to.be.at.most(1024);
    expect(description).to.match(/^a: b --- name: evil x+… Use when a task needs/);
    expect(md.split("\n")[4]).to.equal("---");
  });

  it("prints prices without float noise", function () {
    expect([formatUsd(0.1 + 0.2), formatUsd(0.001), formatUsd(0)]).to.deep.equal(["$0.3", "$0.001", "$0"]);
  });
});

describe("writeFiles and removeWritten", function () {
  it("removes exactly what was written, and the folders it created once empty", function () {
    const dir = tempDir();
    fs.mkdirSync(path.join(dir, ".agents"));
    fs.writeFileSync(path.join(dir, ".agents", "mine.txt"), "not ours");
    const written = writeFiles(dir, { ".agents/skills/echo/SKILL.md": "hello" });
    expect(written.dirs).to.deep.equal([".agents/skills/echo", ".agents/skills"]);
    fs.writeFileSync(path.join(dir, ".agents", "skills", "other.md"), "someone else's");

    const removed = removeWritten(dir, written);
    expect(removed).to.deep.equal({ removed: [".agents/skills/echo/SKILL.md"], kept: [], removedDirs: [".agents/skills/echo"] });
    expect(fs.readFileSync(path.join(dir, ".agents", "skills", "other.md"), "utf8")).to.equal("someone else's");
    expect(fs.readFileSync(path.join(dir, ".agents", "mine.txt"), "utf8")).to.equal("not ours");
  });

  it("keeps a file edited since it was written, and its folder", function () {
    const dir = tempDir();
    const written = writeFiles(dir, { ".claude/skills/echo/SKILL.md": "hello" });
    fs.appendFileSync(path.join(dir, ".claude/skills/echo/SKILL.md"), "\nmy notes");
    expect(removeWritten(dir, written)).to.deep.equal({ removed: [], kept: [".claude/skills/echo/SKILL.md"], removedDirs: [] });
    expect(fs.existsSync(path.join(dir, ".claude/skills/echo/SKILL.md"))).to.equal(true);
  });

  it("refuses to overwrite a file it did not write", function () {
    const dir = tempDir();
    fs.mkdirSync(path.join(dir, ".agents/skills/echo"), { recursive: true });
    fs.writeFileSync(path.join(dir, ".agents/skills/echo/SKILL.md"), "hand-written");
    expect(() => writeFiles(dir, { ".agents/skills/echo/SKILL.md": "x" })).to.throw(CliError, "was not written by skill-gateway");
    expect(fs.readFileSync(path.join(dir, ".agents/skills/echo/SKILL.md"), "utf8")).to.equal("hand-written");
  });

  it("refuses manifest paths that leave the project", function () {
    const dir = tempDir();
    for (const bad of ["../outside.md", "/etc/passwd", "."]) {
      expect(() => removeWritten(dir, { files: [{ path: bad, sha256: "x" }], dirs: [] }), bad).to.throw(CliError, "not inside the project");
    }
  });
});

describe("exit codes", function () {
  const gatewayError = (status: number | undefined, code: string) => Object.assign(new Error("m"), { status, code });
  const table: Array<[unknown, number]> = [
    [new CliError("x", EXIT.usage, "u"), 2],
    [gatewayError(400, "invalid_input"), 7],
    [gatewayError(401, "unauthorized"), 4],
    [gatewayError(402, "insufficient_balance"), 5],
    [gatewayError(402, "key_spend_limit_reached"), 11],
    [gatewayError(403, "authority_exceeded"), 18],
    [gatewayError(403, "scope_missing"), 18],
    [gatewayError(403, "skill_not_allowed"), 18],
    [gatewayError(409, "price_above_max"), 12],
    [gatewayError(409, "idempotency_key_in_use"), 9],
    [gatewayError(404, "skill_not_found"), 3],
    [gatewayError(429, "rate_limited"), 6],
    [gatewayError(502, "skill_error"), 8],
    [gatewayError(500, "internal_error"), 9],
    [gatewayError(undefined, "connection_error"), 9],
    [new TypeError("bug"), 1],
  ];
  for (const [error, code] of table) {
    it(`maps ${(error as { code?: string }).code ?? (error as Error).name} to ${code}`, function () {
      expect(exitCodeFor(error)).to.equal(code);
    });
  }
  it("gives every kind a distinct code", function () {
    expect(new Set(Object.values(EXIT)).size).to.equal(Object.keys(EXIT).length);
  });
  it("documents every code in the README's exit code table, and no other", function () {
    const readme = fs.readFileSync(path.join(__dirname, "..", "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Exit codes"), readme.indexOf("\n## ", readme.indexOf("## Exit codes") + 1));
    const documented = [...section.matchAll(/^\| (\d+) \|/gm)].map((m) => Number(m[1]));
    expect(documented).to.deep.equal(Object.values(EXIT));
  });
});

describe("the command's output", function () {
  this.timeout(60_000);
  let built: { launcher: string; dir: string };
  before(async () => (built = await buildCli()));
  after(() => fs.rmSync(built.dir, { recursive: true, force: true }));

  it("stops quietly, exit 0, when its reader closes the pipe (skill-gateway --help | head -1)", async function () {
    const child = spawn(process.execPath, [built.launcher, "--help"], { stdio: ["ignore", "pipe", "pipe"] });
    // The reader goes away before the help is written: the write fails with EPIPE.
    child.stdout.destroy();
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect([code, stderr]).to.deep.equal([0, ""]);
  });
});

describe("pinned prices", function () {
  it("caps a pinned skill's calls at the price it was added at; one added free at the smallest amount", function () {
    expect(pinnedCap(buildSkill())).to.equal(0.002);
    expect(pinnedCap(buildSkill({ price: 0 }))).to.equal(0.000001);
  });

  it("turns a 409 price_above_max into one sentence with both prices and how to accept the new one, exit 12", function () {
    const refused = Object.assign(new Error("The skill costs more than this call's max_price."), {
      status: 409,
      code: "price_above_max",
      price: 0.2,
    });
    const error = pinnedPriceError(refused, buildSkill()) as CliError;
    expect(error).to.be.instanceOf(CliError);
    expect([error.message, error.exitCode, error.code]).to.deep.equal([
      "The price of uppercase rose to $0.2 per call since it was added at $0.002: nothing was charged. Re-add the skill to accept the new price: skill-gateway add uppercase",
      EXIT.priceAboveMax,
      "price_above_max",
    ]);
    expect((pinnedPriceError(refused, buildSkill({ price: 0 })) as Error).message).to.contain("since it was added free");
    // Anything else passes through as it is.
    const other = Object.assign(new Error("m"), { status: 409, code: "idempotency_key_in_use" });
    expect(pinnedPriceError(other, buildSkill())).to.equal(other);
  });
});

describe("configuration and input", function () {
  it("prefers flags to the environment", function () {
    const env = { SKILL_GATEWAY_API_KEY: "atom_env", SKILL_GATEWAY_URL: "http://env:1" };
    expect(resolveConfig({ apiKey: "atom_flag", url: "http://flag:2", manifest: "m.json" }, env, "/p")).to.deep.equal({
      apiKey: "atom_flag",
      baseUrl: "http://flag:2",
      manifestFile: "/p/m.json",
      json: false,
    });
    expect(resolveConfig({}, env, "/p")).to.deep.equal({
      apiKey: "atom_env",
      baseUrl: "http://env:1",
      manifestFile: "/p/skill-gateway.json",
      json: false,
    });
  });

  it("takes an input that is a JSON object, and refuses others with exit 2", function () {
    expect(parseInput('{"a":1}')).to.deep.equal({ a: 1 });
    expect(parseInput(undefined)).to.deep.equal({});
    for (const bad of ["[1]", "nope", "3"])
      expect(() => parseInput(bad))
        .to.throw(CliError)
        .with.property("exitCode", EXIT.usage);
  });
});

describe("MCP tools", function () {
  it("names a tool by slug, keeps the schema and gives the price", function () {
    const tool = toolOf(buildSkill());
    expect(tool.name).to.equal("uppercase");
    expect(tool.inputSchema).to.deep.equal(buildSkill().inputSchema);
    expect(tool.description).to.include("$0.002 USD per successful call");
  });

  it("gives a skill without a schema an open object", function () {
    expect(toolOf(buildSkill({ inputSchema: null })).inputSchema).to.deep.equal({ type: "object" });
  });

  it("says the quality measured when the skill was added, in the hosted server's words, and nothing from an older manifest", function () {
    const quality = { calls_7d: 1250, success_rate_7d: 0.9925, p50_ms_7d: 125, p95_ms_7d: 400 };
    expect(toolOf(buildSkill({ quality })).description).to.match(/Succeeded 99\.2% of 1,250 calls this week, p95 400 ms\.$/);
    expect(toolOf(buildSkill({ quality: null })).description).to.match(/Too few calls this week to measure its success rate\.$/);
    expect(toolOf(buildSkill()).description).to.not.match(/Succeeded|Too few/);
    const md = renderSkillMdOf({ ...buildSkill({ quality }), gatewayUrl: "http://127.0.0.1:8787" });
    expect(md).to.contain(
      "## Quality\n\nMeasured by the gateway from its own calls when the skill was added: Succeeded 99.2% of 1,250 calls",
    );
    expect(renderSkillMdOf({ ...buildSkill(), gatewayUrl: "http://127.0.0.1:8787" })).to.not.contain("## Quality");
  });
});

describe("agent locations", function () {
  it("cites documentation for every agent", function () {
    for (const agent of AGENTS) expect(agent.docsUrl, agent.id).to.match(/^https:\/\//);
  });
});
