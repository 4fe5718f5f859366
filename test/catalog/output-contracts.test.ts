import { randomUUID } from "node:crypto";
import { expect } from "chai";
import { SkillRegistry, SkillValidationError } from "../../server/catalog/skills";
import { SkillsStore } from "../../server/catalog/skills-store";
import {
  OUTPUT_PROBLEM_CHARS_MAX,
  compileSchema,
  createSchemaCompiler,
  outputProblem,
  validateWith,
} from "../../server/catalog/schema-guard";
import type { Database } from "../../server/db/sql";
import { buildSkill, ensureSeller } from "../helpers/skills";
import { describeEachEngine } from "../helpers/engines";

/** A promise about answers: a string `text`, and any other property a number. */
const PROMISE = {
  type: "object",
  properties: { text: { type: "string" } },
  required: ["text"],
  additionalProperties: { type: "number" },
};

/** The same promise, with a `$ref`: validated on the validation pool's workers, never on the event loop. */
const PROMISE_WITH_REF = {
  $defs: { text: { type: "string" } },
  type: "object",
  properties: { text: { $ref: "#/$defs/text" } },
  required: ["text"],
  additionalProperties: { type: "number" },
};

describe("schema guard: an answer's problems, for its seller", () => {
  const compiled = compileSchema(createSchemaCompiler(), PROMISE, "output_schema");
  if (!compiled.ok) throw new Error(compiled.message);

  it("names only the first problem, by the place in the schema and what failed there", () => {
    expect(validateWith(compiled.validate, { text: 1 }, "output")).to.deep.equal(["#/properties/text/type: must be string"]);
    expect(validateWith(compiled.validate, {}, "output")).to.deep.equal(["#/required: must have required property 'text'"]);
    expect(validateWith(compiled.validate, { text: "ok" }, "output")).to.deep.equal([]);
  });

  it("never names the answer's own keys or values, which are the buyer's data", () => {
    const [problem] = validateWith(compiled.validate, { text: "ok", "buyer-key": "buyer-value" }, "output");
    expect(problem).to.equal("#/additionalProperties/type: must be number");
    // The input's report names where in the input: the caller's own data, shown to the caller only.
    expect(validateWith(compiled.validate, { text: "ok", "buyer-key": "buyer-value" })).to.deep.equal(["/buyer-key must be number"]);
  });

  it("bounds a problem's length", () => {
    const long = outputProblem({ schemaPath: `#/properties/${"p".repeat(1_000)}/type`, keyword: "type", message: "must be string" });
    expect(long).to.have.length(OUTPUT_PROBLEM_CHARS_MAX);
  });

  it("names an output schema as such when it is refused", () => {
    const refused = compileSchema(createSchemaCompiler(), { $ref: "https://elsewhere.example/s" }, "output_schema");
    expect(refused.ok).to.equal(false);
    if (!refused.ok) expect(refused.message).to.match(/^output_schema's \$ref/);
  });
});

describeEachEngine("SkillRegistry.validateOutput", (engine) => {
  let db: Database;
  let registry: SkillRegistry;
  beforeEach(async () => {
    db = await engine.open();
    await ensureSeller(db);
    registry = await SkillRegistry.open(new SkillsStore(db), { pollMs: 0 });
  });
  afterEach(async () => {
    await registry.close();
  });

  for (const [where, schema] of [
    ["on the event loop", PROMISE],
    ["on a worker (a schema with a $ref)", PROMISE_WITH_REF],
  ] as const) {
    it(`keeps or breaks the promise ${where}, naming the first problem by schema path only`, async () => {
      const skill = await registry.upsert(buildSkill({ slug: "strict", outputSchema: schema }));
      expect(skill.outputSchema).to.deep.equal(schema);
      expect(await registry.validateOutput(skill, { text: "hi", n: 1 })).to.equal(undefined);
      const typeProblem = await registry.validateOutput(skill, { text: 7 });
      expect(typeProblem).to.match(/^#\/(properties\/text\/type|\$defs\/text\/type): must be string$/);
      const extra = await registry.validateOutput(skill, { text: "hi", "buyer-secret": "x" });
      expect(extra).to.equal("#/additionalProperties/type: must be number");
    });
  }

  it("promises nothing for a skill without an output schema", async () => {
    const skill = await registry.upsert(buildSkill({ slug: "echo" }));
    expect(skill.outputSchema).to.equal(null);
    expect(await registry.validateOutput(skill, "anything")).to.equal(undefined);
  });

  it("refuses an output schema out of bounds, or with a pattern RE2 cannot run, at registration", async () => {
    for (const outputSchema of [{ type: "string", pattern: "(?=a)b" }, { $ref: "https://elsewhere.example/s" }]) {
      const error = await registry.upsert(buildSkill({ slug: "strict", outputSchema })).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(SkillValidationError);
      expect((error as Error).message).to.match(/^invalid output schema: /);
    }
    expect(registry.resolve("strict")).to.equal(undefined);
  });

  it("leaves out of the catalogue a skill whose stored output schema today's rules refuse, not the others", async () => {
    const echo = await registry.upsert(buildSkill({ slug: "echo" }));
    const { id: _id, inputSchema: _input, outputSchema: _output, ...fields } = echo;
    await registry.store.upsert(
      {
        ...fields,
        id: randomUUID(),
        slug: "old",
        inputSchemaJson: null,
        outputSchemaJson: JSON.stringify({ $ref: "https://elsewhere.example/s" }),
      },
      Date.now(),
      false,
    );
    const warned: string[] = [];
    const other = await SkillRegistry.open(new SkillsStore(db), { pollMs: 0, warn: (m) => warned.push(m) });
    try {
      expect(other.resolve("old")).to.equal(undefined);
      expect(other.resolve("echo")?.id).to.equal(echo.id);
      expect(warned.join("\n")).to.match(/skill "old" is not served: its output schema is refused/);
    } finally {
      await other.close();
    }
  });
});
