import { randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { SkillRegistry, SkillValidationError, type SkillInput } from "../../server/catalog/skills";
import { SkillsStore } from "../../server/catalog/skills-store";
import type { Database } from "../../server/db/sql";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { SELLER_ID, buildSkill, ensureSeller } from "../helpers/skills";
import { describeEachEngine } from "../helpers/engines";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A schema for a `summarize` skill: one required string of at most 20 characters. */
const SUMMARIZE_SCHEMA = {
  type: "object",
  properties: { text: { type: "string", maxLength: 20 }, lang: { enum: ["en", "fr"] } },
  required: ["text"],
  additionalProperties: false,
};

const skillRows = async (db: Database) => Number(await db.value<bigint>("SELECT COUNT(*) FROM skills"));

/** The error `promise` rejects with (failing the test if it resolves). */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  return expect.fail("expected a rejection");
}

/** Resolves once `check` holds, polling every 10 ms for up to `timeoutMs`. */
async function eventually(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) expect.fail("the condition never held");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describeEachEngine("SkillRegistry", (engine) => {
  let db: Database;
  let registry: SkillRegistry;
  const registries: SkillRegistry[] = [];
  /** A registry on `on`, without the poll unless asked for; closed after the test. */
  const openRegistry = async (on: Database, options: Parameters<typeof SkillRegistry.open>[1] = {}) => {
    const opened = await SkillRegistry.open(new SkillsStore(on), { pollMs: 0, ...options });
    registries.push(opened);
    return opened;
  };

  beforeEach(async () => {
    db = await engine.open();
    await ensureSeller(db);
    registry = await openRegistry(db);
  });

  afterEach(async () => {
    for (const opened of registries.splice(0)) await opened.close();
  });

  describe("upsert", async () => {
    it("registers a skill with a new UUID and a random 32-byte signing secret", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "echo", priceMicros: 2_500n, rateLimitPerMin: 10 }));
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

    it("gives each skill its own UUID and secret", async () => {
      const a = await registry.upsert(buildSkill({ slug: "a" }));
      const b = await registry.upsert(buildSkill({ slug: "b" }));
      expect(a.id).not.to.equal(b.id);
      expect(a.signingSecret).not.to.equal(b.signingSecret);
    });

    it("accepts a free skill, an https backend and the shortest and longest slugs", async () => {
      expect((await registry.upsert(buildSkill({ slug: "a", priceMicros: 0n }))).priceMicros).to.equal(0n);
      expect((await registry.upsert(buildSkill({ slug: "b", backendUrl: "https://skills.example/b" }))).backendUrl).to.equal(
        "https://skills.example/b",
      );
      expect((await registry.upsert(buildSkill({ slug: "c".repeat(64) }))).slug).to.have.length(64);
      expect((await registry.upsert(buildSkill({ slug: "text-to-speech-2" }))).slug).to.equal("text-to-speech-2");
    });

    it("keeps the UUID and the secret when a registered slug is upserted again, and updates the rest", async () => {
      const first = await registry.upsert(buildSkill({ slug: "echo", priceMicros: 1_000n }));
      const second = await registry.upsert(
        buildSkill({ slug: "echo", name: "Echo v2", priceMicros: 3_000n, backendUrl: "http://127.0.0.1:9/v2" }),
      );
      expect(second.id).to.equal(first.id);
      expect(second.signingSecret).to.equal(first.signingSecret);
      expect(second).to.deep.include({ name: "Echo v2", priceMicros: 3_000n, backendUrl: "http://127.0.0.1:9/v2" });
      expect(registry.resolve("echo")).to.deep.equal(second);
      expect(await skillRows(db)).to.equal(1);
    });

    it("replaces the secret only when a new one is given", async () => {
      await registry.upsert(buildSkill({ slug: "echo" }));
      expect((await registry.upsert(buildSkill({ slug: "echo", signingSecret: "rotated" }))).signingSecret).to.equal("rotated");
    });

    it("brings a deactivated skill back under its old UUID", async () => {
      const first = await registry.upsert(buildSkill({ slug: "echo" }));
      await registry.deactivate("echo");
      expect((await registry.upsert(buildSkill({ slug: "echo" }))).id).to.equal(first.id);
      expect(registry.resolve(first.id)?.slug).to.equal("echo");
    });

    it("stores the input schema, and a new registry on the same database loads it", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      expect(skill.inputSchema).to.deep.equal(SUMMARIZE_SCHEMA);
      const reloaded = await openRegistry(db);
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
      it(`rejects ${what} with a SkillValidationError, and writes nothing`, async () => {
        const error = await rejection(registry.upsert(buildSkill(overrides)));
        expect(error).to.be.instanceOf(SkillValidationError);
        expect(error.message).to.include(message);
        expect(await skillRows(db)).to.equal(0);
        expect(registry.list()).to.deep.equal([]);
      });
    }

    it("keeps working after a skill whose schema has an $id, as every refresh compiles it again", async () => {
      const schema = { $id: "https://skills.example/schemas/summarize", ...SUMMARIZE_SCHEMA };
      const summarize = await registry.upsert(buildSkill({ slug: "summarize", inputSchema: schema }));
      await registry.upsert(buildSkill({ slug: "summarize", name: "Summarize v2", inputSchema: schema }));
      await registry.upsert(buildSkill({ slug: "echo" }));
      await registry.refresh();
      expect(registry.list().map((s) => s.slug)).to.deep.equal(["echo", "summarize"]);
      expect(await registry.validateInput(summarize, { text: "hi" })).to.deep.equal([]);
      expect(await registry.validateInput(summarize, { text: 1 })).to.deep.equal(["/text must be string"]);
    });

    it("accepts two skills whose schemas carry the same $id", async () => {
      const schema = { $id: "https://skills.example/schemas/text", ...SUMMARIZE_SCHEMA };
      await registry.upsert(buildSkill({ slug: "summarize", inputSchema: schema }));
      await registry.upsert(buildSkill({ slug: "translate", inputSchema: schema }));
      expect(registry.list()).to.have.length(2);
    });

    it("resolves a schema's local $ref against the schema itself", async () => {
      const schema = {
        $id: "https://skills.example/schemas/point",
        type: "object",
        properties: { at: { $ref: "#/$defs/coordinate" } },
        $defs: { coordinate: { type: "number" } },
      };
      const skill = await registry.upsert(buildSkill({ slug: "plot", inputSchema: schema }));
      expect(await registry.validateInput(skill, { at: 1 })).to.deep.equal([]);
      expect(await registry.validateInput(skill, { at: "x" })).to.deep.equal(["/at must be number"]);
    });
  });

  describe("resolve", async () => {
    let echoId: string;

    beforeEach(async () => {
      echoId = (await registry.upsert(buildSkill({ slug: "echo" }))).id;
      await registry.upsert(buildSkill({ slug: "other" }));
    });

    it("finds a skill by its slug", async () => {
      expect(registry.resolve("echo")?.id).to.equal(echoId);
    });

    it("finds a skill by its UUID", async () => {
      expect(registry.resolve(echoId)?.slug).to.equal("echo");
    });

    it("finds a skill by its UUID written in upper case", async () => {
      expect(registry.resolve(echoId.toUpperCase())?.slug).to.equal("echo");
    });

    it("does not match a slug case-insensitively", async () => {
      expect(registry.resolve("ECHO")).to.equal(undefined);
    });

    for (const ref of ["unknown", "", "0b6e0c8e-59f4-4c5e-8a4b-1f2d3c4b5a69", "echo ", "ech"]) {
      it(`returns undefined for the unknown reference "${ref}"`, async () => {
        expect(registry.resolve(ref)).to.equal(undefined);
      });
    }

    it("lists the active skills by slug", async () => {
      expect(registry.list().map((s) => s.slug)).to.deep.equal(["echo", "other"]);
    });
  });

  describe("deactivate", async () => {
    it("takes a skill off by slug: it no longer resolves by slug or UUID, nor is listed", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "echo" }));
      expect(await registry.deactivate("echo")).to.equal(true);
      expect(registry.resolve("echo")).to.equal(undefined);
      expect(registry.resolve(skill.id)).to.equal(undefined);
      expect(registry.list()).to.deep.equal([]);
    });

    it("takes a skill off by UUID", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "echo" }));
      expect(await registry.deactivate(skill.id)).to.equal(true);
      expect(registry.resolve("echo")).to.equal(undefined);
    });

    it("keeps the row, so the calls history still points at it", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "echo" }));
      await registry.deactivate("echo");
      expect(await db.value("SELECT active FROM skills WHERE id = ?", [skill.id])).to.equal(0n);
    });

    it("returns false for an unknown skill, or one already deactivated", async () => {
      await registry.upsert(buildSkill({ slug: "echo" }));
      expect(await registry.deactivate("unknown")).to.equal(false);
      await registry.deactivate("echo");
      expect(await registry.deactivate("echo")).to.equal(false);
    });

    it("leaves the other skills in place", async () => {
      await registry.upsert(buildSkill({ slug: "echo" }));
      await registry.upsert(buildSkill({ slug: "other" }));
      await registry.deactivate("echo");
      expect(registry.list().map((s) => s.slug)).to.deep.equal(["other"]);
    });
  });

  describe("validateInput", async () => {
    it("returns no problem for an input that fits the schema", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      expect(await registry.validateInput(skill, { text: "hello", lang: "en" })).to.deep.equal([]);
    });

    it("names a missing required property", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      expect(await registry.validateInput(skill, {})).to.deep.equal(["input must have required property 'text'"]);
    });

    it("names the path of a property of the wrong type", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      expect(await registry.validateInput(skill, { text: 42 })).to.deep.equal(["/text must be string"]);
    });

    it("reports the first problem only: validation stops there, so a costly keyword never runs after a cheap one failed", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      const problems = await registry.validateInput(skill, { text: "x".repeat(21), lang: "de", extra: true });
      expect(problems).to.have.length(1);
      expect([
        "input must NOT have additional properties",
        "/text must NOT have more than 20 characters",
        "/lang must be equal to one of the allowed values",
      ]).to.include(problems[0]);
    });

    it("describes an input that is not an object at all", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      expect(await registry.validateInput(skill, "hello")).to.deep.equal(["input must be object"]);
    });

    it("accepts anything for a skill without a schema", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "echo" }));
      expect(await registry.validateInput(skill, { anything: [1, 2, 3] })).to.deep.equal([]);
      expect(await registry.validateInput(skill, null)).to.deep.equal([]);
    });

    it("checks against the schema of the latest upsert", async () => {
      const skill = await registry.upsert(buildSkill({ slug: "summarize", inputSchema: SUMMARIZE_SCHEMA }));
      await registry.upsert(buildSkill({ slug: "summarize", inputSchema: { type: "object", required: ["url"] } }));
      expect(await registry.validateInput(skill, { text: "hi" })).to.deep.equal(["input must have required property 'url'"]);
    });
  });

  describe("refresh", () => {
    let dir: string | undefined;
    let gatewayDb: Database;
    let otherDb: Database;
    let second: PostgresDatabase | undefined;

    // Two handles on one database, as two replicas (or the gateway and the register script) have: two
    // connections to one SQLite file, or two pools on one PostgreSQL database.
    beforeEach(async () => {
      if (engine.name === "sqlite") {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "skills-test-"));
        const file = path.join(dir, "gateway.db");
        gatewayDb = await engine.open({ file });
        await ensureSeller(gatewayDb);
        otherDb = await engine.open({ file });
      } else {
        gatewayDb = await engine.open();
        await ensureSeller(gatewayDb);
        second = new PostgresDatabase(createPostgresPool({ url: engine.lastUrl() }));
        otherDb = second;
      }
    });

    afterEach(async () => {
      for (const opened of registries.splice(0)) await opened.close();
      // The second pool is this suite's to close; the engine closes what it opened, but the files go now.
      await second?.close();
      second = undefined;
      if (dir) {
        await otherDb.close();
        await gatewayDb.close();
        fs.rmSync(dir, { recursive: true, force: true });
        dir = undefined;
      }
    });

    it("picks up a skill registered by another connection", async () => {
      const gateway = await openRegistry(gatewayDb);
      const registered = await (await openRegistry(otherDb)).upsert(buildSkill({ slug: "echo", inputSchema: SUMMARIZE_SCHEMA }));
      expect(gateway.resolve("echo")).to.equal(undefined);
      await gateway.refresh();
      expect(gateway.resolve("echo")).to.deep.equal(registered);
      expect(gateway.resolve(registered.id)?.slug).to.equal("echo");
      expect(await gateway.validateInput(registered, {})).to.deep.equal(["input must have required property 'text'"]);
    });

    it("picks up a price change and a deactivation made by another connection", async () => {
      const gateway = await openRegistry(gatewayDb);
      await gateway.upsert(buildSkill({ slug: "echo", priceMicros: 1_000n }));
      await gateway.upsert(buildSkill({ slug: "other" }));
      const script = await openRegistry(otherDb);
      await script.upsert(buildSkill({ slug: "echo", priceMicros: 9_000n }));
      await script.deactivate("other");
      await gateway.refresh();
      expect(gateway.resolve("echo")?.priceMicros).to.equal(9_000n);
      expect(gateway.resolve("other")).to.equal(undefined);
    });

    it("leaves out a listed skill whose stored schema today's rules refuse, telling it once, not at every reload", async () => {
      const warned: string[] = [];
      const gateway = await openRegistry(gatewayDb, { warn: (message) => warned.push(message) });
      const script = await openRegistry(otherDb);
      const echo = await script.upsert(buildSkill({ slug: "echo" }));
      // A schema stored before the $ref rule existed: the store takes it as it is.
      const { id: _id, inputSchema: _schema, outputSchema: _output, ...fields } = echo;
      const old = JSON.stringify({ type: "object", properties: { a: { $ref: "https://elsewhere.example/a" } } });
      await script.store.upsert(
        { ...fields, id: randomUUID(), slug: "old", inputSchemaJson: old, outputSchemaJson: null },
        Date.now(),
        false,
      );
      // Committed, as another process's write is before anyone else reads it (SQLite's group commit holds a
      // write nobody awaits for up to a batch's delay).
      await otherDb.durable();
      await gateway.refresh();
      await gateway.refresh();
      expect(gateway.list().map((skill) => skill.slug)).to.deep.equal(["echo"]);
      expect(warned).to.have.length(1);
      expect(warned[0]).to.include('skill "old" is not served');
    });

    it("reloads when the table's change stamp moved, and only then", async () => {
      const gateway = await openRegistry(gatewayDb);
      expect(await gateway.refreshIfChanged()).to.equal(false);
      await (await openRegistry(otherDb)).upsert(buildSkill({ slug: "echo" }));
      expect(gateway.resolve("echo")).to.equal(undefined);
      expect(await gateway.refreshIfChanged()).to.equal(true);
      expect(gateway.resolve("echo")?.slug).to.equal("echo");
      expect(await gateway.refreshIfChanged()).to.equal(false);
    });

    it("reloads a catalogue older than maxAgeMs even when the change stamp did not move", async () => {
      let nowMs = 1_000_000;
      const gateway = await openRegistry(gatewayDb, { maxAgeMs: 60_000, now: () => nowMs });
      const script = await openRegistry(otherDb);
      await script.upsert(buildSkill({ slug: "echo", priceMicros: 1_000n }));
      await gateway.refresh();
      // A change that leaves the update time as it was (a rewrite within the same millisecond) leaves the
      // stamp (count, sum of update times) as it was too.
      await otherDb.run("UPDATE skills SET price_micros = 2000 WHERE slug = 'echo'");
      await otherDb.durable();
      expect(await gateway.refreshIfChanged()).to.equal(false);
      expect(gateway.resolve("echo")?.priceMicros).to.equal(1_000n);
      nowMs += 60_000;
      expect(await gateway.refreshIfChanged()).to.equal(true);
      expect(gateway.resolve("echo")?.priceMicros).to.equal(2_000n);
    });

    it("reaches a change made by another replica on its own poll, and at once when invalidated", async () => {
      const polling = await openRegistry(gatewayDb, { pollMs: 20 });
      const told = await openRegistry(gatewayDb);
      const script = await openRegistry(otherDb);
      await script.upsert(buildSkill({ slug: "echo", priceMicros: 1_000n }));
      await eventually(() => polling.resolve("echo")?.priceMicros === 1_000n);
      told.invalidate();
      await eventually(() => told.resolve("echo")?.priceMicros === 1_000n);
      await script.deactivate("echo");
      await eventually(() => polling.resolve("echo") === undefined);
    });

    it("gives two registrations of one new slug at once (two replicas) the same UUID and secret", async () => {
      // Two replicas share one PostgreSQL; SQLite has one writing process, whose registrations interleave.
      const first = await openRegistry(gatewayDb);
      const other = await openRegistry(engine.name === "postgres" ? otherDb : gatewayDb);
      const [a, b] = await Promise.all([
        first.upsert(buildSkill({ slug: "echo", name: "A" })),
        other.upsert(buildSkill({ slug: "echo", name: "B" })),
      ]);
      expect(a.id).to.equal(b.id);
      expect(a.signingSecret).to.equal(b.signingSecret);
      expect(await skillRows(gatewayDb)).to.equal(1);
    });
  });
});
