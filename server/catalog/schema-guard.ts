import Ajv, { type ValidateFunction } from "ajv";
import type { RegExpEngine } from "ajv/dist/types";
import { RE2JS } from "re2js";

/**
 * A seller's input schema is untrusted code the gateway runs on every call, before the
 * caller's balance is even looked at: a zero-balance key is enough to make it run. So:
 *
 * - Its regular expressions (`pattern`, `patternProperties`) run on RE2 (re2js), whose
 *   matching time is linear in the input: `^(a+)+$` cannot backtrack, whatever the input.
 *   Patterns RE2 cannot run (backreferences, lookaround) are refused at listing.
 * - Its size is bounded at listing (SCHEMA_LIMITS): bytes, nesting, subschemas, `$ref`s,
 *   so compiling and walking it is bounded too; `uniqueItems` (quadratic in the array's
 *   length for objects) needs a `maxItems`.
 * - The input it validates is bounded by the request size and by MAX_JSON_DEPTH, checked
 *   before anything else runs (server/http/json-body.ts).
 * - Size alone does not bound the work: `$ref`s share subschemas, and `anyOf: [B, B]` with B
 *   referring back doubles the work at every level of the input (a 122-byte input took
 *   3.5 s). So only schemas whose work is bounded by their size times the input's run on the
 *   event loop (`runsInProcess`: no `$ref`, small, against a small input); every other one is
 *   compiled and run on a worker thread under a deadline (./validation-pool.ts).
 */

export const SCHEMA_LIMITS = {
  /** The schema as JSON. */
  bytesMax: 32 * 1024,
  /** Objects and arrays inside one another. */
  depthMax: 32,
  /** Objects anywhere in the schema (each can be a subschema). */
  nodesMax: 2_000,
  /** `$ref`s anywhere in the schema. */
  refsMax: 64,
  /**
   * The `maxItems` an array with `uniqueItems` must declare, at most: Ajv compares items pair
   * by pair (100 objects: about a millisecond; 1,000: about 100 ms), unless `items` declares a
   * scalar type, which it checks with a hash in linear time (up to scalarUniqueItemsMax).
   */
  uniqueItemsMax: 100,
  scalarUniqueItemsMax: 10_000,
  /** Problems named in one error message. */
  problemsReported: 5,
  /** The most objects a schema validated on the event loop may have (and it has no `$ref`). */
  inProcessNodesMax: 200,
  /** The most (schema objects) x (input values) validated on the event loop: about a few ms. */
  inProcessWorkMax: 200_000,
} as const;

/** Which of a skill's schemas a message names. */
export type SchemaField = "input_schema" | "output_schema";

/** What the call path needs to know about a schema to decide where it runs. */
export interface SchemaProfile {
  /** Objects in the schema. */
  nodes: number;
  /** Whether it has a `$ref` (or `$dynamicRef`/`$recursiveRef`): shared subschemas, unbounded work. */
  refs: boolean;
}

/** The profile of a schema already within bounds. */
export function profileSchema(schema: unknown): SchemaProfile {
  let nodes = 0;
  let refs = false;
  const stack: unknown[] = [schema];
  while (stack.length > 0) {
    const value = stack.pop();
    if (value === null || typeof value !== "object") continue;
    if (!Array.isArray(value)) {
      nodes++;
      const record = value as Record<string, unknown>;
      if ("$ref" in record || "$dynamicRef" in record || "$recursiveRef" in record) refs = true;
    }
    for (const child of Object.values(value)) stack.push(child);
  }
  return { nodes, refs };
}

/** Whether a schema can be compiled on the event loop: its cost is bounded by its small size. */
export function compilesInProcess(profile: SchemaProfile): boolean {
  return !profile.refs && profile.nodes <= SCHEMA_LIMITS.inProcessNodesMax;
}

/** Whether validating `input` against the schema is certainly cheap enough for the event loop. */
export function runsInProcess(profile: SchemaProfile, input: unknown): boolean {
  if (!compilesInProcess(profile)) return false;
  return countValues(input, Math.floor(SCHEMA_LIMITS.inProcessWorkMax / Math.max(1, profile.nodes))) !== undefined;
}

/** The values (objects, arrays, scalars) in a JSON value, or undefined once there are more than `max`. */
export function countValues(value: unknown, max: number): number | undefined {
  let count = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (++count > max) return undefined;
    if (item !== null && typeof item === "object") for (const child of Object.values(item)) stack.push(child);
  }
  return count;
}

/** Ajv's regular-expression engine: RE2 (linear time) in place of the built-in backtracking RegExp. */
const re2: RegExpEngine = Object.assign(
  (pattern: string, _flags: string) => {
    const compiled = RE2JS.compile(RE2JS.translateRegExp(pattern));
    return { test: (s: string) => compiled.test(s) };
  },
  // Only used by Ajv's standalone code generation, which the gateway does not use.
  { code: "re2js.RE2JS" },
);

/** An Ajv instance for sellers' schemas. */
export function createSchemaCompiler(): Ajv {
  // addUsedSchema: false keeps a schema's `$id` out of the compiler's registry. Otherwise
  // compiling a schema again (every refresh does) or two skills' schemas sharing an `$id`
  // throws "schema with key or id ... already exists", and no skill can be written after.
  // loadSchema is not set: a `$ref` to another document cannot make the gateway fetch it.
  // allErrors is off: validation stops at the first failure, so a `maxItems` that fails stops
  // an array before its quadratic `uniqueItems` runs (Ajv's own advice for untrusted data).
  // logger is off: Ajv would print a seller's unknown format names, newlines and all, to our logs.
  return new Ajv({ allErrors: false, strict: false, addUsedSchema: false, logger: false, code: { regExp: re2 } });
}

