/**
 * Registers (or updates, by slug) a skill from a JSON file as the operator's own: its backend
 * may be on an origin of SKILL_BACKEND_ALLOWLIST, which a seller's listing in the dashboard may
 * never use. Prints the skill's UUID and the signing secret its backend must check.
 *
 *   npm run register-skill -- skill.json
 *
 * skill.json: { "slug", "name", "description", "price": "0.01" (USD), "seller": "<account id>",
 *               "backend_url", "timeout_ms"?, "rate_limit_per_min"?, "input_schema"?, "output_schema"? }
 *            or, usage-priced (docs/selling.md, Pricing models), "pricing": "usage" and "max_price": "0.01" instead of "price"
 *
 * output_schema is the skill's output contract (docs/selling.md): a 2xx answer that does not match it is a 502
 * skill_bad_output, not charged.
 */
import fs from "node:fs";
import { loadConfig } from "../server/config";
import { EgressPolicy } from "../server/gateway/egress";
import { SkillRegistry } from "../server/catalog/skills";
import { SkillsStore } from "../server/catalog/skills-store";
import { openGatewayDatabase } from "../server/database";
import { Ledger } from "../server/ledger/ledger";
import { usdToMicros } from "../server/ledger/money";

async function main(): Promise<void> {
  const file = process.argv[2];
  if (!file) {
    console.error("usage: npm run register-skill -- <skill.json>");
    process.exit(2);
  }
  const spec = JSON.parse(fs.readFileSync(file, "utf8"));
  const config = loadConfig();
  // The gateway's egress policy, as it applies to the operator's own skills: an origin of SKILL_BACKEND_ALLOWLIST
  // is allowed here (and at every call, since the registry marks the skill the operator's), never to sellers.
  const egress = new EgressPolicy({ allowlist: config.skillBackendAllowlist, allowedPorts: config.skillBackendPorts });
  const checked = await egress.checkListing(String(spec.backend_url), "operator");
  if (!checked.ok) {
    console.error(`refused: ${checked.message} (add its origin to SKILL_BACKEND_ALLOWLIST if it is yours)`);
    process.exit(2);
  }
  // The gateway's database, whichever engine it is on (DATABASE_URL, else the SQLite file at DB_PATH).
  const db = await openGatewayDatabase({ databaseUrl: config.databaseUrl, sqlitePath: config.dbPath });
  const registry = await SkillRegistry.open(new SkillsStore(db), { pollMs: 0 });
  for (const field of ["input_schema", "output_schema"] as const) {
    const schemaProblem = spec[field] ? await registry.schemaProblem(spec[field], field) : undefined;
    if (schemaProblem) {
      console.error(`refused: invalid ${field === "input_schema" ? "input" : "output"} schema: ${schemaProblem}`);
      process.exit(2);
    }
  }
  // A usage-priced skill names its amount max_price (what a call holds), a fixed-price one price; never the other.
  const pricing = spec.pricing ?? "fixed";
  const amount = pricing === "usage" ? spec.max_price : spec.price;
  if (amount === undefined || (pricing === "usage" ? spec.price : spec.max_price) !== undefined) {
    console.error(
      `refused: a ${pricing === "usage" ? 'usage-priced skill needs "max_price" and no "price"' : 'fixed-price skill needs "price" and no "max_price"'}`,
    );
    process.exit(2);
  }
  const ledger = await Ledger.open(db);
  await ledger.ensureAccount({ id: spec.seller, kind: "seller", name: spec.seller });
  const skill = await registry.upsert({
    slug: spec.slug,
    name: spec.name,
    description: spec.description ?? "",
    pricing,
    priceMicros: usdToMicros(String(amount)),
    sellerAccountId: spec.seller,
    backendUrl: spec.backend_url,
    timeoutMs: spec.timeout_ms ?? config.defaultSkillTimeoutMs,
    rateLimitPerMin: spec.rate_limit_per_min ?? null,
    inputSchema: spec.input_schema ?? null,
    outputSchema: spec.output_schema ?? null,
  });
  console.log(`skill:          ${skill.slug} (${skill.id})\nsigning secret: ${skill.signingSecret}`);
  await registry.close();
  await db.close();
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
