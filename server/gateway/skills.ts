import { randomBytes, randomUUID } from "node:crypto";
import type { ValidateFunction } from "ajv";
import type { Db } from "../ledger/db";
import { compileSchema, createSchemaCompiler, validateWith } from "./schema-guard";

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

export class SkillValidationError extends Error {
  override name = "SkillValidationError";
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
  private validators = new Map<string, ValidateFunction>();
  /** Sellers' schemas run on RE2 and within bounds (./schema-guard.ts). */
  private readonly ajv = createSchemaCompiler();

  constructor(
    private readonly db: Db,
    /** Told about a listed skill the catalogue cannot serve (a schema stored before today's rules). */
    private readonly warn: (message: string) => void = () => {},
  ) {
    this.refresh();
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
    const validators = new Map<string, ValidateFunction>();
    // Drops the previous refresh's compiled schemas, which would otherwise pile up in the
    // compiler's cache (it is keyed by schema object, and each refresh parses new ones).
    this.ajv.removeSchema();
    for (const row of rows) {
      const skill = toSkill(row);
      if (skill.inputSchema) {
        // A schema listed before the current bounds (or RE2) may no longer compile. That skill
        // is left out of the live catalogue, not the whole catalogue with it.
        const compiled = compileSchema(this.ajv, skill.inputSchema);
        if (!compiled.ok) {
          this.warn(`skill "${skill.slug}" is not served: its input schema is refused (${compiled.message}); its seller must edit it`);
          continue;
        }
        validators.set(skill.id, compiled.validate);
      }
      bySlug.set(skill.slug, skill);
      byId.set(skill.id.toLowerCase(), skill);
    }
    this.bySlug = bySlug;
    this.byId = byId;
    this.validators = validators;
  }

  /** Finds an active skill by slug or UUID. */
  resolve(ref: string): Skill | undefined {
    return UUID.test(ref) ? this.byId.get(ref.toLowerCase()) : this.bySlug.get(ref);
  }

  list(): Skill[] {
    return [...this.bySlug.values()];
  }

  /** Checks a call's input against the skill's JSON Schema; returns the problems, or [] when it fits. */
  validateInput(skill: Skill, input: unknown): string[] {
    const validate = this.validators.get(skill.id);
    return validate ? validateWith(validate, input) : [];
  }

  /** Throws SkillValidationError unless the skill could be stored and called: slug, price, timeout, URL, schema. */
  check(input: Omit<SkillInput, "sellerAccountId">): void {
    if (!SLUG.test(input.slug)) throw new SkillValidationError(`invalid slug "${input.slug}": lowercase letters, digits and dashes`);
    // resolve() reads a UUID-shaped reference as a UUID, so such a slug could never be found.
    if (UUID.test(input.slug)) throw new SkillValidationError(`invalid slug "${input.slug}": a slug must not look like a UUID`);
    if (input.priceMicros < 0n) throw new SkillValidationError("price must not be negative");
    if (!Number.isInteger(input.timeoutMs) || input.timeoutMs <= 0) throw new SkillValidationError("timeout must be a positive integer of ms");
    let url: URL;
    try {
      url = new URL(input.backendUrl);
    } catch {
      throw new SkillValidationError(`invalid backend URL "${input.backendUrl}"`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new SkillValidationError("backend URL must be http(s)");
    if (input.inputSchema) {
      const compiled = compileSchema(this.ajv, input.inputSchema);
      if (!compiled.ok) throw new SkillValidationError(`invalid input schema: ${compiled.message}`);
    }
  }

  /** Registers a skill, or updates the one with the same slug (keeping its UUID and secret unless given). */
  upsert(input: SkillInput): Skill {
    this.check(input);
    const now = Date.now();
    const existing = this.db.prepare("SELECT id, signing_secret FROM skills WHERE slug = ?").get(input.slug) as
      | { id: string; signing_secret: string }
      | undefined;
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
      .run(id, input.slug, input.name, input.description ?? "", input.priceMicros, input.sellerAccountId, input.backendUrl,
        input.timeoutMs, input.rateLimitPerMin ?? null, schema, secret, now, now);
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
