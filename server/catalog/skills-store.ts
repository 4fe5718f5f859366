import type { Database, Sql, SqlParam } from "../db/sql";

/** How a skill is priced: one price per call, or what each call used, up to a maximum. */
export type SkillPricing = "fixed" | "usage";

/** A skill as stored; its schemas are kept as the JSON text they were listed with. */
export interface SkillRecord {
  id: string;
  slug: string;
  name: string;
  description: string;
  /**
   * How the skill is priced (issue 27): `fixed`, every call costs `priceMicros`; `usage`, the backend reports what each
   * call came to (X-Skill-Charge), at most `priceMicros`, its max_price, which is what a call holds.
   */
  pricing: SkillPricing;
  /** The price per call (`fixed`), or the most one call may cost (`usage`: its max_price). */
  priceMicros: bigint;
  sellerAccountId: string;
  backendUrl: string;
  /**
   * Whether the operator registered the skill and its backend URL (`npm run register-skill`, the demo seed): only
   * then may the backend be on an origin of SKILL_BACKEND_ALLOWLIST. A seller's own listing, or its edit of the
   * backend URL, leaves it false.
   */
  operatorListed: boolean;
  timeoutMs: number;
  /** Calls per minute one caller account may make to this skill; null for no per-skill limit. */
  rateLimitPerMin: number | null;
  inputSchemaJson: string | null;
  /** What the skill promises its 2xx answers are (JSON Schema text, its output contract); null for no promise. */
  outputSchemaJson: string | null;
  /** Shared with the skill's backend, to sign each forwarded call (HMAC-SHA256). Never returned by the API. */
  signingSecret: string;
}

/** A skill as its seller sees it: no signing secret, with whether it is listed and when it changed. */
export interface SkillListingRecord extends Omit<SkillRecord, "sellerAccountId" | "signingSecret" | "operatorListed"> {
  listed: boolean;
  createdAtMs: number;
  updatedAtMs: number;
}

/** What a write stores (a new skill, or every editable field of one). */
export type SkillWrite = Omit<SkillRecord, "id"> & { id: string };

/** The fields a seller edits on its own skill, and whether it is listed. */
export type SkillEdit = Omit<SkillRecord, "id" | "slug" | "sellerAccountId" | "signingSecret" | "operatorListed"> & { listed: boolean };

interface SkillRow {
  id: string;
  slug: string;
  name: string;
  description: string;
  price_micros: bigint;
  pricing: SkillPricing;
  seller_account_id: string;
  backend_url: string;
  operator_listed: bigint;
  timeout_ms: bigint;
  rate_limit_per_min: bigint | null;
  input_schema: string | null;
  output_schema: string | null;
  signing_secret: string;
}

type ListingRow = Omit<SkillRow, "seller_account_id" | "signing_secret" | "operator_listed"> & {
  active: bigint;
  created_at: bigint;
  updated_at: bigint;
};

const toRecord = (row: SkillRow): SkillRecord => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  description: row.description,
  pricing: row.pricing,
  priceMicros: row.price_micros,
  sellerAccountId: row.seller_account_id,
  backendUrl: row.backend_url,
  operatorListed: row.operator_listed === 1n,
  timeoutMs: Number(row.timeout_ms),
  rateLimitPerMin: row.rate_limit_per_min === null ? null : Number(row.rate_limit_per_min),
  inputSchemaJson: row.input_schema,
  outputSchemaJson: row.output_schema,
  signingSecret: row.signing_secret,
});

const toListing = (row: ListingRow): SkillListingRecord => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  description: row.description,
  pricing: row.pricing,
  priceMicros: row.price_micros,
  backendUrl: row.backend_url,
  timeoutMs: Number(row.timeout_ms),
  rateLimitPerMin: row.rate_limit_per_min === null ? null : Number(row.rate_limit_per_min),
  inputSchemaJson: row.input_schema,
  outputSchemaJson: row.output_schema,
  listed: row.active === 1n,
  createdAtMs: Number(row.created_at),
  updatedAtMs: Number(row.updated_at),
});

const INSERT = `INSERT INTO skills (id, slug, name, description, price_micros, pricing, seller_account_id, backend_url, operator_listed,
                             timeout_ms, rate_limit_per_min, input_schema, output_schema, signing_secret, active, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`;

const LISTING_COLUMNS = `id, slug, name, description, price_micros, pricing, backend_url, timeout_ms, rate_limit_per_min, input_schema,
                output_schema, active, created_at, updated_at`;

function values(s: SkillWrite, nowMs: number): SqlParam[] {
  return [
    s.id,
    s.slug,
    s.name,
    s.description,
    s.priceMicros,
    s.pricing,
    s.sellerAccountId,
    s.backendUrl,
    s.operatorListed ? 1 : 0,
    s.timeoutMs,
    s.rateLimitPerMin,
    s.inputSchemaJson,
    s.outputSchemaJson,
    s.signingSecret,
    nowMs,
    nowMs,
  ];
}

/**
 * The `skills` table (./skills.ts, ./seller-skills.ts), on either engine. The catalogue is held in memory
 * and reloaded when `changeStamp()` moves; a seller names its skills by UUID or slug. A write takes the
 * caller's transaction when given one, and otherwise runs as a statement of its own.
 */
export class SkillsStore {
  constructor(
    /** The database the table is in; SellerSkills opens its transactions on it. */
    readonly db: Database,
  ) {}

