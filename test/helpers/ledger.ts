import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FeeMode } from "../../server/ledger/fees";
import { openSqliteDatabase } from "../../server/database";
import type { Database, Sql } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { computeCharge, type Charge } from "../../server/ledger/fees";
import { Ledger, type Bucket } from "../../server/ledger/ledger";
import type { Engine, OpenOptions } from "./engines";

export interface LedgerFixture {
  db: Database;
  ledger: Ledger;
}

/**
 * A ledger on a fresh database of `engine` (test/helpers/engines.ts; its suite closes it after the test), or,
 * without one, on a fresh SQLite database the caller closes: in memory unless `file` is given. `maxOps` (SQLite
 * only) sets the group commit's batch size, so a test can make batches end where it wants them to.
 */
export async function makeLedger(engine?: Engine, options: OpenOptions = {}): Promise<LedgerFixture> {
  let db: Database;
  if (engine) {
    db = await engine.open(options);
  } else {
    db = openSqliteDatabase(options.file ?? ":memory:", { maxOps: options.maxOps });
  }
  return { db, ledger: await Ledger.open(db) };
}

/** The SQLite connection under `db`, for what only SQLite has (its group commit, pragmas, raw statements). */
export function sqliteOf(db: Database): SqliteDatabase {
  if (!(db instanceof SqliteDatabase)) throw new Error(`a SQLite database was expected, not ${db.engine}`);
  return db;
}

/** One call's charge: 1 USDC with the default 10% fee included, unless overridden. */
export function buildCharge(overrides: Partial<Charge> & { priceMicros?: bigint; feeMode?: FeeMode; feeBps?: bigint } = {}): Charge {
  const { priceMicros = 1_000_000n, feeMode = "included", feeBps = 1000n, ...fields } = overrides;
  return { ...computeCharge(priceMicros, feeMode, feeBps), ...fields };
}

/** A user and a seller, the user credited with `creditMicros` of development credit. */
export async function makeParties(ledger: Ledger, creditMicros = 10_000_000n): Promise<{ userId: string; sellerId: string }> {
  const userId = (await ledger.ensureAccount({ id: "user:alice", kind: "user", name: "Alice" })).id;
  const sellerId = (await ledger.ensureAccount({ id: "seller:acme", kind: "seller", name: "Acme skills" })).id;
  if (creditMicros > 0n) await ledger.credit(userId, creditMicros, "dev_credit");
  return { userId, sellerId };
}

/** Takes a hold that must succeed, and returns its id. */
export async function holdOk(ledger: Ledger, userId: string, sellerId: string, charge: Charge = buildCharge()): Promise<string> {
  const result = await ledger.hold({ accountId: userId, sellerAccountId: sellerId, skillId: "skill:echo", charge });
  if (!result.ok) throw new Error(`expected the hold to succeed, got ${result.reason}`);
  return result.hold.id;
}

/** Every (account, bucket) balance, keyed "account/bucket", read straight from the engine's balances (Dialect.balances). */
export async function allBalances(sql: Sql): Promise<Map<string, bigint>> {
  const rows = await sql.all<{ account_id: string; bucket: Bucket; balance: bigint }>(
    `SELECT account_id, bucket, balance FROM ${sql.dialect.balances}`,
  );
  return new Map(rows.map((r) => [`${r.account_id}/${r.bucket}`, r.balance]));
}

/** How many rows a table holds, as a number. */
export async function countRows(sql: Sql, table: "accounts" | "entries" | "postings" | "holds"): Promise<number> {
  return Number(await sql.value<bigint>(`SELECT COUNT(*) FROM ${table}`));
}

/** A hold's status, or undefined when there is no such hold. */
export function holdStatus(sql: Sql, holdId: string): Promise<string | undefined> {
  return sql.value<string>("SELECT status FROM holds WHERE id = ?", [holdId]);
}

