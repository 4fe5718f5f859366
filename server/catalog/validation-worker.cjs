// A worker thread that compiles sellers' schemas and validates inputs (and answers) against them, for
// the schemas whose work cannot be bounded ahead of time (./validation-pool.ts). Plain CommonJS
// so a worker can start it whatever loaded the main thread; the schema rules themselves are the
// gateway's own (./schema-guard.ts), loaded through ts-node as the gateway is.
"use strict";
const { parentPort } = require("node:worker_threads");

if (!require.extensions[".ts"]) require("ts-node").register({ transpileOnly: true });
const { compileSchema, createSchemaCompiler, validateWith } = require("./schema-guard.ts");

const ajv = createSchemaCompiler();
/** Compiled validators by the key the pool gives a schema (its hash); the oldest go first. */
const validators = new Map();
const MAX_VALIDATORS = 500;

function validatorFor(key, schemaJson, field) {
  let entry = validators.get(key);
  if (entry) return entry;
  if (schemaJson === undefined) return { ok: false, message: "unknown schema", unknown: true };
  entry = compileSchema(ajv, JSON.parse(schemaJson), field);
  validators.set(key, entry);
  if (validators.size > MAX_VALIDATORS) {
    const [oldestKey, oldest] = validators.entries().next().value;
    validators.delete(oldestKey);
    if (oldest.ok) ajv.removeSchema(oldest.validate.schema);
  }
  return entry;
}

parentPort.on("message", (job) => {
  // An output schema (a skill's promise about its answers) is reported as one, under the same rules.
  const compiled = validatorFor(job.key, job.schema, job.report === "output" ? "output_schema" : "input_schema");
  if (!compiled.ok) {
    parentPort.postMessage({ id: job.id, kind: compiled.unknown ? "unknown" : "invalid_schema", message: compiled.message });
    return;
  }
  if (job.kind === "compile") {
    parentPort.postMessage({ id: job.id, kind: "problems", problems: [] });
    return;
  }
  parentPort.postMessage({ id: job.id, kind: "problems", problems: validateWith(compiled.validate, job.input, job.report) });
});

parentPort.postMessage({ kind: "ready" });
