import { expect } from "chai";
import pg from "pg";
import { openDatabase } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { loadPostgresMigrations, migratePostgres, type PostgresMigration, SchemaMismatchError } from "../../server/db/postgres/migrate";
import { createPostgresPool, type PostgresPool } from "../../server/db/postgres/pool";
import { type PostgresServer, startPostgresOrSkip } from "../helpers/postgres";

/**
 * The PostgreSQL schema (server/db/postgres/migrations) against the SQLite one (server/db/migrations.ts):
 * the same tables, columns, keys, indexes and triggers, so a change made to one engine only fails here.
 * The differences PostgreSQL needs are listed, each with its reason.
 */

/** Columns only PostgreSQL has: SQLite's implicit rowid of calls, which calls-log.ts reads, made explicit. */
const PG_ONLY_COLUMNS = ["calls.rowid"];
/** Unique constraints only PostgreSQL has: the explicit rowid is unique, as SQLite's is. */
const PG_ONLY_UNIQUES = ["calls(rowid)"];
/** TRUNCATE fires no row trigger in PostgreSQL; these refuse it for the append-only journal (SQLite has no TRUNCATE). */
const PG_ONLY_TRIGGERS = [
  "calls_no_truncate",
  "entries_no_truncate",
  "postings_no_truncate",
  "settled_pair_totals_no_truncate",
  "usage_days_no_truncate",
];
/**
 * Tables only PostgreSQL has: the replicas sharing the database (a SQLite file has one process), the balance deltas a
 * capture leaves pending so that it locks no hot balance row (migration 0016; SQLite has one writer), and likewise the
 * calls pending in their usage days (migration 0019).
 */
const PG_ONLY_TABLES = ["gateway_replicas", "ledger_balance_deltas", "usage_day_deltas"];
/**
 * Views, not compared as tables: the balances with their pending deltas added (PostgreSQL's only: SQLite's
 * ledger_accounts is its balances), and the usage days (on both engines; PostgreSQL's adds the calls pending).
 */
const VIEWS = ["ledger_balances", "usage_by_day"];
/** Bookkeeping of each engine's own migration runner, not part of the schema. */
const BOOKKEEPING = "schema_migrations";
/** The PostgreSQL tables the comparison leaves out, as an SQL list. */
const NOT_COMPARED = [BOOKKEEPING, ...PG_ONLY_TABLES, ...VIEWS].map((t) => `'${t}'`).join(", ");

interface ColumnShape {
  type: string;
  notNull: boolean;
}

interface SchemaShape {
  columns: Map<string, ColumnShape>;
  tables: string[];
  primaryKeys: string[];
  uniques: string[];
  foreignKeys: string[];
  indexes: string[];
  triggers: string[];
  checksPerTable: Map<string, number>;
}

const SQLITE_TYPES: Record<string, string> = { INTEGER: "bigint", TEXT: "text", BLOB: "bytea" };

