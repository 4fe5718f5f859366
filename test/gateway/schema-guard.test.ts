import { spawnSync } from "node:child_process";
import path from "node:path";
import { expect } from "chai";
import { SCHEMA_LIMITS, compileSchema, createSchemaCompiler, schemaBoundsProblem, validateWith } from "../../server/gateway/schema-guard";

describe("schema guard (sellers' input schemas are untrusted code)", () => {
  it("matches patterns on a linear-time engine: ^(a+)+$ against 100,000 a's and a '!' finishes (in a child process, killed after 20 s if it backtracks)", () => {
    const code = `
      const { createSchemaCompiler } = require(${JSON.stringify(path.resolve(__dirname, "../../server/gateway/schema-guard"))});
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

  it("names at most a few problems, then how many more", () => {
    const ajv = createSchemaCompiler();
    const compiled = compileSchema(ajv, { type: "array", items: { type: "string" } });
    if (!compiled.ok) throw new Error(compiled.message);
    const problems = validateWith(compiled.validate, Array.from({ length: 50 }, () => 1));
    expect(problems).to.have.length(SCHEMA_LIMITS.problemsReported + 1);
    expect(problems.at(-1)).to.equal("and 45 more");
  });

  describe("schemaBoundsProblem", () => {
    it("accepts an ordinary schema", () => {
      expect(schemaBoundsProblem({ type: "object", properties: { text: { type: "string", maxLength: 1000 } }, required: ["text"] })).to.equal(undefined);
    });

    it("walks a schema nested 100,000 deep without overflowing its own stack", () => {
      let schema: object = {};
      for (let i = 0; i < 100_000; i++) schema = { not: schema };
      expect(schemaBoundsProblem(schema)).to.include("nested too deeply");
    });

    it("refuses a schema over the size bound", () => {
      expect(schemaBoundsProblem({ description: "x".repeat(SCHEMA_LIMITS.bytesMax) })).to.include("larger than");
    });

    it("accepts uniqueItems with a small maxItems", () => {
      expect(schemaBoundsProblem({ type: "array", uniqueItems: true, maxItems: 100 })).to.equal(undefined);
    });
  });
});
