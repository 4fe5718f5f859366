import { spawnSync } from "node:child_process";
import path from "node:path";
import { expect } from "chai";
import { SCHEMA_LIMITS, compileSchema, createSchemaCompiler, schemaBoundsProblem, validateWith } from "../../server/catalog/schema-guard";

describe("schema guard (sellers' input schemas are untrusted code)", () => {
  it("matches patterns on a linear-time engine: ^(a+)+$ against 100,000 a's and a '!' finishes (in a child process, killed after 20 s if it backtracks)", () => {
    const code = `
      const { createSchemaCompiler } = require(${JSON.stringify(path.resolve(__dirname, "../../server/catalog/schema-guard"))});
      const validate = createSchemaCompiler().compile({ type: "string", pattern: "^(a+)+$" });
      process.stdout.write(String(validate("a".repeat(100000) + "!")) + " " + String(validate("aaaa")));`;
    const child = spawnSync(process.execPath, ["-r", "ts-node/register/transpile-only", "-e", code], { timeout: 20_000, encoding: "utf8" });
    expect(child.signal, "the pattern backtracked: the child was killed").to.equal(null);
    expect(child.stdout).to.equal("false true");
  });

  it("refuses patterns a regular engine cannot run (backreferences, lookaround) at compile time", () => {
    const ajv = createSchemaCompiler();
    for (const pattern of ["(a)\\1", "(?=a)b", "(?<!a)b"]) {
      expect(compileSchema(ajv, { type: "string", pattern }).ok, pattern).to.equal(false);
    }
  });

  it("reads JavaScript pattern syntax (\\d, named groups, unicode classes) as JSON Schema means it", () => {
    const ajv = createSchemaCompiler();
    const compiled = compileSchema(ajv, { type: "string", pattern: "^(?<year>\\d{4})-\\p{L}+$" });
    expect(compiled.ok).to.equal(true);
    if (!compiled.ok) return;
    expect(validateWith(compiled.validate, "2026-héllo")).to.deep.equal([]);
    expect(validateWith(compiled.validate, "26-hello")).to.have.length(1);
  });

  it("stops at the first problem and names it", () => {
    const ajv = createSchemaCompiler();
    const compiled = compileSchema(ajv, { type: "array", items: { type: "string" } });
    if (!compiled.ok) throw new Error(compiled.message);
    expect(
      validateWith(
        compiled.validate,
        Array.from({ length: 50 }, () => 1),
      ),
    ).to.deep.equal(["/0 must be string"]);
  });

  it("refuses an array over maxItems before checking uniqueItems (quadratic in its length) on 20,000 objects", () => {
    // In a child process killed after 20 s: checking uniqueness of 20,000 objects took 7.7 s
    // when every keyword ran (allErrors), and grows with the square of the length.
    const code = `
      const { createSchemaCompiler, validateWith } = require(${JSON.stringify(path.resolve(__dirname, "../../server/catalog/schema-guard"))});
      const validate = createSchemaCompiler().compile({ type: "array", items: { type: "object" }, uniqueItems: true, maxItems: 100 });
      process.stdout.write(JSON.stringify(validateWith(validate, Array.from({ length: 20000 }, (_, i) => ({ a: i % 7, b: [i % 5] })))));`;
    const child = spawnSync(process.execPath, ["-r", "ts-node/register/transpile-only", "-e", code], { timeout: 20_000, encoding: "utf8" });
    expect(child.signal, "uniqueness was checked on the whole array").to.equal(null);
    expect(JSON.parse(child.stdout)).to.deep.equal(["input must NOT have more than 100 items"]);
  });

  it("writes nothing to the console for a seller's unknown format (its name is the seller's text)", () => {
    const ajv = createSchemaCompiler();
    const original = { warn: console.warn, log: console.log, error: console.error };
    const printed: unknown[] = [];
    console.warn = console.log = console.error = (...args: unknown[]) => void printed.push(args);
    try {
      compileSchema(ajv, { type: "string", format: "x\n[gateway] forged line" });
    } finally {
      Object.assign(console, original);
    }
    expect(printed).to.deep.equal([]);
  });

  describe("schemaBoundsProblem", () => {
    it("accepts an ordinary schema", () => {
      expect(
        schemaBoundsProblem({ type: "object", properties: { text: { type: "string", maxLength: 1000 } }, required: ["text"] }),
      ).to.equal(undefined);
    });

    it("walks a schema nested 100,000 deep without overflowing its own stack", () => {
      let schema: object = {};
      for (let i = 0; i < 100_000; i++) schema = { not: schema };
      expect(schemaBoundsProblem(schema)).to.include("nested too deeply");
    });

    it("refuses a schema over the size bound", () => {
      expect(schemaBoundsProblem({ description: "x".repeat(SCHEMA_LIMITS.bytesMax) })).to.include("larger than");
    });

    it("accepts uniqueItems with a small maxItems, and a large one for items of a scalar type", () => {
      expect(schemaBoundsProblem({ type: "array", uniqueItems: true, maxItems: 100 })).to.equal(undefined);
      expect(schemaBoundsProblem({ type: "array", items: { type: "string" }, uniqueItems: true, maxItems: 10_000 })).to.equal(undefined);
      expect(schemaBoundsProblem({ type: "array", items: { type: "object" }, uniqueItems: true, maxItems: 1_000 })).to.include(
        "uniqueItems needs a maxItems of at most 100",
      );
      expect(schemaBoundsProblem({ type: "array", items: { type: ["string", "object"] }, uniqueItems: true, maxItems: 1_000 })).to.include(
        "uniqueItems needs",
      );
    });
  });
});
