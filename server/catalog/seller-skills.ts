import { randomBytes, randomUUID } from "node:crypto";
import type { Config } from "../config";
import type { Db } from "../db/db";
import { type SkillRegistry, SkillValidationError } from "./skills";
import { microsToUsd } from "../ledger/money";
import { type Refusal, refusal } from "../errors";

/** What a seller sets on a skill (all of it at creation; any of it in an edit, the slug excepted). */
export interface SellerSkillFields {
  slug: string;
  name: string;
  description: string;
  priceMicros: bigint;
  backendUrl: string;
  timeoutMs: number;
  rateLimitPerMin: number | null;
  inputSchema: object | null;
}

/** A seller's view of its skill: everything but the signing secret, which it sees once, at creation. */
export interface SellerSkill extends SellerSkillFields {
  id: string;
  listed: boolean;
  createdAtMs: number;
  updatedAtMs: number;
}

/** Why a seller's skill was not saved: invalid_request (a field out of bounds), slug_taken, or not_found (not theirs). */
export type SellerSkillRefusal = Refusal<"invalid_request" | "slug_taken" | "not_found">;

/** Limits on what a seller may set, beyond the price bounds of the configuration. */
export const SKILL_LIMITS = {
  nameChars: 100,
  descriptionChars: 2_000,
  timeoutMsMin: 100,
  timeoutMsMax: 120_000,
  rateLimitPerMinMax: 1_000_000,
} as const;

interface Row {
  id: string;
  slug: string;
  name: string;
  description: string;
  price_micros: bigint;
  backend_url: string;
  timeout_ms: bigint;
  rate_limit_per_min: bigint | null;
  input_schema: string | null;
  active: bigint;
  created_at: bigint;
  updated_at: bigint;
}

const toSellerSkill = (row: Row): SellerSkill => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  description: row.description,
  priceMicros: row.price_micros,
  backendUrl: row.backend_url,
  timeoutMs: Number(row.timeout_ms),
  rateLimitPerMin: row.rate_limit_per_min === null ? null : Number(row.rate_limit_per_min),
  inputSchema: row.input_schema === null ? null : JSON.parse(row.input_schema),
  listed: row.active === 1n,
  createdAtMs: Number(row.created_at),
  updatedAtMs: Number(row.updated_at),
});

/**
 * Skills as their sellers manage them. Any account can sell: a skill names its seller's
 * account, whose `earned` bucket receives the seller share of each paid call (accounts of
 * kind 'user' have that bucket as well as 'seller' ones), and settlement credits it on-chain
 * to the account's linked address. A seller sees and changes only its own skills; another's
 * skill is answered as an unknown one. Writes go straight to the catalogue's table and then
 * refresh the in-memory catalogue the call path reads.
 */
export class SellerSkills {
  private readonly stmt;

  constructor(
    db: Db,
    private readonly registry: SkillRegistry,
    private readonly config: Pick<Config, "minSkillPriceMicros" | "maxSkillPriceMicros">,
  ) {
    this.stmt = {
      insert: db.prepare(
        `INSERT INTO skills (id, slug, name, description, price_micros, seller_account_id, backend_url, timeout_ms,
                             rate_limit_per_min, input_schema, signing_secret, active, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
         ON CONFLICT (slug) DO NOTHING`,
      ),
      update: db.prepare(
        `UPDATE skills SET name = ?, description = ?, price_micros = ?, backend_url = ?, timeout_ms = ?,
           rate_limit_per_min = ?, input_schema = ?, active = ?, updated_at = ?
         WHERE id = ? AND seller_account_id = ?`,
      ),
      // A seller may name its skill by UUID or by slug.
      own: db.prepare(
        `SELECT id, slug, name, description, price_micros, backend_url, timeout_ms, rate_limit_per_min, input_schema,
                active, created_at, updated_at
         FROM skills WHERE (id = ? OR slug = ?) AND seller_account_id = ?`,
      ),
      list: db.prepare(
        `SELECT id, slug, name, description, price_micros, backend_url, timeout_ms, rate_limit_per_min, input_schema,
                active, created_at, updated_at
         FROM skills WHERE seller_account_id = ? ORDER BY created_at, slug`,
      ),
    };
  }

  list(sellerAccountId: string): SellerSkill[] {
    return (this.stmt.list.all(sellerAccountId) as Row[]).map(toSellerSkill);
  }