/** The error `work` rejects (or throws) with; fails the test when it resolves. */
export async function rejectionOf(work: Promise<unknown> | (() => Promise<unknown>)): Promise<Error> {
  try {
    await (typeof work === "function" ? work() : work);
  } catch (error) {
    if (error instanceof Error) return error;
    throw new Error(`rejected with a non-Error: ${String(error)}`);
  }
  throw new Error("expected a rejection, but the promise resolved");
}

/** The integrity constraints a test expects the database to refuse a write with, named alike on both engines. */
export type ConstraintKind = "foreign_key" | "check" | "unique";
const CONSTRAINT_CODES: Record<ConstraintKind, readonly string[]> = {
  foreign_key: ["SQLITE_CONSTRAINT_FOREIGNKEY", "23503"],
  check: ["SQLITE_CONSTRAINT_CHECK", "23514"],
  unique: ["SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY", "23505"],
};

/** Which constraint refused a write (SQLite's SQLITE_CONSTRAINT_* codes, PostgreSQL's SQLSTATEs), if one did. */
export function constraintOf(error: unknown): ConstraintKind | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return undefined;
  return (Object.keys(CONSTRAINT_CODES) as ConstraintKind[]).find((kind) => CONSTRAINT_CODES[kind].includes(code));
}

/** A temporary directory for database files, removed by `remove()`. */
export function makeTempDir(): { file: (name: string) => string; remove: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ledger-test-"));
  return {
    file: (name) => path.join(dir, name),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

/** The triggers (SQLite migration 13) that make the journal append-only, by table. */
export const APPEND_ONLY_TRIGGERS = ["entries_no_update", "entries_no_delete", "postings_no_update", "postings_no_delete"] as const;
/** PostgreSQL's TRUNCATE fires no row trigger: these statement triggers refuse it (server/db/postgres/migrations/0001_schema.sql). */
export const APPEND_ONLY_TRUNCATE_TRIGGERS = ["entries_no_truncate", "postings_no_truncate"] as const;

/**
 * Drops the append-only triggers from a test's own database, so the test can corrupt the journal on
 * purpose (to prove the invariants catch what the triggers would otherwise stop first). Never for a
 * database a gateway keeps.
 */
export async function dropAppendOnlyTriggers(db: Database): Promise<void> {
  if (db.engine === "sqlite") {
    for (const name of APPEND_ONLY_TRIGGERS) await db.run(`DROP TRIGGER ${name}`);
    return;
  }
  for (const name of [...APPEND_ONLY_TRIGGERS, ...APPEND_ONLY_TRUNCATE_TRIGGERS]) {
    await db.run(`DROP TRIGGER ${name} ON ${name.split("_")[0]}`);
  }
}

/**
 * Runs `tamper` with the CHECK constraints of `tables` switched off, so a test can write a row the schema
 * refuses (to prove that what stands behind the schema catches it). SQLite switches them all off for the
 * connection (ignore_check_constraints) and back on after; an UPDATE there checks only the constraints naming a
 * column it changes, so the tampered row can still be settled. PostgreSQL checks every constraint of a row on
 * every UPDATE, so there the tables' CHECK constraints are dropped for the rest of the test (its own database).
 */
export async function withoutCheckConstraints(db: Database, tables: readonly string[], tamper: () => Promise<void>): Promise<void> {
  if (db.engine === "sqlite") {
    const raw = sqliteOf(db).db;
    raw.pragma("ignore_check_constraints = ON");
    try {
      await tamper();
    } finally {
      raw.pragma("ignore_check_constraints = OFF");
    }
    return;
  }
  for (const table of tables) {
    const names = await db.all<{ name: string }>(
      "SELECT conname AS name FROM pg_constraint WHERE conrelid = CAST(? AS regclass) AND contype = 'c' ORDER BY conname",
      [table],
    );
    for (const { name } of names) await db.run(`ALTER TABLE ${table} DROP CONSTRAINT ${name}`);
  }
  await tamper();
}
