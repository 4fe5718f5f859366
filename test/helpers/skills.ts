import type { Skill, SkillInput } from "../../server/catalog/skills";
import type { Database } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";

/** The seller every built skill belongs to unless overridden. */
export const SELLER_ID = "seller:acme";

/**
 * A valid skill registration: an `echo` skill at 0.001 USD per call, no input schema.
 * Pass overrides for the fields a test is about.
 */
export function buildSkill(overrides: Partial<SkillInput> = {}): SkillInput {
  return {
    slug: "echo",
    name: "Echo",
    description: "Returns its input",
    priceMicros: 1_000n,
    sellerAccountId: SELLER_ID,
    backendUrl: "http://127.0.0.1:9/echo",
    timeoutMs: 5_000,
    rateLimitPerMin: null,
    inputSchema: null,
    ...overrides,
  };
}

/**
 * A skill as the registry hands it out, for code that takes a Skill and needs no database
 * (the forwarder). Its id and signing secret are fixed, so tests are reproducible. It is the
 * operator's, as `upsert` registers it, so its backend may be on an allowlisted origin.
 */
export function buildSkillRecord(overrides: Partial<Skill> = {}): Skill {
  const { slug, name, description, priceMicros, sellerAccountId, backendUrl, timeoutMs } = buildSkill();
  return {
    id: "6f1c2a9e-4b7d-4c1e-9a3f-2d8e5b0c7a14",
    slug,
    name,
    description: description ?? "",
    pricing: "fixed",
    priceMicros,
    sellerAccountId,
    backendUrl,
    operatorListed: true,
    timeoutMs,
    rateLimitPerMin: null,
    inputSchema: null,
    outputSchema: null,
    signingSecret: "test-signing-secret-0123456789abcdef",
    ...overrides,
  };
}

/**
 * Creates the seller account that skills refer to (a foreign key), and waits until it is
 * durable: on SQLite the ledger writes in batches, and the batch must end before another
 * connection writes or this one is closed.
 */
export async function ensureSeller(db: Database, id = SELLER_ID): Promise<void> {
  const ledger = await Ledger.open(db);
  await ledger.ensureAccount({ id, kind: "seller", name: `Seller ${id}` });
  await db.durable();
}
