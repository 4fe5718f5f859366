import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { ValidateFunction } from "ajv";
import type { Db } from "../db/db";
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

export interface Skill {
  id: string;
  slug: string;
  name: string;
  description: string;
  priceMicros: bigint;
  sellerAccountId: string;
  backendUrl: string;
  timeoutMs: number;
  /** Calls per minute one caller account may make to this skill; null for no per-skill limit. */
  rateLimitPerMin: number | null;
  inputSchema: object | null;
  /** Shared with the skill's backend, to sign each forwarded call (HMAC-SHA256). Never returned by the API. */
  signingSecret: string;
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

interface SkillRow {
  id: string;
  slug: string;
  name: string;
  description: string;
  price_micros: bigint;
  seller_account_id: string;
  backend_url: string;
  timeout_ms: bigint;
  rate_limit_per_min: bigint | null;
  input_schema: string | null;
  signing_secret: string;
}

function toSkill(row: SkillRow): Skill {
  return {
    id: row.id,
    slug: row.slug,
    name: row.name,
    description: row.description,
    priceMicros: row.price_micros,
    sellerAccountId: row.seller_account_id,
    backendUrl: row.backend_url,
    timeoutMs: Number(row.timeout_ms),
    rateLimitPerMin: row.rate_limit_per_min === null ? null : Number(row.rate_limit_per_min),
    inputSchema: row.input_schema === null ? null : JSON.parse(row.input_schema),
    signingSecret: row.signing_secret,
  };
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
    private readonly db: Db,
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
    return String(this.db.prepare("SELECT COUNT(*) || ':' || COALESCE(MAX(updated_at), 0) FROM skills").pluck().get());
  }

  refresh(): void {
    this.stamp = this.currentStamp();
    const rows = this.db.prepare("SELECT * FROM skills WHERE active = 1 ORDER BY slug").all() as SkillRow[];
    const bySlug = new Map<string, Skill>();
    const byId = new Map<string, Skill>();
    const schemas = new Map<string, SchemaEntry>();
    const compiled = new Map<string, ValidateFunction>();
    for (const row of rows) {
      const skill = toSkill(row);
      if (row.input_schema !== null) {
        // A schema listed before the current rules may be refused by them now. That skill is
        // left out of the live catalogue, not the whole catalogue with it.
        const entry = this.entryFor(row.input_schema, skill.inputSchema, compiled);
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
    const existing = this.db.prepare("SELECT id, signing_secret FROM skills WHERE slug = ?").get(input.slug) as
      { id: string; signing_secret: string } | undefined;
    const id = existing?.id ?? randomUUID();
    const secret = input.signingSecret ?? existing?.signing_secret ?? randomBytes(32).toString("hex");
    const schema = input.inputSchema ? JSON.stringify(input.inputSchema) : null;
    this.db
      .prepare(
        `INSERT INTO skills (id, slug, name, description, price_micros, seller_account_id, backend_url, timeout_ms,
                             rate_limit_per_min, input_schema, signing_secret, active, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
         ON CONFLICT (slug) DO UPDATE SET name = excluded.name, description = excluded.description,
           price_micros = excluded.price_micros, seller_account_id = excluded.seller_account_id,
           backend_url = excluded.backend_url, timeout_ms = excluded.timeout_ms,
           rate_limit_per_min = excluded.rate_limit_per_min, input_schema = excluded.input_schema,
           signing_secret = excluded.signing_secret, active = 1, updated_at = excluded.updated_at`,
      )
      .run(
        id,
        input.slug,
        input.name,
        input.description ?? "",
        input.priceMicros,
        input.sellerAccountId,
        input.backendUrl,
        input.timeoutMs,
        input.rateLimitPerMin ?? null,
        schema,
        secret,
        now,
        now,
      );
    this.refresh();
    return this.resolve(id)!;
  }

  /** Takes a skill off the marketplace; its calls history stays. */
  deactivate(ref: string): boolean {
    const skill = this.resolve(ref);
    if (!skill) return false;
    this.db.prepare("UPDATE skills SET active = 0, updated_at = ? WHERE id = ?").run(Date.now(), skill.id);
    this.refresh();
    return true;
  }
}
