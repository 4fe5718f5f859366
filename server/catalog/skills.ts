import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { ValidateFunction } from "ajv";
import {
  type SchemaProfile,
  compileSchema,
  compilesInProcess,
  createSchemaCompiler,
  profileSchema,
  runsInProcess,
  type SchemaField,
  schemaBoundsProblem,
  validateWith,
} from "./schema-guard";
import type { SkillPricing, SkillRecord, SkillsStore } from "./skills-store";
import { ValidationPool } from "./validation-pool";
import { GatewayError, type Refusal } from "../errors";
import { type TextRule, checkText, excerpt, hasForbiddenCharacters } from "../text";
import { UUID_PATTERN } from "../db/ids";

/**
 * How a skill's input is validated: on the event loop with a validator compiled here (small
 * schemas without `$ref`, when the input is small too), else on the validation pool's workers
 * under a deadline (./validation-pool.ts). Both are kept: a small schema meets a big input too.
 */
interface SchemaEntry {
  profile: SchemaProfile;
  /** The schema's JSON text, and its SHA-256: the key the workers cache it under. */
  json: string;
  key: string;
  local?: ValidateFunction;
}

const schemaKey = (json: string) => createHash("sha256").update(json).digest("hex");

/** A skill as the call path uses it: the stored record with its schemas parsed. */
export interface Skill extends Omit<SkillRecord, "inputSchemaJson" | "outputSchemaJson"> {
  inputSchema: object | null;
  /** What the skill promises its 2xx answers are (its output contract): one that is not is a 502, not charged. */
  outputSchema: object | null;
}

export interface SkillInput {
  slug: string;
  name: string;
  description?: string;
  /** `fixed` (the default): `priceMicros` per call; `usage`: what the backend reports, at most `priceMicros`. */
  pricing?: SkillPricing;
  priceMicros: bigint;
  sellerAccountId: string;
  backendUrl: string;
  timeoutMs: number;
  rateLimitPerMin?: number | null;
  inputSchema?: object | null;
  outputSchema?: object | null;
  signingSecret?: string;
}

/** A skill that could not be stored or called as given: invalid_request, its message safe to show the seller. */
export class SkillValidationError extends GatewayError {
  override name = "SkillValidationError";
  constructor(message: string) {
    super("invalid_request", message);
  }
}

const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;
const UUID = UUID_PATTERN;

/** Whether `ref` has the shape of a skill reference (a slug or a UUID): anything else names no skill. */
export const isSkillRef = (ref: string): boolean => SLUG.test(ref) || UUID.test(ref);

/**
 * A skill's name and description reach every buyer and agent (the marketplace, MCP tool lists, x402 discovery,
 * usage CSVs): they are text under the policy of ../text.ts. The name is one line; the description is prose.
 */
export const SKILL_NAME_RULE: TextRule = { field: "name", minChars: 1, maxChars: 100, kind: "name" };
export const SKILL_DESCRIPTION_RULE: TextRule = { field: "description", minChars: 0, maxChars: 2_000, kind: "prose" };

/** A skill's name and description as they are stored (normalized), or why they cannot be. */
export function checkSkillText(fields: {
  name: string;
  description?: string;
}): { ok: true; name: string; description: string } | Refusal<"invalid_request"> {
  const name = checkText(fields.name, SKILL_NAME_RULE);
  if (!name.ok) return name;
  const description = checkText(fields.description ?? "", SKILL_DESCRIPTION_RULE);
  if (!description.ok) return description;
  return { ok: true, name: name.text, description: description.text };
}

/**
 * What makes the words of an input schema unfit to show: a `title` or `description` (shown in the marketplace's form
 * and in agents' tool lists) or a property name (a form's label) holding a character the text policy refuses
 * (../text.ts; line breaks are allowed in descriptions). Checked at listing only: a stored schema is not judged again.
 */
export function schemaTextProblem(schema: unknown): string | undefined {
  const stack: unknown[] = [schema];
  while (stack.length > 0) {
    const value = stack.pop();
    if (value === null || typeof value !== "object") continue;
    if (!Array.isArray(value)) {
      const record = value as Record<string, unknown>;
      for (const key of ["title", "description"]) {
        const text = record[key];
        if (typeof text === "string" && hasForbiddenCharacters(text, key === "description"))
          return `its ${key} "${excerpt(text, 40)}" holds a control or invisible character (shown as \uFFFD)`;
      }
      const properties = record.properties;
      if (properties !== null && typeof properties === "object" && !Array.isArray(properties)) {
        const name = Object.keys(properties).find((key) => hasForbiddenCharacters(key));
        if (name !== undefined) return `its property name "${excerpt(name, 40)}" holds a control or invisible character (shown as \uFFFD)`;
      }
    }
    for (const child of Object.values(value)) stack.push(child);
  }
  return undefined;
}