function sqliteShape(): SchemaShape {
  const db = openDatabase(":memory:", SCHEMA);
  try {
    const tables = (
      db
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> ?")
        .all(BOOKKEEPING) as {
        name: string;
        sql: string;
      }[]
    ).sort((a, b) => (a.name < b.name ? -1 : 1));
    const shape: SchemaShape = {
      columns: new Map(),
      tables: tables.map((t) => t.name),
      primaryKeys: [],
      uniques: [],
      foreignKeys: [],
      indexes: [],
      triggers: [],
      checksPerTable: new Map(),
    };
    for (const { name: table, sql } of tables) {
      const cols = db.pragma(`table_info(${table})`) as { name: string; type: string; notnull: bigint; pk: bigint }[];
      for (const c of cols) {
        // A PRIMARY KEY column is NOT NULL in PostgreSQL; SQLite (for historical reasons) lets a rowid table's
        // TEXT key be NULL unless declared NOT NULL. No code writes a NULL key: the shapes compare as NOT NULL.
        shape.columns.set(`${table}.${c.name}`, { type: SQLITE_TYPES[c.type] ?? c.type, notNull: c.notnull === 1n || c.pk > 0n });
      }
      const pk = cols.filter((c) => c.pk > 0n).sort((a, b) => Number(a.pk - b.pk));
      shape.primaryKeys.push(`${table}(${pk.map((c) => c.name).join(",")})`);
      for (const ix of db.pragma(`index_list(${table})`) as { name: string; unique: bigint; origin: string; partial: bigint }[]) {
        const cols = (db.pragma(`index_info(${ix.name})`) as { name: string }[]).map((c) => c.name).join(",");
        if (ix.origin === "u") shape.uniques.push(`${table}(${cols})`);
        if (ix.origin === "c")
          shape.indexes.push(`${ix.name} on ${table}(${cols})${ix.unique ? " unique" : ""}${ix.partial ? " partial" : ""}`);
      }
      const fks = db.pragma(`foreign_key_list(${table})`) as { id: bigint; seq: bigint; table: string; from: string; to: string }[];
      for (const id of new Set(fks.map((f) => f.id))) {
        const parts = fks.filter((f) => f.id === id).sort((a, b) => Number(a.seq - b.seq));
        shape.foreignKeys.push(`${table}(${parts.map((p) => p.from).join(",")}) -> ${parts[0].table}(${parts.map((p) => p.to).join(",")})`);
      }
      shape.checksPerTable.set(table, (sql.match(/\bCHECK\s*\(/gi) ?? []).length);
    }
    shape.triggers = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'").all() as { name: string }[]).map((t) => t.name);
    return shape;
  } finally {
    db.close();
  }
}

async function postgresShape(pool: PostgresPool): Promise<SchemaShape> {
  const q = async <T extends pg.QueryResultRow>(sql: string) => (await pool.query<T>(sql)).rows;
  const tables = (
    await q<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name NOT IN (${NOT_COMPARED})`,
    )
  )
    .map((t) => t.table_name)
    .sort();
  const shape: SchemaShape = {
    columns: new Map(),
    tables,
    primaryKeys: [],
    uniques: [],
    foreignKeys: [],
    indexes: [],
    triggers: [],
    checksPerTable: new Map(tables.map((t) => [t, 0])),
  };
  for (const c of await q<{ table_name: string; column_name: string; data_type: string; is_nullable: string }>(
    `SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = 'public' AND table_name NOT IN (${NOT_COMPARED})`,
  )) {
    shape.columns.set(`${c.table_name}.${c.column_name}`, { type: c.data_type, notNull: c.is_nullable === "NO" });
  }
  // Constraints, with their columns in key order.
  const constraints = await q<{ contype: string; tbl: string; cols: string[]; reftbl: string | null; refcols: string[] | null }>(
    `SELECT c.contype, c.conrelid::regclass::text AS tbl,
            ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i) AS cols,
            c.confrelid::regclass::text AS reftbl,
            ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i) AS refcols
     FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
     WHERE n.nspname = 'public' AND c.conrelid::regclass::text NOT IN (${NOT_COMPARED})`,
  );
  for (const c of constraints) {
    if (c.contype === "p") shape.primaryKeys.push(`${c.tbl}(${c.cols.join(",")})`);
    if (c.contype === "u") shape.uniques.push(`${c.tbl}(${c.cols.join(",")})`);
    if (c.contype === "f") shape.foreignKeys.push(`${c.tbl}(${c.cols.join(",")}) -> ${c.reftbl}(${c.refcols!.join(",")})`);
    if (c.contype === "c") shape.checksPerTable.set(c.tbl, (shape.checksPerTable.get(c.tbl) ?? 0) + 1);
  }
  for (const ix of await q<{ name: string; tbl: string; cols: string[]; unique: boolean; partial: boolean }>(
    `SELECT i.relname AS name, t.relname AS tbl, x.indisunique AS unique, x.indpred IS NOT NULL AS partial,
            ARRAY(SELECT a.attname::text FROM unnest(x.indkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.n ORDER BY k.o) AS cols
     FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
     WHERE n.nspname = 'public' AND t.relname NOT IN (${NOT_COMPARED})
       AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)`,
  )) {
    shape.indexes.push(`${ix.name} on ${ix.tbl}(${ix.cols.join(",")})${ix.unique ? " unique" : ""}${ix.partial ? " partial" : ""}`);
  }
  shape.triggers = (
    await q<{ tgname: string }>(
      `SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'public' AND NOT t.tgisinternal`,
    )
  ).map((t) => t.tgname);
  return shape;
}

const sorted = (xs: Iterable<string>) => [...xs].sort();
const without = (xs: Iterable<string>, drop: readonly string[]) => sorted([...xs].filter((x) => !drop.includes(x)));

describe("PostgreSQL schema and migrations (server/db/postgres)", function () {
  this.timeout(60_000);
  let server: PostgresServer;
  let databases = 0;
  const pools: PostgresPool[] = [];

  /** A pool on a new, empty database of the shared test server. */
  async function freshPool(icuLocale?: string): Promise<{ pool: PostgresPool; url: string }> {
    const name = `schema_${++databases}`;
    await server.createDatabase(name, { icuLocale });
    const url = server.urlFor(name);
    const pool = createPostgresPool({ url, max: 4 });
    pools.push(pool);
    return { pool, url };
  }

  before(async function () {
    server = await startPostgresOrSkip(this);
  });
  after(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await server?.stop();
  });

  describe("on an empty database", () => {
    let pool: PostgresPool;
    let pgShape: SchemaShape;
    let sqlite: SchemaShape;
    before(async () => {
      ({ pool } = await freshPool());
      const result = await migratePostgres(pool);
      expect(result.applied).to.deep.equal(loadPostgresMigrations().map((m) => m.version));
      pgShape = await postgresShape(pool);
      sqlite = sqliteShape();
    });

    it("creates the tables of a fresh SQLite ledger, and no other", () => {
      expect(sqlite.tables.length).to.be.greaterThan(20);
      expect(pgShape.tables).to.deep.equal(sqlite.tables);
    });

    it("gives every table the columns SQLite has, with the same type and nullability", () => {
      const pgColumns = new Map([...pgShape.columns].filter(([name]) => !PG_ONLY_COLUMNS.includes(name)));
      expect(sorted(pgColumns.keys())).to.deep.equal(sorted(sqlite.columns.keys()));
      for (const [name, shape] of sqlite.columns) expect(pgColumns.get(name), name).to.deep.equal(shape);
      for (const name of PG_ONLY_COLUMNS) expect(pgShape.columns.has(name), name).to.equal(true);
    });

    it("has the same primary keys, unique constraints and foreign keys", () => {
      expect(sorted(pgShape.primaryKeys)).to.deep.equal(sorted(sqlite.primaryKeys));
      expect(without(pgShape.uniques, PG_ONLY_UNIQUES)).to.deep.equal(sorted(sqlite.uniques));
      expect(sorted(pgShape.foreignKeys)).to.deep.equal(sorted(sqlite.foreignKeys));
    });

    it("has the same named indexes, on the same columns, unique and partial alike", () => {
      expect(sorted(pgShape.indexes)).to.deep.equal(sorted(sqlite.indexes));
    });

    it("has as many CHECK constraints on each table as SQLite", () => {
      expect([...pgShape.checksPerTable].sort()).to.deep.equal([...sqlite.checksPerTable].sort());
    });

    it("has the same triggers, plus the TRUNCATE guards of the journal", () => {
      expect(without(pgShape.triggers, PG_ONLY_TRIGGERS)).to.deep.equal(sorted(sqlite.triggers));
      for (const t of PG_ONLY_TRIGGERS) expect(pgShape.triggers).to.include(t);
    });

    it("does nothing when applied a second time", async () => {
      const before = (await pool.query("SELECT version, applied_at FROM schema_migrations ORDER BY version")).rows;
      expect(await migratePostgres(pool)).to.deep.equal({ applied: [] });
      expect((await pool.query("SELECT version, applied_at FROM schema_migrations ORDER BY version")).rows).to.deep.equal(before);
    });
  });

  describe("the journal and the balances", () => {
    let pool: PostgresPool;
    let entryId: bigint;
    let postingId: bigint;
    before(async () => {
      // A database whose own locale sorts text like a dictionary (a before B): the schema must not depend on it.
      ({ pool } = await freshPool("en-US"));
      await migratePostgres(pool);
      await pool.query(
        "INSERT INTO accounts (id, kind, name, created_at) VALUES ('acct_a', 'user', 'a', 1), ('acct_w', 'system', 'world', 1)",
      );
      await pool.query(
        "INSERT INTO ledger_accounts (account_id, bucket) VALUES ('acct_a', 'available'), ('acct_a', 'held'), ('acct_w', 'source')",
      );
      entryId = (await pool.query<{ id: bigint }>("INSERT INTO entries (kind, created_at) VALUES ('dev_credit', 1) RETURNING id")).rows[0]
        .id;
      postingId = (
        await pool.query<{ id: bigint }>(
          `INSERT INTO postings (entry_id, account_id, bucket, amount) VALUES ($1, 'acct_w', 'source', -9007199254740993), ($1, 'acct_a', 'available', 9007199254740993)
           RETURNING id`,
          [entryId],
        )
      ).rows[0].id;
    });

    it("moves each bucket's balance with its posting, exactly, as a bigint beyond 2^53", async () => {
      const rows = (await pool.query("SELECT account_id, bucket, balance FROM ledger_accounts ORDER BY account_id, bucket")).rows;
      expect(rows).to.deep.equal([
        { account_id: "acct_a", bucket: "available", balance: 9007199254740993n },
        { account_id: "acct_a", bucket: "held", balance: 0n },
        { account_id: "acct_w", bucket: "source", balance: -9007199254740993n },
      ]);
    });

    it("refuses a posting that would overdraw a bucket, and records nothing of it", async () => {
      const entry = (await pool.query<{ id: bigint }>("INSERT INTO entries (kind, created_at) VALUES ('hold', 2) RETURNING id")).rows[0].id;
      const err = await pool
        .query(
          `INSERT INTO postings (entry_id, account_id, bucket, amount) VALUES ($1, 'acct_a', 'held', 1), ($1, 'acct_a', 'available', -9007199254740994)`,
          [entry],
        )
        .catch((e: unknown) => e as pg.DatabaseError);
      expect(err).to.be.instanceOf(pg.DatabaseError);
      expect((err as pg.DatabaseError).code).to.equal("23514"); // check_violation: ledger_accounts' balance CHECK
      expect((await pool.query("SELECT COUNT(*) AS n FROM postings WHERE entry_id = $1", [entry])).rows[0].n).to.equal(0n);
      expect(
        (await pool.query("SELECT balance FROM ledger_accounts WHERE account_id = 'acct_a' AND bucket = 'held'")).rows[0].balance,
      ).to.equal(0n);
    });

    const refusals: [string, string, RegExp][] = [
      ["UPDATE entries SET memo = 'edited' WHERE id = $1", "entry", /entries are append-only: an entry cannot be changed/],
      ["DELETE FROM entries WHERE id = $1", "entry", /entries are append-only: an entry cannot be deleted/],
      ["UPDATE postings SET amount = 1 WHERE id = $1", "posting", /postings are append-only: a posting cannot be changed/],
      ["DELETE FROM postings WHERE id = $1", "posting", /postings are append-only: a posting cannot be deleted/],
      ["TRUNCATE entries CASCADE", "none", /entries are append-only/],
      ["TRUNCATE postings", "none", /postings are append-only/],
    ];
    for (const [sql, arg, message] of refusals) {
      it(`refuses ${sql.split(" WHERE")[0]}, whatever the code does`, async () => {
        const params = arg === "entry" ? [entryId] : arg === "posting" ? [postingId] : [];
        const err = await pool.query(sql, params).catch((e: unknown) => e as pg.DatabaseError);
        expect(err).to.be.instanceOf(pg.DatabaseError);
        expect((err as pg.DatabaseError).code).to.equal("23000");
        expect((err as pg.DatabaseError).message).to.match(message);
        expect((await pool.query("SELECT COUNT(*) AS n FROM entries WHERE id = $1 AND memo IS NULL", [entryId])).rows[0].n).to.equal(1n);
        expect((await pool.query("SELECT amount FROM postings WHERE id = $1", [postingId])).rows[0].amount).to.equal(-9007199254740993n);
      });
    }

    it("settles a hold once: a second capture of one hold is refused by the unique index", async () => {
      await pool.query("INSERT INTO entries (kind, hold_id, created_at) VALUES ('capture', 'hold_1', 3)");
      const err = await pool
        .query("INSERT INTO entries (kind, hold_id, created_at) VALUES ('release', 'hold_1', 4)")
        .catch((e: unknown) => e as pg.DatabaseError);
      expect((err as pg.DatabaseError).code).to.equal("23505");
      expect((err as pg.DatabaseError).constraint).to.equal("entries_one_settlement_per_hold");
    });

    it("sorts text byte for byte, as SQLite does, whatever the database's locale", async () => {
      await pool.query(
        "INSERT INTO accounts (id, kind, name, created_at) VALUES ('acct_B', 'user', 'b', 1), ('acct_b', 'user', 'b', 1), ('acct_Z', 'user', 'z', 1)",
      );
      const ids = (await pool.query<{ id: string }>("SELECT id FROM accounts ORDER BY id")).rows.map((r) => r.id);
      expect(ids).to.deep.equal(["acct_B", "acct_Z", "acct_a", "acct_b", "acct_w"]);
      // The database's own collation would have sorted them otherwise: the column's "C" is what decides.
      const byLocale = (await pool.query<{ id: string }>('SELECT id FROM accounts ORDER BY id::text COLLATE "default"')).rows.map(
        (r) => r.id,
      );
      expect(byLocale).to.deep.equal(["acct_a", "acct_b", "acct_B", "acct_w", "acct_Z"]);
    });
  });

  describe("the runner", () => {
    /** The real migrations plus two that record each application, the first slow enough for runners to overlap. */
    function withProbes(): PostgresMigration[] {
      const probe = (version: number, sql: string): PostgresMigration => ({
        version,
        name: `probe_${version}`,
        sql,
        checksum: `probe-${version}`,
      });
      const real = loadPostgresMigrations();
      return [
        ...real,
        probe(
          real.length + 1,
          "SELECT pg_sleep(0.3); CREATE TABLE migration_probe (version BIGINT NOT NULL); INSERT INTO migration_probe VALUES (1)",
        ),
        probe(real.length + 2, "INSERT INTO migration_probe VALUES (2)"),
      ];
    }

    it("lets two replicas starting at the same moment both succeed, each migration applied once", async () => {
      const { url } = await freshPool();
      const a = createPostgresPool({ url, max: 2, applicationName: "replica-a" });
      const b = createPostgresPool({ url, max: 2, applicationName: "replica-b" });
      pools.push(a, b);
      const migrations = withProbes();
      const [ra, rb] = await Promise.all([migratePostgres(a, { migrations }), migratePostgres(b, { migrations })]);
      const all = [...ra.applied, ...rb.applied].sort((x, y) => x - y);
      expect(all).to.deep.equal(migrations.map((m) => m.version));
      const versions = (await a.query<{ version: bigint }>("SELECT version FROM schema_migrations ORDER BY version")).rows.map(
        (r) => r.version,
      );
      expect(versions).to.deep.equal(migrations.map((m) => BigInt(m.version)));
      expect((await a.query("SELECT version FROM migration_probe ORDER BY version")).rows).to.deep.equal([
        { version: 1n },
        { version: 2n },
      ]);
    });

    it("applies a failing migration not at all: its changes are rolled back and it is not recorded", async () => {
      const { pool } = await freshPool();
      const real = loadPostgresMigrations();
      const broken: PostgresMigration = {
        version: real.length + 1,
        name: "broken",
        sql: "CREATE TABLE half_done (x BIGINT); INSERT INTO half_done VALUES (1); SELECT 1 / 0",
        checksum: "broken",
      };
      const err = await migratePostgres(pool, { migrations: [...real, broken] }).catch((e: unknown) => e as Error);
      expect(err).to.be.instanceOf(Error);
      expect((err as Error).message).to.match(new RegExp(`PostgreSQL migration ${broken.version} \\(broken\\) failed: division by zero`));
      expect((await pool.query("SELECT to_regclass('half_done') AS t")).rows[0].t).to.equal(null);
      expect((await pool.query("SELECT MAX(version) AS v FROM schema_migrations")).rows[0].v).to.equal(BigInt(real.length));
    });

    it("refuses a database where a shipped migration was edited", async () => {
      const { pool } = await freshPool();
      await migratePostgres(pool);
      const edited = loadPostgresMigrations().map((m, i) => (i === 0 ? { ...m, checksum: "0".repeat(64) } : m));
      const err = await migratePostgres(pool, { migrations: edited }).catch((e: unknown) => e as Error);
      expect(err).to.be.instanceOf(SchemaMismatchError);
      expect((err as Error).message).to.match(/migration 1 \(schema\) differs from the one the database applied/);
    });

    it("refuses a database migrated by a newer gateway", async () => {
      const { pool } = await freshPool();
      await migratePostgres(pool, { migrations: withProbes() });
      const err = await migratePostgres(pool).catch((e: unknown) => e as Error);
      expect(err).to.be.instanceOf(SchemaMismatchError);
      expect((err as Error).message).to.match(/which this gateway does not know .*migrated by a newer gateway/);
    });

    it("reads the migration files in order, numbered from 1 with no gap", () => {
      const migrations = loadPostgresMigrations();
      expect(migrations.map((m) => m.version)).to.deep.equal(migrations.map((_m, i) => i + 1));
      expect(migrations[0].name).to.equal("schema");
      expect(migrations[0].checksum).to.match(/^[0-9a-f]{64}$/);
    });
  });
});
