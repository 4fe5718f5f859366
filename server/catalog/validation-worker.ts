/**
 * A worker thread that compiles sellers' schemas and validates inputs (and answers) against them, for the schemas whose
 * work cannot be bounded ahead of time (./validation-pool.ts starts it, from an esbuild bundle: ../threads.ts). The
 * schema rules are the gateway's own (./schema-guard.ts).
 */
import type { ValidateFunction } from "ajv";
import { parentPort } from "node:worker_threads";
import { type ProblemReport, compileSchema, createSchemaCompiler, validateWith } from "./schema-guard";

/** A job as the pool sends it (./validation-pool.ts `start`). */
interface WorkerJob {
  id: number;
  kind: "validate" | "compile";
  key: string;
  schema?: string;
  input?: unknown;
  report: ProblemReport;
}

type Compiled = { ok: true; validate: ValidateFunction } | { ok: false; message: string; unknown?: true };

const port = parentPort!;
const ajv = createSchemaCompiler();
/** Compiled validators by the key the pool gives a schema (its hash); the oldest go first. */
const validators = new Map<string, Compiled>();
const MAX_VALIDATORS = 500;

function validatorFor(key: string, schemaJson: string | undefined, field: "input_schema" | "output_schema"): Compiled {
  let entry = validators.get(key);
  if (entry) return entry;
  if (schemaJson === undefined) return { ok: false, message: "unknown schema", unknown: true };
  entry = compileSchema(ajv, JSON.parse(schemaJson) as object, field);
  validators.set(key, entry);
  if (validators.size > MAX_VALIDATORS) {
    const [oldestKey, oldest] = validators.entries().next().value!;
    validators.delete(oldestKey);
    if (oldest.ok) ajv.removeSchema(oldest.validate.schema as object);
  }
  return entry;
}

port.on("message", (job: WorkerJob) => {
  // An output schema (a skill's promise about its answers) is reported as one, under the same rules.
  const compiled = validatorFor(job.key, job.schema, job.report === "output" ? "output_schema" : "input_schema");
  if (!compiled.ok) {
    port.postMessage({ id: job.id, kind: compiled.unknown ? "unknown" : "invalid_schema", message: compiled.message });
    return;
  }
  if (job.kind === "compile") {
    port.postMessage({ id: job.id, kind: "problems", problems: [] });
    return;
  }
  port.postMessage({ id: job.id, kind: "problems", problems: validateWith(compiled.validate, job.input, job.report) });
});

port.postMessage({ kind: "ready" });