function toSkill(record: SkillRecord): Skill {
  const { inputSchemaJson, outputSchemaJson, ...rest } = record;
  return {
    ...rest,
    inputSchema: inputSchemaJson === null ? null : JSON.parse(inputSchemaJson),
    outputSchema: outputSchemaJson === null ? null : JSON.parse(outputSchemaJson),
  };
}

/** What the first line of a refused schema's message says, by field. */
const SCHEMA_NAME: Record<SchemaField, string> = { input_schema: "input schema", output_schema: "output schema" };

/** How the catalogue keeps up with writes made elsewhere (another replica, the register script). */
export interface SkillRegistryOptions {
  /** Told about a listed skill the catalogue cannot serve (a schema stored before today's rules), and about failed reloads. */
  warn?: (message: string) => void;
  /** Where schemas too costly for the event loop run; by default one worker, 250 ms a validation. */
  validation?: ValidationPool;
  /**
   * How often the registry asks the table whether it changed (`refreshIfChanged`), on a timer of its own
   * that close() stops; 0 for no timer (a script, a test). Default 2 s: a change made by another replica
   * reaches this one within that long even when no message announces it.
   */
  pollMs?: number;
  /**
   * A check reloads the whole catalogue when its last load is older than this, whatever the change stamp
   * says: the backstop for the one change the stamp cannot see (./skills-store.ts). Default 60 s.
   */
  maxAgeMs?: number;
  now?: () => number;
}

/**
 * The skill catalogue. Skills are read far more often than written, so the active ones are
 * held in memory, indexed by slug and by UUID, with their input schemas compiled once; the
 * call path's `resolve` reads only memory. Every write here reloads the cache before it
 * resolves. Writes made elsewhere (another replica, the register script) arrive three ways:
 * `invalidate()` when a message announces one, the registry's own poll of the table's change
 * stamp every `pollMs`, and a full reload once the cache is older than `maxAgeMs`.
 */
export class SkillRegistry {
  private bySlug = new Map<string, Skill>();
  private byId = new Map<string, Skill>();
  private schemas = new Map<string, SchemaEntry>();
  /** The output schemas (output contracts), by skill id, run exactly as input schemas are. */
  private outputSchemas = new Map<string, SchemaEntry>();
  /** Validators compiled on the event loop, by schema text, kept from one refresh to the next. */
  private compiled = new Map<string, ValidateFunction>();
  /** Sellers' schemas run on RE2 and within bounds (./schema-guard.ts). */
  private readonly ajv = createSchemaCompiler();
  readonly validation: ValidationPool;
  private readonly warn: (message: string) => void;
  private readonly maxAgeMs: number;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<unknown> | undefined;
  /** The change stamp and the time of the last load. */
  private stamp = "";
  private loadedAtMs = 0;
  /** The load running now, and the one queued behind it (see refresh()). */
  private loading: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  /** The refused schemas already told to `warn` (skill id and schema text), so a reload does not repeat them. */
  private refused = new Set<string>();

  private constructor(
    /** The catalogue's table; the registry's `store` is also what SellerSkills writes through. */
    readonly store: SkillsStore,
    options: SkillRegistryOptions,
  ) {
    const warn = options.warn ?? (() => {});
    this.warn = warn;
    this.maxAgeMs = options.maxAgeMs ?? 60_000;
    this.now = options.now ?? Date.now;
    this.validation =
      options.validation ??
      new ValidationPool({
        validateTimeoutMs: 250,
        compileTimeoutMs: 2_000,
        log: (message, error) => warn(`${message}${error ? `: ${String(error)}` : ""}`),
      });
  }

