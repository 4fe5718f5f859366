import { expect } from "chai";
import { openDatabase } from "../../server/db/db";
import { GroupCommit } from "../../server/db/group-commit";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { loadPostgresMigrations, migratePostgres } from "../../server/db/postgres/migrate";
import { createPostgresPool } from "../../server/db/postgres/pool";
import type { Database } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { SCHEMA } from "../../server/schema";
import { sharedPostgres } from "./engines";
import { makeTempDir } from "./ledger";
import { postgresUnavailableReason } from "./postgres";

/**
 * A database at the schema just before a migration, on either engine, for the tests of what the migration makes of
 * the rows written before it.
 */
export interface BeforeMigration {
  /** The database at the version before the migration. */
  open(): Promise<Database>;
  /** Applies the migration (and, with `upTo: "latest"`, every later one). */
  migrate(): Promise<void>;
  /** The database as it stands (after `migrate`, the migrated one). */
  current(): Database;
  close(): Promise<void>;
}

/** Which migration each engine numbers the change as, and how far `migrate` goes. */
export interface MigrationUnderTest {
  /** The SQLite schema version (server/schema.ts). */
  sqlite: number;
  /** The PostgreSQL migration's number (server/db/postgres/migrations/NNNN_*.sql). */
  postgres: number;
  /** "latest": every migration after it too; by default exactly up to it. */
  upTo?: "latest";
}

function sqliteBefore(m: MigrationUnderTest): BeforeMigration {
  const tmp = makeTempDir();
  const file = tmp.file("before.db");
  let db: Database | undefined;
  const open = (versionMax: number) => {
    const sqlite = openDatabase(
      file,
      SCHEMA.filter((s) => s.version <= versionMax),
    );
    return new SqliteDatabase(sqlite, new GroupCommit(sqlite));
  };
  return {
    async open() {
      db = open(m.sqlite - 1);
      return db;
    },
    async migrate() {
      await db!.close();
      db = open(m.upTo === "latest" ? Number.MAX_SAFE_INTEGER : m.sqlite);
      if (m.upTo !== "latest") expect(await db.value("SELECT MAX(version) FROM schema_migrations")).to.equal(BigInt(m.sqlite));
    },
    current: () => db!,
    async close() {
      await db?.close();
      tmp.remove();
    },
  };
}

function postgresBefore(m: MigrationUnderTest): BeforeMigration {
  let pool: ReturnType<typeof createPostgresPool> | undefined;
  let db: Database | undefined;
  return {
    async open() {
      const { server } = await sharedPostgres();
      const name = `sg_before_${m.postgres}_${process.pid}_${Date.now()}`;
      await server.createDatabase(name);
      pool = createPostgresPool({ url: server.urlFor(name), max: 4 });
      await migratePostgres(pool, { migrations: loadPostgresMigrations().filter((x) => x.version < m.postgres) });
      db = new PostgresDatabase(pool);
      return db;
    },
    async migrate() {
      if (m.upTo === "latest") {
        expect((await migratePostgres(pool!)).applied).to.include(m.postgres);
        return;
      }
      const upTo = loadPostgresMigrations().filter((x) => x.version <= m.postgres);
      expect((await migratePostgres(pool!, { migrations: upTo })).applied).to.deep.equal([m.postgres]);
    },
    current: () => db!,
    async close() {
      await db?.close();
    },
  };
}

/**
 * One `describe` per engine, each given a fresh `BeforeMigration` for every test (closed after it). PostgreSQL is
 * skipped, saying why, where its binaries are missing, and an error on CI.
 */
export function describeMigration(title: string, migration: MigrationUnderTest, body: (at: () => BeforeMigration) => void): void {
  for (const [engine, before] of [
    ["sqlite", sqliteBefore],
    ["postgres", postgresBefore],
  ] as const) {
    describe(`${title} (${engine})`, function () {
      this.timeout(60_000);
      let at: BeforeMigration | undefined;
      beforeEach(function () {
        if (engine === "postgres") {
          const reason = postgresUnavailableReason();
          if (reason !== null) {
            if (process.env.CI === "true") throw new Error(reason);
            console.warn(`      skipped: ${reason}`);
            this.skip();
          }
        }
        at = before(migration);
      });
      afterEach(async () => {
        await at?.close();
        at = undefined;
      });
      body(() => at!);
    });
  }
}

/**
 * The rows the API-key migration tests start from: account 'ada' and two keys written with `oldKey` (an INSERT of
 * id, hash and revoked_at, in the columns of the schema before the migration), 'old' and 'revoked' (at 5); then the
 * migration.
 */
export async function oldKeysMigrated(at: () => BeforeMigration, oldKey: string): Promise<void> {
  const db = await at().open();
  await db.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('ada', 'user', 'Ada', 1)");
  await db.run(oldKey, ["old", "hash-old", null]);
  await db.run(oldKey, ["revoked", "hash-revoked", 5]);
  await at().migrate();
}
