import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { SkillRegistry, SkillValidationError, type SkillInput } from "../../server/catalog/skills";
import { SqliteSkillsStore } from "../../server/catalog/skills-store";
import { openDatabase, type Db } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { SELLER_ID, buildSkill, ensureSeller } from "../helpers/skills";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A schema for a `summarize` skill: one required string of at most 20 characters. */
const SUMMARIZE_SCHEMA = {
  type: "object",
  properties: { text: { type: "string", maxLength: 20 }, lang: { enum: ["en", "fr"] } },
  required: ["text"],
  additionalProperties: false,
};

const skillRows = (db: Db) => Number(db.prepare("SELECT COUNT(*) FROM skills").pluck().get() as bigint);

describe("SkillRegistry", () => {
  let db: Db;
  let registry: SkillRegistry;

  beforeEach(async () => {
    db = openDatabase(":memory:", SCHEMA);
    await ensureSeller(db);
    registry = new SkillRegistry(new SqliteSkillsStore(db));
  });

  afterEach(() => db.close());

  describe("upsert", () => {
    it("registers a skill with a new UUID and a random 32-byte signing secret", () => {
      const skill = registry.upsert(buildSkill({ slug: "echo", priceMicros: 2_500n, rateLimitPerMin: 10 }));
      expect(skill.id).to.match(UUID);
      expect(skill.signingSecret).to.match(/^[0-9a-f]{64}$/);
      expect(skill).to.deep.include({
        slug: "echo",
        name: "Echo",
        description: "Returns its input",
        priceMicros: 2_500n,
        sellerAccountId: SELLER_ID,
        backendUrl: "http://127.0.0.1:9/echo",
        timeoutMs: 5_000,
        rateLimitPerMin: 10,
        inputSchema: null,
      });
    });

    it("gives each skill its own UUID and secret", () => {
      const a = registry.upsert(buildSkill({ slug: "a" }));
      const b = registry.upsert(buildSkill({ slug: "b" }));
      expect(a.id).not.to.equal(b.id);
      expect(a.signingSecret).not.to.equal(b.signingSecret);
    });

    it("accepts a free skill, an https backend and the shortest and longest slugs", () => {
      expect(registry.upsert(buildSkill({ slug: "a", priceMicros: 0n })).priceMicros).to.equal(0n);
      expect(registry.upsert(buildSkill({ slug: "b", backendUrl: "https://skills.example/b" })).backendUrl).to.equal(
        "https://skills.example/b",
      );
      expect(registry.upsert(buildSkill({ slug: "c".repeat(64) })).slug).to.have.length(64);
      expect(registry.upsert(buildSkill({ slug: "text-to-speech-2" })).slug).to.equal("text-to-speech-2");
    });

    it("keeps the UUID and the secret when a registered slug is upserted again, and updates the rest", () => {
      const first = registry.upsert(buildSkill({ slug: "echo", priceMicros: 1_000n }));
      const second = registry.upsert(
        buildSkill({ slug: "echo", name: "Echo v2", priceMicros: 3_000n, backendUrl: "http://127.0.0.1:9/v2" }),
      );
      expect(second.id).to.equal(first.id);
      expect(second.signingSecret).to.equal(first.signingSecret);
      expect(second).to.deep.include({ name: "Echo v2", priceMicros: 3_000n, backendUrl: "http://127.0.0.1:9/v2" });
      expect(registry.resolve("echo")).to.deep.equal(second);
      expect(skillRows(db)).to.equal(1);
    });

    it("replaces the secret only when a new one is given", () => {
      registry.upsert(buildSkill({ slug: "echo" }));
      expect(registry.upsert(buildSkill({ slug: "echo", signingSecret: "rotated" })).signingSecret).to.equal("rotated");
    });

    it("brings a deactivated skill back under its old UUID", () => {
      const first = registry.upsert(buildSkill({ slug: "echo" }));
      registry.deactivate("echo");
      expect(registry.upsert(buildSkill({ slug: "echo" })).id).to.equal(first.id);
      expect(registry.resolve(first.id)?.slug).to.equal("echo");
    });

    it("stores the input schema, and a new registry on the same database loads it", async () => {
      const skill = registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      expect(skill.inputSchema).to.deep.equal(SUMMARIZE_SCHEMA);
      const reloaded = new SkillRegistry(new SqliteSkillsStore(db));
      expect(reloaded.resolve("summarize")).to.deep.equal(skill);
      expect(await reloaded.validateInput(skill, {})).to.have.length(1);
    });

    const invalid: [string, Partial<SkillInput>, string][] = [
      ["an empty slug", { slug: "" }, "invalid slug"],
      ["an upper-case slug", { slug: "Echo" }, "invalid slug"],
      ["a slug with a space", { slug: "echo skill" }, "invalid slug"],
      ["a slug with an underscore", { slug: "echo_skill" }, "invalid slug"],
      ["a slug starting with a dash", { slug: "-echo" }, "invalid slug"],
      ["a slug ending with a dash", { slug: "echo-" }, "invalid slug"],
      ["a slug of 65 characters", { slug: "e".repeat(65) }, "invalid slug"],
      // A slug shaped like a UUID would be looked up as a UUID and never found by its slug.
      ["a slug shaped like a UUID", { slug: "0b6e0c8e-59f4-4c5e-8a4b-1f2d3c4b5a69" }, "invalid slug"],
      ["a negative price", { priceMicros: -1n }, "price must not be negative"],
      ["a backend URL that is not a URL", { backendUrl: "not a url" }, "invalid backend URL"],
      ["an ftp backend URL", { backendUrl: "ftp://skills.example/echo" }, "must be http(s)"],
      ["a file backend URL", { backendUrl: "file:///etc/passwd" }, "must be http(s)"],
      ["a javascript backend URL", { backendUrl: "javascript:alert(1)" }, "must be http(s)"],
      ["a timeout of 0", { timeoutMs: 0 }, "timeout must be a positive integer"],
      ["a negative timeout", { timeoutMs: -5 }, "timeout must be a positive integer"],
      ["a fractional timeout", { timeoutMs: 1.5 }, "timeout must be a positive integer"],
      ["a NaN timeout", { timeoutMs: Number.NaN }, "timeout must be a positive integer"],
      ["a schema with an unknown type", { inputSchema: { type: "strin" } }, "invalid input schema"],
      ["a schema whose required is not a list", { inputSchema: { type: "object", required: "text" } }, "invalid input schema"],
      ["a schema that is a list", { inputSchema: [] }, "invalid input schema"],
    ];
    for (const [what, overrides, message] of invalid) {
      it(`rejects ${what} with a SkillValidationError, and writes nothing`, () => {
        expect(() => registry.upsert(buildSkill(overrides)))
          .to.throw(SkillValidationError)
          .with.property("message")
          .that.includes(message);
        expect(skillRows(db)).to.equal(0);
        expect(registry.list()).to.deep.equal([]);
      });
    }

    it("keeps working after a skill whose schema has an $id, as every refresh compiles it again", async () => {
      const schema = { $id: "https://skills.example/schemas/summarize", ...SUMMARIZE_SCHEMA };
      const summarize = registry.upsert(buildSkill({ slug: "summarize", inputSchema: schema }));
      registry.upsert(buildSkill({ slug: "summarize", name: "Summarize v2", inputSchema: schema }));
      registry.upsert(buildSkill({ slug: "echo" }));
      registry.refresh();
      expect(registry.list().map((s) => s.slug)).to.deep.equal(["echo", "summarize"]);
      expect(await registry.validateInput(summarize, { text: "hi" })).to.deep.equal([]);
      expect(await registry.validateInput(summarize, { text: 1 })).to.deep.equal(["/text must be string"]);
    });

    it("accepts two skills whose schemas carry the same $id", () => {
      const schema = { $id: "https://skills.example/schemas/text", ...SUMMARIZE_SCHEMA };
      registry.upsert(buildSkill({ slug: "summarize", inputSchema: schema }));
      registry.upsert(buildSkill({ slug: "translate", inputSchema: schema }));
      expect(registry.list()).to.have.length(2);
    });

    it("resolves a schema's local $ref against the schema itself", async () => {
      const schema = {
        $id: "https://skills.example/schemas/point",
        type: "object",
        properties: { at: { $ref: "#/$defs/coordinate" } },
        $defs: { coordinate: { type: "number" } },
      };
      const skill = registry.upsert(buildSkill({ slug: "plot", inputSchema: schema }));
      expect(await registry.validateInput(skill, { at: 1 })).to.deep.equal([]);
      expect(await registry.validateInput(skill, { at: "x" })).to.deep.equal(["/at must be number"]);
    });
  });

  describe("resolve", () => {
    let echoId: string;

    beforeEach(() => {
      echoId = registry.upsert(buildSkill({ slug: "echo" })).id;
      registry.upsert(buildSkill({ slug: "other" }));
    });

    it("finds a skill by its slug", () => {
      expect(registry.resolve("echo")?.id).to.equal(echoId);
    });

    it("finds a skill by its UUID", () => {
      expect(registry.resolve(echoId)?.slug).to.equal("echo");
    });

    it("finds a skill by its UUID written in upper case", () => {
      expect(registry.resolve(echoId.toUpperCase())?.slug).to.equal("echo");
    });

    it("does not match a slug case-insensitively", () => {
      expect(registry.resolve("ECHO")).to.equal(undefined);
    });

    for (const ref of ["unknown", "", "0b6e0c8e-59f4-4c5e-8a4b-1f2d3c4b5a69", "echo ", "ech"]) {
      it(`returns undefined for the unknown reference "${ref}"`, () => {
        expect(registry.resolve(ref)).to.equal(undefined);
      });
    }

    it("lists the active skills by slug", () => {
      expect(registry.list().map((s) => s.slug)).to.deep.equal(["echo", "other"]);
    });
  });

  describe("deactivate", () => {
    it("takes a skill off by slug: it no longer resolves by slug or UUID, nor is listed", () => {
      const skill = registry.upsert(buildSkill({ slug: "echo" }));
      expect(registry.deactivate("echo")).to.equal(true);
      expect(registry.resolve("echo")).to.equal(undefined);
      expect(registry.resolve(skill.id)).to.equal(undefined);
      expect(registry.list()).to.deep.equal([]);
    });

    it("takes a skill off by UUID", () => {
      const skill = registry.upsert(buildSkill({ slug: "echo" }));
      expect(registry.deactivate(skill.id)).to.equal(true);
      expect(registry.resolve("echo")).to.equal(undefined);
    });

    it("keeps the row, so the calls history still points at it", () => {
      const skill = registry.upsert(buildSkill({ slug: "echo" }));
      registry.deactivate("echo");
      expect(db.prepare("SELECT active FROM skills WHERE id = ?").pluck().get(skill.id)).to.equal(0n);
    });

    it("returns false for an unknown skill, or one already deactivated", () => {
      registry.upsert(buildSkill({ slug: "echo" }));
      expect(registry.deactivate("unknown")).to.equal(false);
      registry.deactivate("echo");
      expect(registry.deactivate("echo")).to.equal(false);
    });

    it("leaves the other skills in place", () => {
      registry.upsert(buildSkill({ slug: "echo" }));
      registry.upsert(buildSkill({ slug: "other" }));
      registry.deactivate("echo");
      expect(registry.list().map((s) => s.slug)).to.deep.equal(["other"]);
    });
  });

  describe("validateInput", () => {
    it("returns no problem for an input that fits the schema", async () => {
      const skill = registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      expect(await registry.validateInput(skill, { text: "hello", lang: "en" })).to.deep.equal([]);
    });

    it("names a missing required property", async () => {
      const skill = registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      expect(await registry.validateInput(skill, {})).to.deep.equal(["input must have required property 'text'"]);
    });

    it("names the path of a property of the wrong type", async () => {
      const skill = registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      expect(await registry.validateInput(skill, { text: 42 })).to.deep.equal(["/text must be string"]);
    });

    it("reports the first problem only: validation stops there, so a costly keyword never runs after a cheap one failed", async () => {
      const skill = registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      const problems = await registry.validateInput(skill, { text: "x".repeat(21), lang: "de", extra: true });
      expect(problems).to.have.length(1);
      expect([
        "input must NOT have additional properties",
        "/text must NOT have more than 20 characters",
        "/lang must be equal to one of the allowed values",
      ]).to.include(problems[0]);
    });

    it("describes an input that is not an object at all", async () => {
      const skill = registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      expect(await registry.validateInput(skill, "hello")).to.deep.equal(["input must be object"]);
    });

    it("accepts anything for a skill without a schema", async () => {
      const skill = registry.upsert(buildSkill({ slug: "echo" }));
      expect(await registry.validateInput(skill, { anything: [1, 2, 3] })).to.deep.equal([]);
      expect(await registry.validateInput(skill, null)).to.deep.equal([]);
    });

    it("checks against the schema of the latest upsert", async () => {
      const skill = registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      registry.upsert(buildSkill({ slug: "summarize", inputSchema: { type: "object", required: ["url"] } }));
      expect(await registry.validateInput(skill, { text: "hi" })).to.deep.equal(["input must have required property 'url'"]);
    });
  });

  describe("refresh", () => {
    let dir: string;
    let fileDb: Db;
    let otherDb: Db;

    // A file database and a second connection to it, as the register script has.
    beforeEach(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), "skills-test-"));
      const file = path.join(dir, "gateway.db");
      fileDb = openDatabase(file, SCHEMA);
      await ensureSeller(fileDb);
      otherDb = openDatabase(file, SCHEMA);
    });

    afterEach(() => {
      otherDb.close();
      fileDb.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    it("picks up a skill registered by another connection", async () => {
      const gateway = new SkillRegistry(new SqliteSkillsStore(fileDb));
      const registered = new SkillRegistry(new SqliteSkillsStore(otherDb)).upsert(
        buildSkill({ slug: "echo", inputSchema: SUMMARIZE_SCHEMA }),
      );
      expect(gateway.resolve("echo")).to.equal(undefined);
      gateway.refresh();
      expect(gateway.resolve("echo")).to.deep.equal(registered);
      expect(gateway.resolve(registered.id)?.slug).to.equal("echo");
      expect(await gateway.validateInput(registered, {})).to.deep.equal(["input must have required property 'text'"]);
    });

    it("picks up a price change and a deactivation made by another connection", () => {
      const gateway = new SkillRegistry(new SqliteSkillsStore(fileDb));
      gateway.upsert(buildSkill({ slug: "echo", priceMicros: 1_000n }));
      gateway.upsert(buildSkill({ slug: "other" }));
      const script = new SkillRegistry(new SqliteSkillsStore(otherDb));
      script.upsert(buildSkill({ slug: "echo", priceMicros: 9_000n }));
      script.deactivate("other");
      gateway.refresh();
      expect(gateway.resolve("echo")?.priceMicros).to.equal(9_000n);
      expect(gateway.resolve("other")).to.equal(undefined);
    });
  });
});