  /** The catalogue, loaded; polling the table every `pollMs` (default 2 s) until close(). */
  static async open(store: SkillsStore, options: SkillRegistryOptions = {}): Promise<SkillRegistry> {
    const registry = new SkillRegistry(store, options);
    await registry.refresh();
    const pollMs = options.pollMs ?? 2_000;
    if (pollMs > 0) {
      registry.timer = setInterval(() => {
        if (registry.polling) return;
        registry.polling = registry
          .refreshIfChanged()
          .catch((error) => registry.warn(`reloading the skill catalogue failed; will retry: ${String(error)}`))
          .finally(() => (registry.polling = undefined));
      }, pollMs);
      registry.timer.unref();
    }
    return registry;
  }

  /** Stops the poll and the validation workers. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.polling;
    await this.validation.close();
  }

  /**
   * Reloads the catalogue if the skills table changed since the last load (e.g. written by another
   * replica or the register script), or if the last load is older than `maxAgeMs`. Cheap enough to
   * poll every few seconds: one aggregate query when nothing changed.
   */
  async refreshIfChanged(): Promise<boolean> {
    if (this.now() - this.loadedAtMs < this.maxAgeMs && (await this.store.changeStamp()) === this.stamp) return false;
    await this.refresh();
    return true;
  }

  /**
   * Told about each skill this replica wrote (its id), once this replica's catalogue has it: the composition
   * root announces it to the other replicas (a `skill_changed` message on Redis), which `invalidate()`.
   */
  onChanged?: (skillId: string) => void;

  /** After a write of skill `skillId` here: reloads this replica's catalogue, then tells `onChanged`. */
  async changed(skillId: string): Promise<void> {
    await this.refresh();
    this.onChanged?.(skillId);
  }

  /**
   * Marks the catalogue stale, for when another replica announces a change: reloads it in the
   * background (a failure is told to `warn`; the poll tries again).
   */
  invalidate(): void {
    this.refresh().catch((error) => this.warn(`reloading the skill catalogue failed; will retry: ${String(error)}`));
  }

