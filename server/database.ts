import { openDatabase } from "./db/db";
import { GroupCommit } from "./db/group-commit";
import type { Database } from "./db/sql";
import { SqliteDatabase } from "./db/sqlite-database";
import { PostgresDatabase } from "./db/postgres/database";
import { migratePostgres } from "./db/postgres/migrate";
import { POSTGRES_POOL_DEFAULTS, createPostgresPool } from "./db/postgres/pool";
import { PostgresWatch } from "./db/postgres/watch";
import { SCHEMA } from "./schema";

export interface OpenGatewayDatabaseOptions {
  /** DATABASE_URL: every table on this PostgreSQL database. Empty or absent: the SQLite file at `sqlitePath`. */
  databaseUrl?: string;
  /** The SQLite file (":memory:" for a throwaway one). */
  sqlitePath: string;
  /** SQLite's group commit: at most this many operations share one commit. */
  groupCommitMaxOps?: number;
  /** Told when a SQLite group commit fails (the gateway stops: server/index.ts). */
  onCommitError?: (error: unknown) => void;
  /** Shown in pg_stat_activity (which replica's connections these are). */
  applicationName?: string;
  /** PostgreSQL connections at most. */
  poolMax?: number;
  /** Told when the server closes an idle pooled connection. */
  onIdleError?: (error: Error) => void;
  /** PostgreSQL: a ping unanswered this long makes the database unavailable (./db/postgres/watch.ts); 1 s by default. */
  pingTimeoutMs?: number;
  /** PostgreSQL: told when the database becomes unavailable and when it answers again. */
  log?: (message: string, error?: unknown) => void;
}

/**
 * The gateway's database on the engine its configuration names, with the schema brought up to date:
 * SQLite's migrations (server/schema.ts) on the embedded default, PostgreSQL's versioned SQL files
 * (server/db/postgres/migrations/) when DATABASE_URL is set, watched there so that a server that stops
 * answering fails operations at once rather than leave them waiting (./db/postgres/watch.ts).
 */
export async function openGatewayDatabase(options: OpenGatewayDatabaseOptions): Promise<Database> {
  if (options.databaseUrl) {
    const pool = createPostgresPool({
      url: options.databaseUrl,
      applicationName: options.applicationName,
      max: options.poolMax,
      onIdleError: options.onIdleError,
    });
    try {
      await migratePostgres(pool);
    } catch (error) {
      await pool.end();
      throw error;
    }
    const watch = new PostgresWatch({
      url: options.databaseUrl,
      applicationName: `${options.applicationName ?? POSTGRES_POOL_DEFAULTS.applicationName}:watch`,
      timeoutMs: options.pingTimeoutMs ?? 1_000,
      log: options.log,
    });
    await watch.start();
    return new PostgresDatabase(pool, undefined, watch);
  }
  const db = openDatabase(options.sqlitePath, SCHEMA);
  return new SqliteDatabase(db, new GroupCommit(db, options.groupCommitMaxOps, options.onCommitError));
}
