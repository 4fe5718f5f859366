import type { Migration, SchemaStep } from "./db/migrations";
import { CATALOG_SCHEMA } from "./catalog/schema";
import { GATEWAY_SCHEMA } from "./gateway/schema";
import { IDENTITY_SCHEMA } from "./identity/schema";
import { LEDGER_SCHEMA } from "./ledger/schema";
import { PAYMENTS_SCHEMA } from "./payments/schema";
import { SETTLEMENT_SCHEMA } from "./settlement/schema";
import { WALLETS_SCHEMA } from "./wallets/schema";
import { X402_SCHEMA } from "./x402/schema";

/**
 * The gateway's schema: each module's steps (server/<module>/schema.ts), gathered into the ordered list of
 * migrations db/ applies. It lives here, beside the composition root, because it is the one place allowed to
 * import every module (db/ knows nothing of the domain).
 *
 * The versions and their names are what schema_migrations records, so a database migrated before the schemas
 * moved beside their modules opens unchanged: a version is never renamed, renumbered or removed; a change is a
 * new version at the end, with its steps in the modules it touches.
 */
const VERSIONS: readonly { version: number; name: string }[] = [
  { version: 1, name: "ledger, skills, keys, calls, idempotency" },
  { version: 2, name: "balances maintained by the database from postings" },
  { version: 3, name: "on-chain addresses, escrow deposits, indexer progress" },
  { version: 4, name: "settlement batches, each captured hold's batch" },
  { version: 5, name: "withdrawal vouchers" },
  { version: 6, name: "unilateral exits seen by the indexer, and the ledger entries that freeze them" },
  { version: 7, name: "identities and sessions" },
  { version: 8, name: "SIWE nonces, API keys' last use" },
  { version: 9, name: "e-mail sign-in links, outbox, OAuth states" },
  { version: 10, name: "embedded wallets" },
  { version: 11, name: "card top-ups" },
  { version: 12, name: "an account's money history, by account" },
  { version: 13, name: "entries and postings are append-only" },
  { version: 14, name: "sign-in state bounded per client and pruned by expiry" },
  { version: 15, name: "one entry kind per money movement, linked by columns" },
  { version: 16, name: "each hold names the replica that took it" },
  { version: 17, name: "spending limits of API keys, and the key period each hold counted in" },
  { version: 18, name: "x402 payments, their ledger entries and calls" },
  { version: 19, name: "accounts' display names" },
  { version: 20, name: "refusals of a key's limits counted per minute" },
  { version: 21, name: "skills the operator registered" },
  { version: 22, name: "x402 payments collected before their call" },
  { version: 23, name: "API keys' scopes, allowed skills and expiry" },
  { version: 24, name: "API keys' metadata" },
  { version: 25, name: "OAuth for the hosted MCP server: clients, requests, codes, tokens" },
  { version: 26, name: "skills' output contracts, and the calls that broke them" },
  { version: 27, name: "usage-priced skills: a skill's pricing, and its price as the most a call may cost" },
  { version: 28, name: "skills' quality roll-up: calls per hour, result and latency bucket" },
  { version: 29, name: "settled batches' totals per payer and seller; calls in a batch are final" },
  { version: 30, name: "indexes for reads that grew with every row ever written" },
  { version: 31, name: "usage per account, day, key and skill, added as each call is written" },
  { version: 32, name: "calls by key, for usage narrowed to one key" },
];

/**
 * Within a version, the modules' steps run in this order: settlement's batches before the ledger's holds column
 * that references them (version 4), the ledger's accounts before the tables that reference them (version 1).
 */
const MODULES: readonly (readonly SchemaStep[])[] = [
  SETTLEMENT_SCHEMA,
  LEDGER_SCHEMA,
  CATALOG_SCHEMA,
  IDENTITY_SCHEMA,
  WALLETS_SCHEMA,
  PAYMENTS_SCHEMA,
  GATEWAY_SCHEMA,
  X402_SCHEMA,
];

/**
 * Joins each version's steps into one migration (one transaction). A step of a version not listed, a version
 * with no step, or two steps of one version each bringing a `before` check is a mistake in the code: it throws.
 */
export function assembleSchema(
  versions: readonly { version: number; name: string }[],
  modules: readonly (readonly SchemaStep[])[],
): Migration[] {
  const known = new Set(versions.map((v) => v.version));
  for (const step of modules.flat()) {
    if (!known.has(step.version)) throw new Error(`a schema step belongs to version ${step.version}, which has no name`);
  }
  return versions.map(({ version, name }) => {
    const steps = modules.flatMap((module) => module.filter((s) => s.version === version));
    if (steps.length === 0) throw new Error(`schema version ${version} has no step`);
    const before = steps.filter((s) => s.before).map((s) => s.before!);
    if (before.length > 1) throw new Error(`schema version ${version} has ${before.length} before-checks; at most one`);
    const migration: Migration = { version, name, sql: steps.map((s) => s.sql).join("\n") };
    if (steps.some((s) => s.rebuildsTables)) migration.rebuildsTables = true;
    if (before.length === 1) migration.before = before[0];
    return migration;
  });
}

/** Every migration of the gateway's database, in version order: what openDatabase is given. */
export const SCHEMA: readonly Migration[] = assembleSchema(VERSIONS, MODULES);