  /**
   * Reloads the catalogue; resolves once a load that began after this call has finished, so a
   * caller that just wrote sees its write. One load runs at a time; calls made meanwhile share
   * the one load queued behind it.
   */
  refresh(): Promise<void> {
    if (!this.loading) {
      this.loading = this.load().finally(() => (this.loading = undefined));
      return this.loading;
    }
    // The running load may have read the table before the caller's write: one more after it.
    this.queued ??= this.loading
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined;
        return this.refresh();
      });
    return this.queued;
  }

  private async load(): Promise<void> {
    // The stamp is read first: a write landing between the two reads moves the stamp again, so the
    // next check reloads rather than keeping a catalogue that misses it.
    const stamp = await this.store.changeStamp();
    const loadedAtMs = this.now();
    const rows = await this.store.listed();
    const bySlug = new Map<string, Skill>();
    const byId = new Map<string, Skill>();
    const schemas = new Map<string, SchemaEntry>();
    const outputSchemas = new Map<string, SchemaEntry>();
    const compiled = new Map<string, ValidateFunction>();
    const refused = new Set<string>();
    for (const row of rows) {
      const skill = toSkill(row);
      // A schema listed before the current rules may be refused by them now. That skill is
      // left out of the live catalogue, not the whole catalogue with it.
      const entries: Array<{ field: SchemaField; json: string | null; parsed: object | null; into: Map<string, SchemaEntry> }> = [
        { field: "input_schema", json: row.inputSchemaJson, parsed: skill.inputSchema, into: schemas },
        { field: "output_schema", json: row.outputSchemaJson, parsed: skill.outputSchema, into: outputSchemas },
      ];
      let served = true;
      for (const { field, json, parsed, into } of entries) {
        if (json === null) continue;
        const entry = this.entryFor(json, parsed, compiled, field);
        if (typeof entry === "string") {
          const key = `${skill.id}\n${field}\n${json}`;
          refused.add(key);
          if (!this.refused.has(key))
            this.warn(`skill "${skill.slug}" is not served: its ${SCHEMA_NAME[field]} is refused (${entry}); its seller must edit it`);
          served = false;
          break;
        }
        into.set(skill.id, entry);
      }
      if (!served) {
        schemas.delete(skill.id);
        outputSchemas.delete(skill.id);
        continue;
      }
      bySlug.set(skill.slug, skill);
      byId.set(skill.id.toLowerCase(), skill);
    }
    // Validators no skill uses any more leave the compiler's cache (keyed by schema object).
    for (const [json, validate] of this.compiled) if (!compiled.has(json)) this.ajv.removeSchema(validate.schema);
    this.compiled = compiled;
    this.bySlug = bySlug;
    this.byId = byId;
    this.schemas = schemas;
    this.outputSchemas = outputSchemas;
    this.refused = refused;
    this.stamp = stamp;
    this.loadedAtMs = loadedAtMs;
  }

  /**
   * A schema's entry: bounds checked, and compiled here if it is small and has no `$ref`
   * (reusing the previous refresh's validator for the same text). A schema for the workers is
   * compiled there, on first use. Returns why it is refused instead, as text.
   */
  private entryFor(
    json: string,
    schema: unknown,
    compiled: Map<string, ValidateFunction>,
    field: SchemaField = "input_schema",
  ): SchemaEntry | string {
    const problem = schemaBoundsProblem(schema, field);
    if (problem) return problem;
    const profile = profileSchema(schema);
    const entry: SchemaEntry = { profile, json, key: schemaKey(json) };
    if (compilesInProcess(profile)) {
      let validate = compiled.get(json) ?? this.compiled.get(json);
      if (!validate) {
        const result = compileSchema(this.ajv, schema as object, field);
        if (!result.ok) return result.message;
        validate = result.validate;
      }
      compiled.set(json, validate);
      entry.local = validate;
    }
    return entry;
  }

  /** Finds an active skill by slug or UUID. */
  resolve(ref: string): Skill | undefined {
    return UUID.test(ref) ? this.byId.get(ref.toLowerCase()) : this.bySlug.get(ref);
  }

  list(): Skill[] {
    return [...this.bySlug.values()];
  }

  /**
   * Checks a call's input against the skill's JSON Schema; returns the problems, or [] when it
   * fits. A validation too costly to finish in its deadline is a problem too: the input is
   * refused, uncharged, and the gateway goes on serving.
   */
  async validateInput(skill: Skill, input: unknown): Promise<string[]> {
    const entry = this.schemas.get(skill.id);
    if (!entry) return [];
    if (entry.local && runsInProcess(entry.profile, input)) return validateWith(entry.local, input);
    const outcome = await this.validation.validate(entry.key, entry.json, input);
    if (outcome.kind === "problems") return outcome.problems;
    if (outcome.kind === "invalid_schema") return [`the skill's input schema cannot be used (${outcome.message}); its seller must fix it`];
    return [
      `the input could not be checked against the skill's schema in time (${outcome.message}); its seller should simplify the schema`,
    ];
  }

  /**
   * Checks a backend's 2xx answer against the skill's output schema (its output contract), as inputs are checked:
   * on the event loop when that is certainly cheap, else on the validation pool under its deadline. Returns the first
   * problem, named by the schema's path and keyword only (./schema-guard.ts `outputProblem`: nothing of the answer,
   * which is the buyer's data), or undefined when the answer keeps the promise or the skill made none. An answer that
   * cannot be checked in time is not shown to keep it: the call is not charged, and the seller is told why.
   */
  async validateOutput(skill: Skill, data: unknown): Promise<string | undefined> {
    const entry = this.outputSchemas.get(skill.id);
    if (!entry) return undefined;
    if (entry.local && runsInProcess(entry.profile, data)) return validateWith(entry.local, data, "output")[0];
    const outcome = await this.validation.validate(entry.key, entry.json, data, "output");
    if (outcome.kind === "problems") return outcome.problems[0];
    if (outcome.kind === "invalid_schema") return `the output schema cannot be used (${outcome.message}); edit it`;
    return `the answer could not be checked against the output schema in time (${outcome.message}); simplify the schema`;
  }

  /**
   * The full listing-time check of a schema, compilation included, for the seller's routes and
   * scripts: a schema too costly to compile here is compiled on a worker under a deadline.
   * Returns why it is refused, or undefined.
   */
  async schemaProblem(schema: object, field: SchemaField = "input_schema"): Promise<string | undefined> {
    const problem = schemaBoundsProblem(schema, field);
    if (problem) return problem;
    const profile = profileSchema(schema);
    if (compilesInProcess(profile)) {
      const result = compileSchema(this.ajv, schema, field);
      if (!result.ok) return result.message;
      this.ajv.removeSchema(result.validate.schema);
      return undefined;
    }
    const json = JSON.stringify(schema);
    const outcome = await this.validation.compile(schemaKey(json), json, field === "output_schema" ? "output" : "input");
    return outcome.kind === "problems" ? undefined : outcome.message;
  }

  /** Throws SkillValidationError unless the skill could be stored and called: slug, price, timeout, URL, schema. */
  check(input: Omit<SkillInput, "sellerAccountId">): void {
    if (!SLUG.test(input.slug)) throw new SkillValidationError(`invalid slug "${input.slug}": lowercase letters, digits and dashes`);
    // resolve() reads a UUID-shaped reference as a UUID, so such a slug could never be found.
    if (UUID.test(input.slug)) throw new SkillValidationError(`invalid slug "${input.slug}": a slug must not look like a UUID`);
    if (input.priceMicros < 0n) throw new SkillValidationError("price must not be negative");
    if (input.pricing !== undefined && input.pricing !== "fixed" && input.pricing !== "usage")
      throw new SkillValidationError('pricing must be "fixed" or "usage"');
    // A usage-priced call holds its max_price: a hold of nothing would be a free call, with no charge to report.
    if (input.pricing === "usage" && input.priceMicros === 0n) throw new SkillValidationError("max_price must be above 0");
    if (!Number.isInteger(input.timeoutMs) || input.timeoutMs <= 0)
      throw new SkillValidationError("timeout must be a positive integer of ms");
    let url: URL;
    try {
      url = new URL(input.backendUrl);
    } catch {
      throw new SkillValidationError(`invalid backend URL "${input.backendUrl}"`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new SkillValidationError("backend URL must be http(s)");
    this.checkSchema(input.inputSchema, "input_schema");
    this.checkSchema(input.outputSchema, "output_schema");
  }

  /**
   * The bounds of a schema, and its compilation when it is cheap; a schema for the workers is compiled by
   * schemaProblem(), which the seller's routes and the register script await first.
   */
  private checkSchema(schema: object | null | undefined, field: SchemaField): void {
    if (!schema) return;
    const problem = schemaBoundsProblem(schema, field) ?? schemaTextProblem(schema);
    if (problem) throw new SkillValidationError(`invalid ${SCHEMA_NAME[field]}: ${problem}`);
    if (compilesInProcess(profileSchema(schema))) {
      const result = compileSchema(this.ajv, schema, field);
      if (!result.ok) throw new SkillValidationError(`invalid ${SCHEMA_NAME[field]}: ${result.message}`);
      this.ajv.removeSchema(result.validate.schema);
    }
  }

  /**
   * Registers a skill as the operator does (`npm run register-skill`, the demo seed), or updates the one with the
   * same slug (keeping its UUID, and its secret unless one is given), durably; resolves with the skill as the
   * reloaded catalogue holds it. The skill is marked the operator's, so its backend may be on an allowlisted
   * origin; sellers list theirs through SellerSkills, which never marks them.
   */
  async upsert(input: SkillInput): Promise<Skill> {
    this.check(input);
    const text = checkSkillText(input);
    if (!text.ok) throw new SkillValidationError(text.message);
    const db = this.store.db;
    const id = await db.transaction(
      (tx) =>
        this.store.upsert(
          {
            id: randomUUID(),
            slug: input.slug,
            name: text.name,
            description: text.description,
            pricing: input.pricing ?? "fixed",
            priceMicros: input.priceMicros,
            sellerAccountId: input.sellerAccountId,
            backendUrl: input.backendUrl,
            operatorListed: true,
            timeoutMs: input.timeoutMs,
            rateLimitPerMin: input.rateLimitPerMin ?? null,
            inputSchemaJson: input.inputSchema ? JSON.stringify(input.inputSchema) : null,
            outputSchemaJson: input.outputSchema ? JSON.stringify(input.outputSchema) : null,
            signingSecret: input.signingSecret ?? randomBytes(32).toString("hex"),
          },
          this.now(),
          input.signingSecret !== undefined,
          tx,
        ),
      { durable: true },
    );
    await this.changed(id);
    return this.resolve(id)!;
  }

  /** Takes a skill off the marketplace; its calls history stays. */
  async deactivate(ref: string): Promise<boolean> {
    const skill = this.resolve(ref);
    if (!skill) return false;
    await this.store.db.transaction((tx) => this.store.unlist(skill.id, this.now(), tx), { durable: true });
    await this.changed(skill.id);
    return true;
  }
}
