import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { type ManifestSkill, ManifestError, VERSION, isManifestError, parseManifest, pinnedCap, readManifest } from "../src";

/** A manifest skill as the CLI writes it. */
function buildSkill(overrides: Partial<ManifestSkill> = {}): ManifestSkill {
  return {
    id: "id-uppercase",
    slug: "uppercase",
    name: "Uppercase",
    description: "Upper-cases text.",
    price: 0.002,
    currency: "USD",
    inputSchema: { type: "object" },
    agents: ["claude"],
    addedAt: new Date(0).toISOString(),
    files: [{ path: ".claude/skills/uppercase/SKILL.md", sha256: "ab" }],
    dirs: [],
    ...overrides,
  };
}

const text = (value: unknown) => JSON.stringify(value);

describe("the manifest (skill-gateway.json): the one reader, the CLI's and LangChain's", function () {
  it("reads a manifest the CLI wrote, and one written before skills had several agents (agent: x)", function () {
    const skill = buildSkill({ pricing: "usage", quality: { calls_7d: 10, success_rate_7d: 1, p50_ms_7d: 2, p95_ms_7d: 3 } });
    expect(parseManifest(text({ version: 1, skills: [skill] }), "m.json")).to.deep.equal({ version: 1, skills: [skill] });
    const { agents: _agents, ...older } = buildSkill();
    expect(parseManifest(text({ version: 1, skills: [{ ...older, agent: "cursor" }] }), "m.json").skills[0].agents).to.deep.equal([
      "cursor",
    ]);
  });

  for (const [content, fragment] of [
    ["{", "is not valid JSON"],
    ["[]", "is invalid: not a JSON object"],
    [text({ version: 2, skills: [] }), "is invalid: version is 2, this client reads 1"],
    [text({ version: 1, skills: {} }), "skills is not an array"],
    [text({ version: 1, skills: [{ slug: "x" }] }), "skills[0].id is not a string"],
    [text({ version: 1, skills: [buildSkill({ price: "0.1" as unknown as number })] }), "skills[0].price is not a number"],
    [text({ version: 1, skills: [buildSkill({ pricing: "tiered" as "usage" })] }), 'skills[0].pricing is not "fixed" or "usage"'],
    [
      text({ version: 1, skills: [buildSkill({ inputSchema: [] as unknown as object })] }),
      "skills[0].inputSchema is not an object or null",
    ],
    [text({ version: 1, skills: [buildSkill({ files: [{ path: "a" }] as never })] }), "skills[0].files is not a list of {path, sha256}"],
    [text({ version: 1, skills: [buildSkill(), buildSkill()] }), "skill uppercase appears twice"],
  ]) {
    it(`refuses ${content.length > 40 ? `${content.slice(0, 40)}…` : content}: "${fragment}"`, function () {
      let thrown: unknown;
      try {
        parseManifest(content, "/p/skill-gateway.json");
      } catch (error) {
        thrown = error;
      }
      expect(thrown).to.be.instanceOf(ManifestError);
      expect((thrown as ManifestError).message)
        .to.contain("/p/skill-gateway.json")
        .and.contain(fragment);
      expect((thrown as ManifestError).code).to.equal("manifest_invalid");
    });
  }

  it("names a missing file manifest_missing and an unreadable one manifest_unreadable", function () {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sg-sdk-manifest-"));
    try {
      const codeOf = (file: string) => {
        try {
          readManifest(file);
          return "read";
        } catch (error) {
          return isManifestError(error) ? error.code : String(error);
        }
      };
      expect(codeOf(path.join(dir, "skill-gateway.json"))).to.equal("manifest_missing");
      expect(codeOf(dir)).to.equal("manifest_unreadable"); // a folder: EISDIR
      fs.writeFileSync(path.join(dir, "skill-gateway.json"), text({ version: 1, skills: [buildSkill()] }));
      expect(readManifest(path.join(dir, "skill-gateway.json")).skills.map((s) => s.slug)).to.deep.equal(["uppercase"]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("tells a ManifestError by its name and code, so another copy of the SDK's is recognised too", function () {
    const other = Object.assign(new Error("x"), { name: "ManifestError", code: "manifest_invalid" });
    expect([isManifestError(other), isManifestError(new Error("x")), isManifestError({ name: "ManifestError" })]).to.deep.equal([
      true,
      false,
      false,
    ]);
  });

  it("holds a pinned skill to its price, a free one to the smallest amount a cap can name", function () {
    expect([pinnedCap({ price: 0.002 }), pinnedCap({ price: 0 })]).to.deep.equal([0.002, 0.000001]);
  });
});

describe("VERSION", function () {
  it("is the SDK's package.json version, the one place the clients' version is written", function () {
    const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "package.json"), "utf8")) as { version: string };
    expect(VERSION).to.equal(pkg.version);
  });
});
