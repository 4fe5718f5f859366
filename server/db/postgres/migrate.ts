import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type pg from "pg";
import { advisoryLockKey } from "./advisory";

/**
 * The PostgreSQL schema's migrations: versioned SQL files in ./migrations (0001_schema.sql, ...), applied
 * in order, each in its own transaction, and recorded in schema_migrations with a checksum of the file.
 * Like the SQLite list (server/db/migrations.ts), a migration is never edited once shipped: a change is a
 * new file, and a file whose checksum no longer matches what a database recorded is refused.
 *
 * Several replicas may start at once on one database. Each transaction first takes a transaction-level
 * advisory lock (pg_advisory_xact_lock), so they queue: the first applies a migration, the others then
 * find it recorded and go on to the next. The lock goes with the transaction: a runner that dies holding it
 * (its connection closes, its transaction rolls back) frees it, and nothing half-applied is left.
 */

export const POSTGRES_MIGRATIONS_DIR = path.join(__dirname, "migrations");

/** The advisory lock every migration transaction takes. */
export const MIGRATION_LOCK_KEY = advisoryLockKey("skill-gateway:schema-migrations");

export interface PostgresMigration {
  version: number;
  name: string;
  /** The file's text, run as one script inside the migration's transaction; it must hold no BEGIN or COMMIT. */
  sql: string;
  /** SHA-256 of `sql`, hex. */
  checksum: string;
}

export interface MigratePostgresOptions {
  /** The migrations to apply; defaults to the files of POSTGRES_MIGRATIONS_DIR. */
  migrations?: readonly PostgresMigration[];
  /**
   * How long a runner waits for the lock (another replica migrating) or for a table another session is using,
   * before it gives up with an error. The migration itself has no statement timeout.
   */
  lockTimeoutMs?: number;
}

export interface MigratePostgresResult {
  /** The versions this call applied, in order (empty when the database was up to date). */
  applied: number[];
}

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** Reads the migration files of `dir`: named NNNN_name.sql, numbered 1, 2, 3... with no gap or repeat. */
export function loadPostgresMigrations(dir: string = POSTGRES_MIGRATIONS_DIR): PostgresMigration[] {
  const files = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".sql"))
    .sort();
  return files.map((file, i) => {
    const match = FILE_NAME.exec(file);
    if (match === null) throw new Error(`${path.join(dir, file)}: a migration file is named NNNN_name.sql (four digits, lowercase name)`);
    const version = Number(match[1]);
    if (version !== i + 1)
      throw new Error(`${path.join(dir, file)}: expected migration ${i + 1} here, found ${version} (no gaps or repeats)`);
    const sql = fs.readFileSync(path.join(dir, file), "utf8");
    return { version, name: match[2], sql, checksum: crypto.createHash("sha256").update(sql).digest("hex") };
  });
}

/** A database this gateway's migrations do not describe: edited, unknown or newer migrations recorded in it. */
export class SchemaMismatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SchemaMismatchError";
  }
}

interface AppliedRow {
  version: bigint;
  name: string;
  checksum: string;
}

/** Brings the database up to the latest migration; safe to run from several replicas at once. */
export async function migratePostgres(pool: pg.Pool, options: MigratePostgresOptions = {}): Promise<MigratePostgresResult> {
  const migrations = options.migrations ?? loadPostgresMigrations();
  const lockTimeoutMs = options.lockTimeoutMs ?? 60_000;
  const applied: number[] = [];
  for (;;) {
    const client = await pool.connect();
    let broken: Error | undefined;
    let next: PostgresMigration | undefined;
    try {
      await client.query("BEGIN");
      await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.trunc(lockTimeoutMs))}`);
      await client.query("SET LOCAL statement_timeout = 0");
      await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_KEY]);
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version     BIGINT PRIMARY KEY,
        name        TEXT NOT NULL,
        checksum    TEXT NOT NULL,
        applied_at  BIGINT NOT NULL)`);
      const rows = (await client.query<AppliedRow>("SELECT version, name, checksum FROM schema_migrations ORDER BY version")).rows;
      checkApplied(rows, migrations);
      const done = new Set(rows.map((r) => Number(r.version)));
      next = migrations.find((m) => !done.has(m.version));
      if (next === undefined) {
        await client.query("COMMIT");
        return { applied };
      }
      await client.query(next.sql);
      await client.query("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)", [
        next.version,
        next.name,
        next.checksum,
        Date.now(),
      ]);
      await client.query("COMMIT");
      applied.push(next.version);
    } catch (err) {
      broken = err as Error;
      await client.query("ROLLBACK").catch(() => {});
      if (err instanceof SchemaMismatchError) throw err;
      const what =
        next === undefined ? "PostgreSQL migrations could not start" : `PostgreSQL migration ${next.version} (${next.name}) failed`;
      throw new Error(`${what}: ${(err as Error).message}`, { cause: err });
    } finally {
      // A connection whose transaction failed is closed rather than handed back half-way through anything.
      client.release(broken);
    }
  }
}

/** Refuses a database whose recorded migrations are not a prefix of `migrations`, byte for byte. */
function checkApplied(rows: readonly AppliedRow[], migrations: readonly PostgresMigration[]): void {
  for (const row of rows) {
    const version = Number(row.version);
    const known = migrations.find((m) => m.version === version);
    if (known === undefined) {
      throw new SchemaMismatchError(
        `the database has PostgreSQL migration ${version} (${row.name}), which this gateway does not know (it knows up to ${migrations.length}): it was migrated by a newer gateway`,
      );
    }
    if (known.checksum !== row.checksum) {
      throw new SchemaMismatchError(
        `PostgreSQL migration ${version} (${row.name}) differs from the one the database applied: a shipped migration is never edited, add a new one`,
      );
    }
  }
}
