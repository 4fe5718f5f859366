import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { ValidateFunction } from "ajv";
import {
  type SchemaProfile,
  compileSchema,
  compilesInProcess,
  createSchemaCompiler,
  profileSchema,
  runsInProcess,
  schemaBoundsProblem,
  validateWith,
} from "./schema-guard";
import type { SkillRecord, SkillsStore } from "./skills-store";
import { ValidationPool } from "./validation-pool";
import { GatewayError } from "../errors";

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

/** A skill as the call path uses it: the stored record with its input schema parsed. */
export interface Skill extends Omit<SkillRecord, "inputSchemaJson"> {
  inputSchema: object | null;
}

export interface SkillInput {
  slug: string;
  name: string;
  description?: string;
  priceMicros: bigint;
  sellerAccountId: string;
  backendUrl: string;
  timeoutMs: number;
  rateLimitPerMin?: number | null;
  inputSchema?: object | null;
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
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function toSkill(record: SkillRecord): Skill {
  const { inputSchemaJson, ...rest } = record;
  return { ...rest, inputSchema: inputSchemaJson === null ? null : JSON.parse(inputSchemaJson) };
}

/**
 * The skill catalogue. Skills are read far more often than written, so the active ones are
 * held in memory, indexed by slug and by UUID, with their input schemas compiled once;
 * every write here refreshes the cache. `refresh()` picks up changes made by another
 * process (the register script).
 */
export class SkillRegistry {
  private bySlug = new Map<string, Skill>();
  private byId = new Map<string, Skill>();
  private schemas = new Map<string, SchemaEntry>();
  /** Validators compiled on the event loop, by schema text, kept from one refresh to the next. */
  private compiled = new Map<string, ValidateFunction>();
  /** Sellers' schemas run on RE2 and within bounds (./schema-guard.ts). */
  private readonly ajv = createSchemaCompiler();
  readonly validation: ValidationPool;

  constructor(
    /** The catalogue's table; the registry's `store` is also what SellerSkills writes through. */
    readonly store: SkillsStore,
    /** Told about a listed skill the catalogue cannot serve (a schema stored before today's rules). */
    private readonly warn: (message: string) => void = () => {},
    /** Where schemas too costly for the event loop run; by default one worker, 250 ms a validation. */
    validation?: ValidationPool,
  ) {
    this.validation =
      validation ??
      new ValidationPool({
        validateTimeoutMs: 250,
        compileTimeoutMs: 2_000,
        log: (message, error) => warn(`${message}${error ? `: ${String(error)}` : ""}`),
      });
    this.refresh();
  }

  /** Stops the validation workers. */
  close(): Promise<void> {
    return this.validation.close();
  }

  private stamp = "";

  /**
   * Reloads the catalogue if the skills table changed since the last load, e.g. written by
   * the register script in another process. Cheap enough to poll every few seconds.
   */
  refreshIfChanged(): boolean {
    if (this.currentStamp() === this.stamp) return false;
    this.refresh();
    return true;
  }

  private currentStamp(): string {
    return this.store.changeStamp();
  }