/**
 * Says what makes a schema too big or too costly to validate with; undefined when it is within bounds. `field` names
 * the schema in the message: a skill's `input_schema` or its `output_schema`, both held to the same bounds.
 */
export function schemaBoundsProblem(schema: unknown, field: SchemaField = "input_schema"): string | undefined {
  let nodes = 0;
  let refs = 0;
  // An explicit stack: the walk itself must not be the thing that overflows.
  const stack: Array<{ value: unknown; depth: number }> = [{ value: schema, depth: 1 }];
  while (stack.length > 0) {
    const { value, depth } = stack.pop()!;
    if (value === null || typeof value !== "object") continue;
    if (depth > SCHEMA_LIMITS.depthMax) return `${field} is nested too deeply (at most ${SCHEMA_LIMITS.depthMax} levels)`;
    if (!Array.isArray(value)) {
      if (++nodes > SCHEMA_LIMITS.nodesMax) return `${field} has more than ${SCHEMA_LIMITS.nodesMax} objects`;
      const record = value as Record<string, unknown>;
      if (typeof record.$ref === "string") {
        if (++refs > SCHEMA_LIMITS.refsMax) return `${field} has more than ${SCHEMA_LIMITS.refsMax} $refs`;
        if (!record.$ref.startsWith("#"))
          return `${field}'s $ref "${record.$ref.slice(0, 100)}" must point inside the schema (start with #)`;
      }
      if (record.uniqueItems === true) {
        const max = record.maxItems;
        const bound = hasScalarItems(record) ? SCHEMA_LIMITS.scalarUniqueItemsMax : SCHEMA_LIMITS.uniqueItemsMax;
        if (typeof max !== "number" || max > bound) {
          return `uniqueItems needs a maxItems of at most ${SCHEMA_LIMITS.uniqueItemsMax} beside it (${SCHEMA_LIMITS.scalarUniqueItemsMax} when items are of one scalar type): checking uniqueness of objects is quadratic in the array's length`;
        }
      }
    }
    for (const child of Object.values(value)) stack.push({ value: child, depth: depth + 1 });
  }
  // Only now that its depth is known to be small can it be serialized without risk.
  if (Buffer.byteLength(JSON.stringify(schema)) > SCHEMA_LIMITS.bytesMax) return `${field} is larger than ${SCHEMA_LIMITS.bytesMax} bytes`;
  return undefined;
}

const SCALAR_TYPES = new Set(["string", "number", "integer", "boolean", "null"]);

/** Whether an array schema's `items` declares one scalar type (Ajv then checks uniqueness with a hash). */
function hasScalarItems(schema: Record<string, unknown>): boolean {
  const items = schema.items;
  if (items === null || typeof items !== "object" || Array.isArray(items)) return false;
  const type = (items as Record<string, unknown>).type;
  return typeof type === "string" && SCALAR_TYPES.has(type);
}

/** Compiles a schema within bounds, or says why it cannot be used. */
export function compileSchema(
  ajv: Ajv,
  schema: object,
  field: SchemaField = "input_schema",
): { ok: true; validate: ValidateFunction } | { ok: false; message: string } {
  const problem = schemaBoundsProblem(schema, field);
  if (problem) return { ok: false, message: problem };
  try {
    return { ok: true, validate: ajv.compile(schema) };
  } catch (error) {
    // A RangeError here is a stack overflow inside the compiler: a pathological schema.
    const message = error instanceof RangeError ? "the schema is too deeply recursive to compile" : (error as Error).message;
    return { ok: false, message: message.slice(0, 300) };
  }
}

/**
 * How problems are reported: `input` names where in the caller's input each is (the caller sees its own data);
 * `output` names only the first, by the place in the seller's schema and the keyword that failed (`outputProblem`),
 * never anything of the answer's, which is the buyer's data.
 */
export type ProblemReport = "input" | "output";

/** The most characters of an output problem kept (the schema path of a deep schema can be long). */
export const OUTPUT_PROBLEM_CHARS_MAX = 300;

/**
 * The first problem of an answer, for its seller: the failing keyword's place in the seller's own schema (Ajv's
 * schemaPath, which holds only the schema's words) and Ajv's message, which is built from the schema alone (a type, a
 * bound, a required property's name, a pattern or format), never from the value. The instance path is left out: it
 * holds the answer's own keys (an echoed map, `additionalProperties`), which are the buyer's data.
 */
export function outputProblem(error: { schemaPath: string; keyword: string; message?: string }): string {
  const text = `${error.schemaPath}: ${error.message ?? `fails ${error.keyword}`}`;
  return text.length > OUTPUT_PROBLEM_CHARS_MAX ? `${text.slice(0, OUTPUT_PROBLEM_CHARS_MAX - 1)}\u2026` : text;
}

/** Runs a compiled validator; returns the problems (at most a few, named, or the first for `output`), or [] when the value fits. */
export function validateWith(validate: ValidateFunction, input: unknown, report: ProblemReport = "input"): string[] {
  let valid: boolean;
  try {
    valid = validate(input) as boolean;
  } catch (error) {
    // Bounded inputs and schemas make this unreachable in practice; if a recursion still
    // overflows, the input is refused rather than the gateway answering 500.
    if (error instanceof RangeError) return [`${report === "input" ? "input" : "the answer"} is too deeply nested for this skill's schema`];
    throw error;
  }
  if (valid) return [];
  const errors = validate.errors ?? [];
  if (report === "output") return [errors[0] ? outputProblem(errors[0]) : "the answer does not match the output schema"];
  const named = errors.slice(0, SCHEMA_LIMITS.problemsReported).map((e) => `${e.instancePath || "input"} ${e.message}`.trim());
  if (errors.length > named.length) named.push(`and ${errors.length - named.length} more`);
  return named;
}