  /**
   * A value that changes whenever a skill is added or updated (another process or replica may write).
   * The sum of the update times moves with any write, even one stamped earlier than the latest by a
   * replica whose clock is behind; a rewrite with the very same time is the one change it can miss.
   */
  /** Whether any skill (listed or not, anyone's) has `slug`. */
  async slugTaken(slug: string): Promise<boolean> {
    return (await this.db.value<string>("SELECT id FROM skills WHERE slug = ?", [slug])) !== undefined;
  }

  async changeStamp(): Promise<string> {
    const row = await this.db.one<{ n: bigint; total: bigint | string | null }>(
      "SELECT COUNT(*) AS n, SUM(updated_at) AS total FROM skills",
    );
    return `${String(row?.n ?? 0)}:${String(row?.total ?? 0)}`;
  }

  /** The listed skills, by slug. */
  async listed(): Promise<SkillRecord[]> {
    return (await this.db.all<SkillRow>("SELECT * FROM skills WHERE active = 1 ORDER BY slug")).map(toRecord);
  }

  /**
   * Inserts the skill, or updates every field of the one with its slug (keeping its id) and lists it again.
   * The stored signing secret is kept unless `replaceSecret`: the skill's is then only a new one's. Returns
   * the id the slug has now: the stored one when the slug was taken, whoever took it first.
   */
  async upsert(skill: SkillWrite, nowMs: number, replaceSecret: boolean, tx?: Sql): Promise<string> {
    const id = await (tx ?? this.db).value<string>(
      `${INSERT}
       ON CONFLICT (slug) DO UPDATE SET name = excluded.name, description = excluded.description,
         price_micros = excluded.price_micros, pricing = excluded.pricing, seller_account_id = excluded.seller_account_id,
         backend_url = excluded.backend_url, operator_listed = excluded.operator_listed, timeout_ms = excluded.timeout_ms,
         rate_limit_per_min = excluded.rate_limit_per_min, input_schema = excluded.input_schema,
         output_schema = excluded.output_schema,
         signing_secret = CASE WHEN ? = 1 THEN excluded.signing_secret ELSE skills.signing_secret END,
         active = 1, updated_at = excluded.updated_at
       RETURNING id`,
      [...values(skill, nowMs), replaceSecret ? 1 : 0],
    );
    return id!;
  }

  /** Inserts a new listed skill; false if its slug is taken. */
  async insertIfSlugFree(skill: SkillWrite, nowMs: number, tx?: Sql): Promise<boolean> {
    return (await (tx ?? this.db).run(`${INSERT} ON CONFLICT (slug) DO NOTHING`, values(skill, nowMs))) === 1;
  }

  /**
   * Updates a seller's own skill's editable fields and listing. A skill the operator registered stays the
   * operator's only while its backend URL is the one the operator gave: a URL the seller sets is the seller's, held
   * to the public-address rule from then on (SET reads the row as it was, so the old URL is compared).
   */
  async updateOwn(sellerAccountId: string, id: string, f: SkillEdit, nowMs: number, tx?: Sql): Promise<void> {
    await (tx ?? this.db).run(
      `UPDATE skills SET name = ?, description = ?, price_micros = ?, pricing = ?, backend_url = ?,
         operator_listed = CASE WHEN backend_url = ? THEN operator_listed ELSE 0 END, timeout_ms = ?,
         rate_limit_per_min = ?, input_schema = ?, output_schema = ?, active = ?, updated_at = ?
       WHERE id = ? AND seller_account_id = ?`,
      [
        f.name,
        f.description,
        f.priceMicros,
        f.pricing,
        f.backendUrl,
        f.backendUrl,
        f.timeoutMs,
        f.rateLimitPerMin,
        f.inputSchemaJson,
        f.outputSchemaJson,
        f.listed ? 1 : 0,
        nowMs,
        id,
        sellerAccountId,
      ],
    );
  }

  /** Takes a skill off the marketplace. */
  async unlist(id: string, nowMs: number, tx?: Sql): Promise<void> {
    await (tx ?? this.db).run("UPDATE skills SET active = 0, updated_at = ? WHERE id = ?", [nowMs, id]);
  }

  /**
   * The seller's skill named by UUID (any case) or slug. Inside a transaction (`tx`) the row is locked until
   * it ends, for an edit made on the strength of what was read.
   */
  async ownListing(sellerAccountId: string, ref: string, tx?: Sql): Promise<SkillListingRecord | undefined> {
    const sql = tx ?? this.db;
    const row = await sql.one<ListingRow>(
      `SELECT ${LISTING_COLUMNS} FROM skills WHERE (id = ? OR slug = ?) AND seller_account_id = ?${tx ? tx.dialect.forUpdate : ""}`,
      [ref.toLowerCase(), ref, sellerAccountId],
    );
    return row && toListing(row);
  }

  /** The signing secret of the seller's skill `id`: what a test call to a new backend URL is signed with. */
  async ownSigningSecret(sellerAccountId: string, id: string): Promise<string | undefined> {
    return this.db.value<string>("SELECT signing_secret FROM skills WHERE id = ? AND seller_account_id = ?", [id, sellerAccountId]);
  }

  /** The seller's skills, oldest first. */
  async listingsOf(sellerAccountId: string): Promise<SkillListingRecord[]> {
    return (
      await this.db.all<ListingRow>(`SELECT ${LISTING_COLUMNS} FROM skills WHERE seller_account_id = ? ORDER BY created_at, slug`, [
        sellerAccountId,
      ])
    ).map(toListing);
  }
}
