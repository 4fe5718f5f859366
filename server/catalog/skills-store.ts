import type { Db } from "../db/db";

/** A skill as stored; its input schema is kept as the JSON text it was listed with. */
export interface SkillRecord {
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
  inputSchemaJson: string | null;
  /** Shared with the skill's backend, to sign each forwarded call (HMAC-SHA256). Never returned by the API. */
  signingSecret: string;
}

/** A skill as its seller sees it: no signing secret, with whether it is listed and when it changed. */
export interface SkillListingRecord extends Omit<SkillRecord, "sellerAccountId" | "signingSecret"> {
  listed: boolean;
  createdAtMs: number;
  updatedAtMs: number;
}

/** What a write stores (a new skill, or every editable field of one). */
export type SkillWrite = Omit<SkillRecord, "id"> & { id: string };

/**
 * The `skills` table (./skills.ts, ./seller-skills.ts). The catalogue is held in memory and
 * reloaded when `changeStamp()` moves; a seller names its skills by UUID or slug.
 */
export interface SkillsStore {
  /** A value that changes whenever a skill is added or updated (another process may write). */
  changeStamp(): string;
  /** The listed skills, by slug. */
  listed(): SkillRecord[];
  /** The id and secret of the skill with this slug, listed or not. */
  idAndSecretOf(slug: string): { id: string; signingSecret: string } | undefined;
  /** Inserts the skill, or updates every field of the one with its slug (keeping its id) and lists it again. */
  upsert(skill: SkillWrite, nowMs: number): void;
  /** Inserts a new listed skill; false if its slug is taken. */
  insertIfSlugFree(skill: SkillWrite, nowMs: number): boolean;
  /** Updates a seller's own skill's editable fields and listing. */
  updateOwn(
    sellerAccountId: string,
    id: string,
    fields: Omit<SkillRecord, "id" | "slug" | "sellerAccountId" | "signingSecret"> & { listed: boolean },
    nowMs: number,
  ): void;
  /** Takes a skill off the marketplace. */
  unlist(id: string, nowMs: number): void;
  /** The seller's skill named by UUID (any case) or slug. */
  ownListing(sellerAccountId: string, ref: string): SkillListingRecord | undefined;
  /** The seller's skills, oldest first. */
  listingsOf(sellerAccountId: string): SkillListingRecord[];
}

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

type ListingRow = Omit<SkillRow, "seller_account_id" | "signing_secret"> & { active: bigint; created_at: bigint; updated_at: bigint };

const toRecord = (row: SkillRow): SkillRecord => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  description: row.description,
  priceMicros: row.price_micros,
  sellerAccountId: row.seller_account_id,
  backendUrl: row.backend_url,
  timeoutMs: Number(row.timeout_ms),
  rateLimitPerMin: row.rate_limit_per_min === null ? null : Number(row.rate_limit_per_min),
  inputSchemaJson: row.input_schema,
  signingSecret: row.signing_secret,
});

const toListing = (row: ListingRow): SkillListingRecord => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  description: row.description,
  priceMicros: row.price_micros,
  backendUrl: row.backend_url,
  timeoutMs: Number(row.timeout_ms),
  rateLimitPerMin: row.rate_limit_per_min === null ? null : Number(row.rate_limit_per_min),
  inputSchemaJson: row.input_schema,
  listed: row.active === 1n,
  createdAtMs: Number(row.created_at),
  updatedAtMs: Number(row.updated_at),
});

const INSERT = `INSERT INTO skills (id, slug, name, description, price_micros, seller_account_id, backend_url, timeout_ms,
                             rate_limit_per_min, input_schema, signing_secret, active, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`;

const LISTING_COLUMNS = `id, slug, name, description, price_micros, backend_url, timeout_ms, rate_limit_per_min, input_schema,
                active, created_at, updated_at`;