  get(sellerAccountId: string, ref: string): SellerSkill | undefined {
    const row = this.stmt.own.get(ref.toLowerCase(), ref, sellerAccountId) as Row | undefined;
    return row && toSellerSkill(row);
  }

  /** Lists a new skill; its signing secret is returned here and never again. */
  create(sellerAccountId: string, fields: SellerSkillFields): { ok: true; skill: SellerSkill; signingSecret: string } | SellerSkillRefusal {
    const invalid = this.check(fields);
    if (invalid) return invalid;
    const id = randomUUID();
    const signingSecret = randomBytes(32).toString("hex");
    const now = Date.now();
    const inserted = this.stmt.insert.run(
      id,
      fields.slug,
      fields.name,
      fields.description,
      fields.priceMicros,
      sellerAccountId,
      fields.backendUrl,
      fields.timeoutMs,
      fields.rateLimitPerMin,
      fields.inputSchema ? JSON.stringify(fields.inputSchema) : null,
      signingSecret,
      now,
      now,
    );
    if (inserted.changes === 0) return refusal("slug_taken", "That slug is taken: choose another.");
    this.registry.refresh();
    return { ok: true, skill: this.get(sellerAccountId, id)!, signingSecret };
  }

  /** Edits the seller's own skill; `listed: true` lists an unlisted one again. The slug never changes. */
  update(
    sellerAccountId: string,
    ref: string,
    patch: Partial<Omit<SellerSkillFields, "slug">> & { listed?: boolean },
  ): { ok: true; skill: SellerSkill } | SellerSkillRefusal {
    const current = this.get(sellerAccountId, ref);
    if (!current) return refusal("not_found", "No such skill among yours.");
    const next: SellerSkillFields = { ...current, ...definedOnly(patch) };
    const invalid = this.check(next);
    if (invalid) return invalid;
    this.stmt.update.run(
      next.name,
      next.description,
      next.priceMicros,
      next.backendUrl,
      next.timeoutMs,
      next.rateLimitPerMin,
      next.inputSchema ? JSON.stringify(next.inputSchema) : null,
      (patch.listed ?? current.listed) ? 1 : 0,
      Date.now(),
      current.id,
      sellerAccountId,
    );
    this.registry.refresh();
    return { ok: true, skill: this.get(sellerAccountId, current.id)! };
  }

  /** Takes the seller's skill off the marketplace: calls to it get 404; its history stays. */
  unlist(sellerAccountId: string, ref: string): { ok: true; skill: SellerSkill } | SellerSkillRefusal {
    return this.update(sellerAccountId, ref, { listed: false });
  }

  private check(fields: SellerSkillFields): SellerSkillRefusal | undefined {
    const invalid = (message: string) => refusal("invalid_request", message);
    const { minSkillPriceMicros: min, maxSkillPriceMicros: max } = this.config;
    if (fields.priceMicros < min || fields.priceMicros > max) {
      return invalid(`price must be between ${microsToUsd(min)} and ${microsToUsd(max)} USD.`);
    }
    if (fields.name.trim() === "" || fields.name.length > SKILL_LIMITS.nameChars)
      return invalid(`name must be 1 to ${SKILL_LIMITS.nameChars} characters.`);
    if (fields.description.length > SKILL_LIMITS.descriptionChars)
      return invalid(`description must be at most ${SKILL_LIMITS.descriptionChars} characters.`);
    if (
      !Number.isInteger(fields.timeoutMs) ||
      fields.timeoutMs < SKILL_LIMITS.timeoutMsMin ||
      fields.timeoutMs > SKILL_LIMITS.timeoutMsMax
    ) {
      return invalid(`timeout_ms must be an integer from ${SKILL_LIMITS.timeoutMsMin} to ${SKILL_LIMITS.timeoutMsMax}.`);
    }
    const limit = fields.rateLimitPerMin;
    if (limit !== null && (!Number.isInteger(limit) || limit < 1 || limit > SKILL_LIMITS.rateLimitPerMinMax)) {
      return invalid(`rate_limit_per_min must be null or an integer from 1 to ${SKILL_LIMITS.rateLimitPerMinMax}.`);
    }
    try {
      this.registry.check(fields);
    } catch (error) {
      if (error instanceof SkillValidationError) return invalid(`${error.message}.`);
      throw error;
    }
    return undefined;
  }
}

function definedOnly<T extends object>(patch: T): Partial<T> {
  return Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) as Partial<T>;
}
