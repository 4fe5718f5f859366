import pg from "pg";
import type { Database } from "../../server/db/sql";
import { openSqliteDatabase } from "../../server/database";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { migratePostgres } from "../../server/db/postgres/migrate";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { type PostgresServer, postgresUnavailableReason, startPostgres } from "./postgres";

/**
 * The two engines the gateway's tables live on (server/db/sql.ts), for suites that must hold on both:
 * `describeEachEngine("X", (engine) => { ... engine.open() ... })` declares the suite twice, "X (sqlite)" and
 * "X (postgres)". Each `open()` is a fresh, migrated, empty database: SQLite in memory (or in `file`), or a
 * new database on one real PostgreSQL 15 server this test process starts on first use (./postgres.ts),
 * copied from a template migrated once. Without the PostgreSQL binaries the postgres half is skipped with
 * the reason printed, except under CI (CI=true), where it fails: .ci/run installs them.
 */

export type EngineName = "sqlite" | "postgres";
export const ENGINE_NAMES: readonly EngineName[] = ["sqlite", "postgres"];

export interface OpenOptions {
  /** SQLite only: a file instead of memory (for a second connection, or a restart). */
  file?: string;
  /** SQLite only: the group commit's batch size. */
  maxOps?: number;
}

export interface Engine {
  name: EngineName;
  /** A fresh database; closed after the test by the suite (or by the caller, earlier). */
  open(options?: OpenOptions): Promise<Database>;
  /** PostgreSQL only: the URL of the database `open()` made last (for a second pool, or a gateway replica). */
  lastUrl(): string;
}

let shared: { server: PostgresServer; template: string } | undefined;
let starting: Promise<{ server: PostgresServer; template: string }> | undefined;
let counter = 0;

/** The process's PostgreSQL server and its migrated template database, started on first use. */
export function sharedPostgres(): Promise<{ server: PostgresServer; template: string }> {
  if (shared) return Promise.resolve(shared);
  starting ??= (async () => {
    // This server runs the suites' logic on PostgreSQL, hundreds of throwaway databases a run: it skips the
    // disk flushes (fsync off), which durability is not what these suites test, and autovacuum, which would
    // keep visiting every database the run made. The servers of the tests about
    // durability and crashes (the pool's, the cluster's: server/devstack/cluster.ts) keep the safe defaults.
    const server = await startPostgres({
      database: "sg_template",
      settings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off", autovacuum: "off" },
    });
    const pool = createPostgresPool({ url: server.url, max: 1 });
    try {
      await migratePostgres(pool);
    } finally {
      await pool.end();
    }
    shared = { server, template: "sg_template" };
    return shared;
  })();
  return starting;
}

/** The databases of finished per-test suites (describeEachEngine), dropped before the next one is made. */
const finished: string[] = [];

/**
 * A new database on the shared server, copied from the migrated template; returns its URL. First drops the
 * databases of tests that have finished (`finished`), so the server does not carry hundreds of them.
 */
export async function freshPostgresDatabase(): Promise<string> {
  const { server, template } = await sharedPostgres();
  const name = `sg_${process.pid}_${++counter}`;
  const admin = new pg.Client({ connectionString: server.urlFor("postgres") });
  await admin.connect();
  try {
    for (const old of finished.splice(0)) await admin.query(`DROP DATABASE IF EXISTS ${old} WITH (FORCE)`);
    // FILE_COPY copies the template's files instead of writing all of them to the WAL (PostgreSQL 15's default).
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template} STRATEGY = FILE_COPY`);
  } finally {
    await admin.end();
  }
  return server.urlFor(name);
}

/** Skips the calling suite without the PostgreSQL binaries, saying why (fails instead under CI). */
export function skipWithoutPostgres(ctx: Mocha.Context): void {
  const reason = postgresUnavailableReason();
  if (reason === null) return;
  if (process.env.CI === "true") throw new Error(reason);
  console.warn(`      skipped: ${reason}`);
  ctx.skip();
}

/**
 * For a suite of its own on the shared PostgreSQL server (not describeEachEngine's): skips it without the binaries
 * (skipWithoutPostgres), starts the server before its tests, and after each test closes the databases it pushed to
 * the list returned.
 */
export function onSharedPostgres(): Database[] {
  const opened: Database[] = [];
  before(async function () {
    skipWithoutPostgres(this);
    await sharedPostgres();
  });
  afterEach(async () => {
    for (const db of opened.splice(0)) await db.close().catch(() => {});
  });
  return opened;
}

/** Declares `body` once per engine. */
export function describeEachEngine(title: string, body: (engine: Engine) => void): void {
  for (const name of ENGINE_NAMES) {
    describe(`${title} (${name})`, function () {
      const opened: Database[] = [];
      let url = "";
      if (name === "postgres") {
        this.timeout(Math.max(this.timeout(), 60_000));
        before(async function () {
          skipWithoutPostgres(this);
          await sharedPostgres();
        });
      }
      const made: string[] = [];
      afterEach(async () => {
        for (const db of opened.splice(0)) await db.close().catch(() => {});
        // Dropped when the next database is made: a test's own extra handles on it close after this hook.
        finished.push(...made.splice(0));
      });
      body({
        name,
        lastUrl: () => url,
        async open(options = {}) {
          let db: Database;
          if (name === "sqlite") {
            db = openSqliteDatabase(options.file ?? ":memory:", { maxOps: options.maxOps });
          } else {
            url = await freshPostgresDatabase();
            made.push(new URL(url).pathname.slice(1));
            db = new PostgresDatabase(createPostgresPool({ url, max: 20 }));
          }
          opened.push(db);
          return db;
        },
      });
    });
  }
}