  refresh(): void {
    this.stamp = this.currentStamp();
    const rows = this.store.listed();
    const bySlug = new Map<string, Skill>();
    const byId = new Map<string, Skill>();
    const schemas = new Map<string, SchemaEntry>();
    const compiled = new Map<string, ValidateFunction>();
    for (const row of rows) {
      const skill = toSkill(row);
      if (row.inputSchemaJson !== null) {
        // A schema listed before the current rules may be refused by them now. That skill is
        // left out of the live catalogue, not the whole catalogue with it.
        const entry = this.entryFor(row.inputSchemaJson, skill.inputSchema, compiled);
        if (typeof entry === "string") {
          this.warn(`skill "${skill.slug}" is not served: its input schema is refused (${entry}); its seller must edit it`);
          continue;
        }
        schemas.set(skill.id, entry);
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
  }

  /**
   * A schema's entry: bounds checked, and compiled here if it is small and has no `$ref`
   * (reusing the previous refresh's validator for the same text). A schema for the workers is
   * compiled there, on first use. Returns why it is refused instead, as text.
   */
  private entryFor(json: string, schema: unknown, compiled: Map<string, ValidateFunction>): SchemaEntry | string {
    const problem = schemaBoundsProblem(schema);
    if (problem) return problem;
    const profile = profileSchema(schema);
    const entry: SchemaEntry = { profile, json, key: schemaKey(json) };
    if (compilesInProcess(profile)) {
      let validate = compiled.get(json) ?? this.compiled.get(json);
      if (!validate) {
        const result = compileSchema(this.ajv, schema as object);
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
   * The full listing-time check of a schema, compilation included, for the seller's routes and
   * scripts: a schema too costly to compile here is compiled on a worker under a deadline.
   * Returns why it is refused, or undefined.
   */
  async schemaProblem(schema: object): Promise<string | undefined> {
    const problem = schemaBoundsProblem(schema);
    if (problem) return problem;
    const profile = profileSchema(schema);
    if (compilesInProcess(profile)) {
      const result = compileSchema(this.ajv, schema);
      if (!result.ok) return result.message;
      this.ajv.removeSchema(result.validate.schema);
      return undefined;
    }
    const json = JSON.stringify(schema);
    const outcome = await this.validation.compile(schemaKey(json), json);
    return outcome.kind === "problems" ? undefined : outcome.message;
  }

  /** Throws SkillValidationError unless the skill could be stored and called: slug, price, timeout, URL, schema. */
  check(input: Omit<SkillInput, "sellerAccountId">): void {
    if (!SLUG.test(input.slug)) throw new SkillValidationError(`invalid slug "${input.slug}": lowercase letters, digits and dashes`);
    // resolve() reads a UUID-shaped reference as a UUID, so such a slug could never be found.
    if (UUID.test(input.slug)) throw new SkillValidationError(`invalid slug "${input.slug}": a slug must not look like a UUID`);
    if (input.priceMicros < 0n) throw new SkillValidationError("price must not be negative");
    if (!Number.isInteger(input.timeoutMs) || input.timeoutMs <= 0)
      throw new SkillValidationError("timeout must be a positive integer of ms");
    let url: URL;
    try {
      url = new URL(input.backendUrl);
    } catch {
      throw new SkillValidationError(`invalid backend URL "${input.backendUrl}"`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new SkillValidationError("backend URL must be http(s)");
    if (input.inputSchema) {
      // The bounds, and compilation when it is cheap; a schema for the workers is compiled by
      // schemaProblem(), which the seller's routes and the register script await first.
      const problem = schemaBoundsProblem(input.inputSchema);
      if (problem) throw new SkillValidationError(`invalid input schema: ${problem}`);
      if (compilesInProcess(profileSchema(input.inputSchema))) {
        const result = compileSchema(this.ajv, input.inputSchema);
        if (!result.ok) throw new SkillValidationError(`invalid input schema: ${result.message}`);
        this.ajv.removeSchema(result.validate.schema);
      }
    }
  }

  /** Registers a skill, or updates the one with the same slug (keeping its UUID and secret unless given). */
  upsert(input: SkillInput): Skill {
    this.check(input);
    const now = Date.now();
    const existing = this.store.idAndSecretOf(input.slug);
    const id = existing?.id ?? randomUUID();
    this.store.upsert(
      {
        id,
        slug: input.slug,
        name: input.name,
        description: input.description ?? "",
        priceMicros: input.priceMicros,
        sellerAccountId: input.sellerAccountId,
        backendUrl: input.backendUrl,
        timeoutMs: input.timeoutMs,
        rateLimitPerMin: input.rateLimitPerMin ?? null,
        inputSchemaJson: input.inputSchema ? JSON.stringify(input.inputSchema) : null,
        signingSecret: input.signingSecret ?? existing?.signingSecret ?? randomBytes(32).toString("hex"),
      },
      now,
    );
    this.refresh();
    return this.resolve(id)!;
  }

  /** Takes a skill off the marketplace; its calls history stays. */
  deactivate(ref: string): boolean {
    const skill = this.resolve(ref);
    if (!skill) return false;
    this.store.unlist(skill.id, Date.now());
    this.refresh();
    return true;
  }
}