/** SkillsStore on the gateway's SQLite database. */
export class SqliteSkillsStore implements SkillsStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      stamp: db.prepare("SELECT COUNT(*) || ':' || COALESCE(MAX(updated_at), 0) FROM skills").pluck(),
      listed: db.prepare("SELECT * FROM skills WHERE active = 1 ORDER BY slug"),
      idAndSecret: db.prepare("SELECT id, signing_secret FROM skills WHERE slug = ?"),
      upsert: db.prepare(
        `${INSERT}
         ON CONFLICT (slug) DO UPDATE SET name = excluded.name, description = excluded.description,
           price_micros = excluded.price_micros, seller_account_id = excluded.seller_account_id,
           backend_url = excluded.backend_url, timeout_ms = excluded.timeout_ms,
           rate_limit_per_min = excluded.rate_limit_per_min, input_schema = excluded.input_schema,
           signing_secret = excluded.signing_secret, active = 1, updated_at = excluded.updated_at`,
      ),
      insertIfFree: db.prepare(`${INSERT} ON CONFLICT (slug) DO NOTHING`),
      updateOwn: db.prepare(
        `UPDATE skills SET name = ?, description = ?, price_micros = ?, backend_url = ?, timeout_ms = ?,
           rate_limit_per_min = ?, input_schema = ?, active = ?, updated_at = ?
         WHERE id = ? AND seller_account_id = ?`,
      ),
      unlist: db.prepare("UPDATE skills SET active = 0, updated_at = ? WHERE id = ?"),
      own: db.prepare(`SELECT ${LISTING_COLUMNS} FROM skills WHERE (id = ? OR slug = ?) AND seller_account_id = ?`),
      listingsOf: db.prepare(`SELECT ${LISTING_COLUMNS} FROM skills WHERE seller_account_id = ? ORDER BY created_at, slug`),
    };
  }

  changeStamp(): string {
    return String(this.stmt.stamp.get());
  }

  listed(): SkillRecord[] {
    return (this.stmt.listed.all() as SkillRow[]).map(toRecord);
  }

  idAndSecretOf(slug: string): { id: string; signingSecret: string } | undefined {
    const row = this.stmt.idAndSecret.get(slug) as { id: string; signing_secret: string } | undefined;
    return row && { id: row.id, signingSecret: row.signing_secret };
  }

  private values(s: SkillWrite, nowMs: number) {
    return [
      s.id,
      s.slug,
      s.name,
      s.description,
      s.priceMicros,
      s.sellerAccountId,
      s.backendUrl,
      s.timeoutMs,
      s.rateLimitPerMin,
      s.inputSchemaJson,
      s.signingSecret,
      nowMs,
      nowMs,
    ];
  }

  upsert(skill: SkillWrite, nowMs: number): void {
    this.stmt.upsert.run(...this.values(skill, nowMs));
  }

  insertIfSlugFree(skill: SkillWrite, nowMs: number): boolean {
    return this.stmt.insertIfFree.run(...this.values(skill, nowMs)).changes === 1;
  }

  updateOwn(
    sellerAccountId: string,
    id: string,
    f: Omit<SkillRecord, "id" | "slug" | "sellerAccountId" | "signingSecret"> & { listed: boolean },
    nowMs: number,
  ): void {
    this.stmt.updateOwn.run(
      f.name,
      f.description,
      f.priceMicros,
      f.backendUrl,
      f.timeoutMs,
      f.rateLimitPerMin,
      f.inputSchemaJson,
      f.listed ? 1 : 0,
      nowMs,
      id,
      sellerAccountId,
    );
  }

  unlist(id: string, nowMs: number): void {
    this.stmt.unlist.run(nowMs, id);
  }

  ownListing(sellerAccountId: string, ref: string): SkillListingRecord | undefined {
    const row = this.stmt.own.get(ref.toLowerCase(), ref, sellerAccountId) as ListingRow | undefined;
    return row && toListing(row);
  }

  listingsOf(sellerAccountId: string): SkillListingRecord[] {
    return (this.stmt.listingsOf.all(sellerAccountId) as ListingRow[]).map(toListing);
  }
}
