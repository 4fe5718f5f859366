// In a clone the SDK is not built: its source stands in (clients/typescript/source.cjs).
import "../../typescript/source.cjs";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Skill, SkillGateway } from "@skill-gateway/sdk";
import { expect } from "chai";
import { AGENTS, detectAgents, resolveAgents } from "../src/agents";
import { addSkills, removeSkills } from "../src/commands";
import { CliError, EXIT } from "../src/errors";
import { readManifest } from "../src/manifest";

/** A marketplace of one skill, `echo`: addSkills needs only skills.get. */
function fakeMarketplace(): SkillGateway {
  const echo = {
    id: "00000000-0000-4000-8000-0000000000e1",
    slug: "echo",
    name: "Echo",
    description: "Echoes its input.",
    price_per_call: 0.001,
    currency: "USD",
    input_schema: null,
  } as unknown as Skill;
  return {
    skills: {
      get: async (ref: string) => {
        if (ref !== "echo") throw new CliError(`no skill ${ref}`, EXIT.notFound, "skill_not_found");
        return echo;
      },
    },
  } as unknown as SkillGateway;
}

describe("skills for every agent a project uses", function () {
  let dir: string;
  let manifestFile: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sg-agents-"));
    manifestFile = path.join(dir, "skill-gateway.json");
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const files = () => readManifest(manifestFile).skills.flatMap((s) => s.files.map((f) => f.path));

  it("detects the agents a project has by their folders", function () {
    expect(detectAgents(dir)).to.deep.equal([]);
    for (const marker of [".claude", ".cursor", ".codex"]) fs.mkdirSync(path.join(dir, marker));
    fs.writeFileSync(path.join(dir, ".opencode"), "a file, not the folder");
    expect(detectAgents(dir)).to.deep.equal(["claude", "cursor", "codex"]);
  });

  it("writes for the detected agents when --agent is not given, one file per distinct folder", async function () {
    fs.mkdirSync(path.join(dir, ".claude"));
    fs.mkdirSync(path.join(dir, ".codex"));
    const result = await addSkills(fakeMarketplace(), manifestFile, ["echo"]);
    expect(result.added[0].paths).to.deep.equal([".claude/skills/echo/SKILL.md", ".agents/skills/echo/SKILL.md"]);
    expect(readManifest(manifestFile).skills[0].agents).to.deep.equal(["claude", "codex"]);
  });

  it("with no agent folder and no --agent, writes for the cross-agent folder and Claude Code's", async function () {
    await addSkills(fakeMarketplace(), manifestFile, ["echo"]);
    expect(files()).to.deep.equal([".agents/skills/echo/SKILL.md", ".claude/skills/echo/SKILL.md"]);
  });

  it("--agent all writes into every agent's folder once (Codex shares .agents/skills), and remove takes every copy away", async function () {
    fs.mkdirSync(path.join(dir, ".claude")); // detected, but --agent decides
    const result = await addSkills(fakeMarketplace(), manifestFile, ["echo"], { agents: ["all"] });
    expect(result.added[0].agents).to.deep.equal(AGENTS.map((a) => a.id));
    expect(files()).to.deep.equal([
      ".agents/skills/echo/SKILL.md",
      ".claude/skills/echo/SKILL.md",
      ".cursor/skills/echo/SKILL.md",
      ".opencode/skills/echo/SKILL.md",
    ]);
    const copies = files().map((f) => fs.readFileSync(path.join(dir, f), "utf8"));
    expect(new Set(copies).size).to.equal(1);

    const removed = removeSkills(manifestFile, ["echo"]);
    expect(removed.removed[0].removed).to.have.length(4);
    expect(fs.readdirSync(dir).sort()).to.deep.equal([".claude", "skill-gateway.json"]); // .claude was there before
  });

  it("a re-add for other agents moves the skill: the old copies go, the new ones are written", async function () {
    await addSkills(fakeMarketplace(), manifestFile, ["echo"], { agents: ["claude"] });
    await addSkills(fakeMarketplace(), manifestFile, ["echo"], { agents: ["cursor"] });
    expect(files()).to.deep.equal([".cursor/skills/echo/SKILL.md"]);
    expect(fs.existsSync(path.join(dir, ".claude"))).to.equal(false);
  });

  it("refuses an unknown agent with exit 2, naming the known ones, and writes nothing", async function () {
    const error = await addSkills(fakeMarketplace(), manifestFile, ["echo"], { agents: ["claude", "notepad"] }).then(
      () => undefined,
      (e: CliError) => e,
    );
    expect([error?.exitCode, error?.code]).to.deep.equal([EXIT.usage, "unknown_agent"]);
    expect(error?.message).to.equal('Unknown agent "notepad"; one of: agents, claude, cursor, codex, opencode, all.');
    expect(fs.readdirSync(dir)).to.deep.equal([]);
    expect(() => resolveAgents(["all", "claude"], dir)).to.not.throw();
  });

  it("reads a manifest written for one agent (`agent`) as written for that one", function () {
    const skill = { id: "1", slug: "echo", name: "Echo", description: "", price: 0.001, currency: "USD", inputSchema: null };
    fs.writeFileSync(
      manifestFile,
      JSON.stringify({ version: 1, skills: [{ ...skill, agent: "claude", addedAt: "x", files: [], dirs: [] }] }),
    );
    expect(readManifest(manifestFile).skills[0].agents).to.deep.equal(["claude"]);
  });
});
