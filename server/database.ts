import fs from "node:fs";
import { openDatabase } from "./db/db";
import { GroupCommit } from "./db/group-commit";
import { WalFileSync } from "./db/wal-sync";
import type { WriterLock } from "./db/writer-lock";
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
  /** SQLite: the file's write lock, shared with the ledger writer's thread (server/gateway/ledger-writer.ts). */
  writerLock?: WriterLock;
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
  return openSqliteDatabase(options.sqlitePath, {
    maxOps: options.groupCommitMaxOps,
    onCommitError: options.onCommitError,
    writerLock: options.writerLock,
  });
}

/**
 * The gateway's tables in a SQLite file (or in memory: ":memory:"), behind the group commit. On a file, a commit's
 * durability is an fsync of the write-ahead log on libuv's thread pool (./db/wal-sync.ts), which the batch's
 * responses wait for while the event loop goes on; the log is found where SQLite puts it, beside the database file
 * the path resolves to (through a symbolic link, as SQLite follows it). With `writerLock`, another thread writes to
 * the file too (the ledger writer): each batch takes the lock, and commits at the next turn of the event loop.
 */
export function openSqliteDatabase(
  file: string,
  options: { maxOps?: number; onCommitError?: (error: unknown) => void; writerLock?: WriterLock } = {},
): SqliteDatabase {
  const db = openDatabase(file, SCHEMA);
  const walSync = file === ":memory:" || file === "" ? undefined : new WalFileSync(`${fs.realpathSync(file)}-wal`);
  const lock = options.writerLock;
  const shared = lock && { lock, commitEachTurn: true };
  return new SqliteDatabase(db, new GroupCommit(db, options.maxOps, options.onCommitError, undefined, walSync, shared));
}
