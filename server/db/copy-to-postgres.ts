import fs from "node:fs";
import Sqlite from "better-sqlite3";
import { DatabaseLockedError, lockDatabase } from "./lock";
import type { Migration } from "./migrations";
import { DIALECTS, type Sql, type SqlParam } from "./sql";
import { SqliteDatabase } from "./sqlite-database";
import { PostgresDatabase } from "./postgres/database";
import { migratePostgres } from "./postgres/migrate";
import { createPostgresPool } from "./postgres/pool";

/**
 * Moves a gateway's whole SQLite database into an empty PostgreSQL database (`npm run
 * migrate:sqlite-to-postgres`), checked on both sides. The SQLite file is only read; PostgreSQL gets
 * everything in one transaction, so a copy that fails any check leaves it as it found it (migrated, empty).
 *
 * In order:
 * 1. SQLite: the file is locked as a gateway locks it (./lock.ts), so no gateway serves from it meanwhile,
 *    and opened read-only. Its schema must be this gateway's latest version; its pages must pass
 *    quick_check and its foreign keys foreign_key_check; its books must balance (the ledger's invariants).
 *    Everything is read in one read transaction: one snapshot, whatever else opens the file.
 * 2. PostgreSQL: the migrations are applied, and the copy is refused unless every table to fill is empty, and
 *    no balance or usage delta is pending: it never merges into a database a gateway has used. The tables are
 *    locked for the copy.
 * 3. Every table, parents before children (the order comes from PostgreSQL's foreign keys), columns by
 *    name, in INSERTs of up to 500 rows. Balances are not copied: each (account, bucket) row starts at 0 and
 *    the postings, inserted in their original order, move it through the same trigger that moved it on SQLite.
 * 4. Each identity column's sequence is moved past the copied ids, so the next entry, posting or call gets
 *    a new number.
 * 5. Checks before the commit: every table holds as many rows as on SQLite; every rebuilt balance equals
 *    SQLite's to the base unit; the usage days copied equal what the copied calls add up to (the calls' trigger
 *    counted each again as a pending delta, which is then dropped); the ledger's invariants hold on PostgreSQL.
 *    Any difference rolls it all back.
 *
 * db/ knows nothing of the domain, so the caller hands over the SQLite schema (server/schema.ts) and the
 * ledger's invariants (server/ledger/invariants.ts), as it hands the schema to openDatabase.
 */

export interface CopySqliteToPostgresOptions {
  /** The gateway's SQLite file (DB_PATH). No gateway may be running on it. */
  sqlitePath: string;
  /** The PostgreSQL database to fill (DATABASE_URL): new, or migrated but holding no data. */
  databaseUrl: string;
  /** The SQLite migrations this gateway applies (server/schema.ts's SCHEMA): the file must be at the last one. */
  sqliteSchema: readonly Migration[];
  /** The ledger's invariants (server/ledger/invariants.ts's assertBalanced): throws unless the books balance. */
  assertBalanced: (sql: Sql) => Promise<void>;
  /** Told of each step, one line at a time. */
  log?: (line: string) => void;
}

export interface CopiedTable {
  table: string;
  rows: number;
}

export interface MovedSequence {
  table: string;
  column: string;
  /** The value the identity hands out next. */
  next: bigint;
}

export interface CopySqliteToPostgresReport {
  /** The SQLite file's schema version (this gateway's latest). */
  schemaVersion: number;
  /** Every copied table and its row count (equal on both sides), in the order copied: parents first. */
  tables: CopiedTable[];
  /** How many (account, bucket) balances the postings rebuilt, each found equal to SQLite's. */
  balances: number;
  /** Each identity column, moved past the copied ids. */
  sequences: MovedSequence[];
}

/** Why a copy was refused or undone, as a stable code. */
export type CopyRefusal =
  /** The SQLite file does not exist or is not a database. */
  | "sqlite_unreadable"
  /** A gateway is running on the SQLite file. */
  | "sqlite_in_use"
  /** The SQLite file's schema is older than this gateway's (or it is not a gateway's database). */
  | "sqlite_schema_outdated"
  /** The SQLite file was migrated by a newer gateway. */
  | "sqlite_schema_newer"
  /** quick_check or foreign_key_check found damage in the SQLite file. */
  | "sqlite_damaged"
  /** The SQLite ledger's books do not balance. */
  | "sqlite_books_unbalanced"
  /** The two engines' tables or columns do not correspond. */
  | "schemas_differ"
  /** The PostgreSQL database already holds data. */
  | "target_not_empty"
  /** The SQLite file's usage days are not what its calls add up to. */
  | "usage_differs"
  /** Another session (a gateway) holds the PostgreSQL tables. */
  | "target_in_use"
  /** After the copy, a table's row count differs between the engines. */
  | "row_counts_differ"
  /** After the copy, a balance rebuilt from the postings differs from SQLite's. */
  | "balances_differ"
  /** After the copy, the ledger's invariants fail on PostgreSQL. */
  | "postgres_books_unbalanced";

/** A refused or undone copy: nothing was committed to PostgreSQL. The message is one line, for an operator. */
export class CopyToPostgresError extends Error {
  override name = "CopyToPostgresError";
  constructor(
    readonly reason: CopyRefusal,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Pending balance deltas folded per statement at the end of the copy. */
const ROLL_UP_ROWS = 50_000;
/** Rows per INSERT statement (fewer for a wide table: PostgreSQL binds at most 65535 parameters). */
const BATCH_ROWS = 500;
const MAX_PARAMS = 65_535;

/** Tables neither engine copies: each engine's own record of its migrations. */
const BOOKKEEPING = "schema_migrations";
/**
 * PostgreSQL's own tables, which a SQLite file has no counterpart for: the replicas sharing the database, the
 * balance deltas captures leave pending (migration 0016), which the copy's postings make through the trigger, and
 * the calls pending in their usage days (migration 0019), which the copy's calls make.
 */
const PENDING_DELTAS = ["ledger_balance_deltas", "usage_day_deltas"] as const;
const POSTGRES_ONLY_TABLES: readonly string[] = ["gateway_replicas", ...PENDING_DELTAS];
/** A PostgreSQL column of this name that SQLite lacks is SQLite's implicit rowid, made explicit (calls.rowid). */
const ROWID = "rowid";
/**
 * Columns not copied but started from a value: a balance starts at 0 and the postings move it (the
 * postings_move_balance trigger), so the copy rebuilds every balance from the journal, and then compares.
 */
const STARTS_AT: Readonly<Record<string, string>> = { "ledger_accounts.balance": "0" };

/** Copies the SQLite file at `sqlitePath` into the PostgreSQL database at `databaseUrl`; see the file's comment. */
export async function copySqliteToPostgres(options: CopySqliteToPostgresOptions): Promise<CopySqliteToPostgresReport> {
  const log = options.log ?? (() => {});
  const { sqlitePath } = options;
  if (!fs.existsSync(sqlitePath)) throw new CopyToPostgresError("sqlite_unreadable", `${sqlitePath} does not exist`);

  let unlock: () => void;
  try {
    unlock = lockDatabase(sqlitePath);
  } catch (error) {
    if (error instanceof DatabaseLockedError) throw new CopyToPostgresError("sqlite_in_use", error.message, { cause: error });
    throw error;
  }
  let db: Sqlite.Database | undefined;
  try {
    try {
      db = new Sqlite(sqlitePath, { readonly: true, fileMustExist: true });
      db.defaultSafeIntegers(true);
      // One read transaction for everything that follows: every check and every row comes from one snapshot.
      db.exec("BEGIN");
      db.prepare("SELECT COUNT(*) FROM sqlite_master").get();
    } catch (error) {
      throw new CopyToPostgresError("sqlite_unreadable", `${sqlitePath} is not a readable SQLite database: ${(error as Error).message}`, {
        cause: error,
      });
    }
    const source = await checkSqlite(db, options, log);

    const pool = createPostgresPool({
      url: options.databaseUrl,
      applicationName: "skill-gateway-migrate",
      // Counting and checking a large ledger may take longer than a gateway's statements may.
      statementTimeoutMs: 0,
      max: 2,
    });
    try {
      const { applied } = await migratePostgres(pool);
      log(applied.length > 0 ? `PostgreSQL: applied migrations ${applied.join(", ")}` : "PostgreSQL: schema up to date");
      const plan = await planCopy(new PostgresDatabase(pool), source);
      // A durable transaction: the copy is on disk when this resolves, never committed with synchronous_commit off.
      const report = await new PostgresDatabase(pool).transaction((tx) => copy(tx, db!, plan, source, options, log), { durable: true });
      log("committed");
      return report;
    } finally {
      await pool.end();
    }
  } finally {
    if (db?.open) {
      if (db.inTransaction) db.exec("COMMIT");
      db.close();
    }
    unlock();
  }
}

/** What the SQLite file holds, as the copy needs it. */
interface SqliteSource {
  schemaVersion: number;
  tables: Map<string, { columns: string[]; withoutRowid: boolean; rows: bigint }>;
}

/** Refuses a SQLite file that is not at this gateway's schema, is damaged, or whose books do not balance. */
async function checkSqlite(db: Sqlite.Database, options: CopySqliteToPostgresOptions, log: (line: string) => void): Promise<SqliteSource> {
  const { sqlitePath } = options;
  const latest = options.sqliteSchema[options.sqliteSchema.length - 1]?.version ?? 0;
  const hasMigrations = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(BOOKKEEPING) !== undefined;
  const version = hasMigrations ? Number((db.prepare(`SELECT MAX(version) FROM ${BOOKKEEPING}`).pluck().get() as bigint | null) ?? 0) : 0;
  if (version < latest) {
    throw new CopyToPostgresError(
      "sqlite_schema_outdated",
      `${sqlitePath} is at schema version ${version}, this gateway's is ${latest}: start the gateway once on it (with DB_PATH=${sqlitePath}, no DATABASE_URL) so it migrates, stop it, then copy`,
    );
  }
  if (version > latest) {
    throw new CopyToPostgresError(
      "sqlite_schema_newer",
      `${sqlitePath} is at schema version ${version}, newer than this gateway's ${latest}: copy it with the gateway that migrated it`,
    );
  }

  const quick = db.prepare("PRAGMA quick_check").pluck().all() as string[];
  if (quick.length !== 1 || quick[0] !== "ok") {
    throw new CopyToPostgresError("sqlite_damaged", `${sqlitePath} fails PRAGMA quick_check: ${quick.slice(0, 3).join("; ")}`);
  }
  const orphans = db.prepare("PRAGMA foreign_key_check").all() as { table: string; parent: string }[];
  if (orphans.length > 0) {
    throw new CopyToPostgresError(
      "sqlite_damaged",
      `${sqlitePath} has ${orphans.length} row(s) whose foreign key names no row (first: a ${orphans[0].table} row without its ${orphans[0].parent})`,
    );
  }
  try {
    await options.assertBalanced(new SqliteDatabase(db));
  } catch (error) {
    throw new CopyToPostgresError("sqlite_books_unbalanced", `${sqlitePath}: ${(error as Error).message}`, { cause: error });
  }
  log(`SQLite: ${sqlitePath} at schema version ${version}, intact, books balanced`);

  const tables: SqliteSource["tables"] = new Map();
  const list = db.prepare("PRAGMA table_list").all() as { schema: string; name: string; type: string; wr: bigint }[];
  for (const t of list) {
    if (t.schema !== "main" || t.type !== "table" || t.name.startsWith("sqlite_") || t.name === BOOKKEEPING) continue;
    const columns = (db.pragma(`table_info(${quote(t.name)})`) as { name: string }[]).map((c) => c.name);
    const rows = db
      .prepare(`SELECT COUNT(*) FROM ${quote(t.name)}`)
      .pluck()
      .get() as bigint;
    tables.set(t.name, { columns, withoutRowid: t.wr === 1n, rows });
  }
  return { schemaVersion: version, tables };
}

/** One table's copy: PostgreSQL's columns, and the SQLite expression each is read from. */
interface TablePlan {
  table: string;
  columns: { name: string; from: string }[];
  orderByRowid: boolean;
}

interface CopyPlan {
  tables: TablePlan[];
  identities: { table: string; column: string }[];
}

/** The tables in foreign-key order with their columns matched by name; refuses schemas that do not correspond. */
async function planCopy(pg: Sql, source: SqliteSource): Promise<CopyPlan> {
  const columnRows = await pg.all<{ table_name: string; column_name: string; identity: string }>(
    `SELECT c.relname AS table_name, a.attname AS column_name, a.attidentity::text AS identity
     FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
     WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY c.relname, a.attnum`,
  );
  const pgColumns = new Map<string, string[]>();
  const identities: CopyPlan["identities"] = [];
  for (const r of columnRows) {
    if (r.table_name === BOOKKEEPING || POSTGRES_ONLY_TABLES.includes(r.table_name)) continue;
    pgColumns.set(r.table_name, [...(pgColumns.get(r.table_name) ?? []), r.column_name]);
    if (r.identity !== "") identities.push({ table: r.table_name, column: r.column_name });
  }

  const onlySqlite = [...source.tables.keys()].filter((t) => !pgColumns.has(t));
  const onlyPostgres = [...pgColumns.keys()].filter((t) => !source.tables.has(t));
  if (onlySqlite.length > 0 || onlyPostgres.length > 0) {
    throw new CopyToPostgresError(
      "schemas_differ",
      `the engines' tables differ: only on SQLite [${onlySqlite.join(", ")}], only on PostgreSQL [${onlyPostgres.join(", ")}]`,
    );
  }

  const edges = await pg.all<{ child: string; parent: string }>(
    `SELECT child.relname AS child, parent.relname AS parent
     FROM pg_constraint con
     JOIN pg_class child ON child.oid = con.conrelid
     JOIN pg_class parent ON parent.oid = con.confrelid
     WHERE con.contype = 'f' AND con.connamespace = current_schema()::regnamespace`,
  );
  const order = foreignKeyOrder([...pgColumns.keys()], edges);

  const tables = order.map((table): TablePlan => {
    const sqlite = source.tables.get(table)!;
    const pgCols = pgColumns.get(table)!;
    const lost = sqlite.columns.filter((c) => !pgCols.includes(c));
    if (lost.length > 0) throw new CopyToPostgresError("schemas_differ", `PostgreSQL's ${table} has no column ${lost.join(", ")}`);
    const columns = pgCols.map((name) => {
      const startsAt = STARTS_AT[`${table}.${name}`];
      if (startsAt !== undefined) return { name, from: `${startsAt} AS ${quote(name)}` };
      if (sqlite.columns.includes(name)) return { name, from: quote(name) };
      if (name === ROWID && !sqlite.withoutRowid) return { name, from: `rowid AS ${quote(name)}` };
      throw new CopyToPostgresError("schemas_differ", `SQLite's ${table} has no column ${name}`);
    });
    return { table, columns, orderByRowid: !sqlite.withoutRowid };
  });
  return { tables, identities };
}

/**
 * The tables ordered so each comes after every table its foreign keys name (ties alphabetically, so the
 * order is the same on every run). A table naming itself is ordered by its rows' own order (rowid).
 */
export function foreignKeyOrder(tables: readonly string[], edges: readonly { child: string; parent: string }[]): string[] {
  const parents = new Map(tables.map((t) => [t, new Set<string>()]));
  for (const { child, parent } of edges) {
    if (child !== parent && parents.has(child) && parents.has(parent)) parents.get(child)!.add(parent);
  }
  const order: string[] = [];
  const done = new Set<string>();
  while (order.length < tables.length) {
    const ready = tables.filter((t) => !done.has(t) && [...parents.get(t)!].every((p) => done.has(p))).sort();
    if (ready.length === 0) {
      const left = tables.filter((t) => !done.has(t));
      throw new Error(`the foreign keys of ${left.join(", ")} form a cycle: no order copies them parent first`);
    }
    order.push(ready[0]);
    done.add(ready[0]);
  }
  return order;
}

/** The copy itself, inside PostgreSQL's transaction `tx`; throws (rolling everything back) on any difference. */
async function copy(
  tx: Sql,
  db: Sqlite.Database,
  plan: CopyPlan,
  source: SqliteSource,
  options: CopySqliteToPostgresOptions,
  log: (line: string) => void,
): Promise<CopySqliteToPostgresReport> {
  const names = plan.tables.map((t) => quote(t.table));
  try {
    // Nobody else writes the tables until the commit; a gateway starting meanwhile waits, then finds the copy.
    await tx.run(`LOCK TABLE ${names.join(", ")} IN EXCLUSIVE MODE`);
  } catch (error) {
    if ((error as { code?: string }).code === "55P03") {
      throw new CopyToPostgresError(
        "target_in_use",
        "another session holds the PostgreSQL tables: stop every gateway using this database",
        {
          cause: error,
        },
      );
    }
    throw error;
  }
  // The copied tables, and the pending deltas the copy's postings and calls make (a stray one would be added to them).
  for (const table of [...plan.tables.map((t) => t.table), ...PENDING_DELTAS]) {
    if ((await tx.one(`SELECT 1 FROM ${quote(table)} LIMIT 1`)) !== undefined) {
      throw new CopyToPostgresError(
        "target_not_empty",
        `the PostgreSQL database already holds data (${table} is not empty): the copy goes only into an empty database, never merges into one in use`,
      );
    }
  }

  const tables: CopiedTable[] = [];
  for (const t of plan.tables) {
    const rows = await copyTable(tx, db, t);
    tables.push({ table: t.table, rows });
    log(`copied ${t.table}: ${rows} row(s)`);
  }

  const sequences: MovedSequence[] = [];
  for (const { table, column } of plan.identities) {
    const next = await tx.value<bigint>(`SELECT COALESCE(MAX(${quote(column)}), 0) + 1 FROM ${quote(table)}`);
    await tx.value("SELECT setval(pg_get_serial_sequence(?, ?), ?, false)", [quote(table), column, next!]);
    sequences.push({ table, column, next: next! });
  }
  log(`identities moved: ${sequences.map((s) => `${s.table}.${s.column} next ${s.next}`).join(", ")}`);

  for (const { table } of plan.tables) {
    const expected = source.tables.get(table)!.rows;
    const copied = await tx.value<bigint>(`SELECT COUNT(*) FROM ${quote(table)}`);
    if (copied !== expected) {
      throw new CopyToPostgresError("row_counts_differ", `${table} holds ${copied} row(s) on PostgreSQL and ${expected} on SQLite`);
    }
  }

  const usage = await compareUsage(tx);
  log(`usage: ${usage} (account, day, key, skill) row(s), each what the copied calls add up to`);

  // The postings' trigger left a capture's postings pending (migration 0016); folded in before the commit, the rows hold
  // every balance whole, as SQLite's do (in this transaction: the copy's COMMIT waits for the flush).
  while ((await tx.value<bigint>("SELECT ledger_roll_up(?, 0)", [ROLL_UP_ROWS]))! > 0n);
  const balances = await compareBalances(tx, db);
  log(`balances: ${balances} (account, bucket) pair(s) rebuilt from the postings, each equal to SQLite's`);
  try {
    await options.assertBalanced(tx);
  } catch (error) {
    throw new CopyToPostgresError("postgres_books_unbalanced", `after the copy, on PostgreSQL: ${(error as Error).message}`, {
      cause: error,
    });
  }
  log("PostgreSQL: books balanced");
  return { schemaVersion: source.schemaVersion, tables, balances, sequences };
}

/** Copies one table's rows in INSERTs of up to BATCH_ROWS rows, in SQLite's row order; returns how many. */
async function copyTable(tx: Sql, db: Sqlite.Database, t: TablePlan): Promise<number> {
  const width = t.columns.length;
  const batchRows = Math.max(1, Math.min(BATCH_ROWS, Math.floor(MAX_PARAMS / width)));
  const select = db
    .prepare(`SELECT ${t.columns.map((c) => c.from).join(", ")} FROM ${quote(t.table)}${t.orderByRowid ? " ORDER BY rowid" : ""}`)
    .raw(true);
  const into = `INSERT INTO ${quote(t.table)} (${t.columns.map((c) => quote(c.name)).join(", ")}) VALUES `;
  const row = `(${t.columns.map(() => "?").join(", ")})`;
  let batch: SqlParam[] = [];
  let count = 0;
  const flush = async () => {
    const n = batch.length / width;
    if (n === 0) return;
    await tx.run(into + Array.from({ length: n }, () => row).join(", "), batch);
    count += n;
    batch = [];
  };
  // The iterator holds the SQLite connection between batches; nothing else reads it until the table is done.
  // Postings go in their original order, so each balance moves through the same values it did on SQLite.
  for (const values of select.iterate() as IterableIterator<SqlParam[]>) {
    batch.push(...values);
    if (batch.length >= batchRows * width) await flush();
  }
  await flush();
  return count;
}

/** Compares every (account, bucket) balance, to the base unit; returns how many there are. */
async function compareBalances(tx: Sql, db: Sqlite.Database): Promise<number> {
  // Each engine's balances (Dialect.balances): PostgreSQL's add the deltas its trigger left pending.
  const read = (balances: string) => `SELECT account_id, bucket, balance FROM ${balances}`;
  type BalanceRow = { account_id: string; bucket: string; balance: bigint };
  const key = (r: BalanceRow) => `${r.account_id}/${r.bucket}`;
  const sqlite = new Map((db.prepare(read(DIALECTS.sqlite.balances)).all() as BalanceRow[]).map((r) => [key(r), r.balance]));
  const postgres = new Map((await tx.all<BalanceRow>(read(tx.dialect.balances))).map((r) => [key(r), r.balance]));
  const differences: string[] = [];
  for (const k of new Set([...sqlite.keys(), ...postgres.keys()])) {
    const a = sqlite.get(k);
    const b = postgres.get(k);
    if (a !== b) differences.push(`${k}: SQLite ${a ?? "none"}, PostgreSQL ${b ?? "none"}`);
  }
  if (differences.length > 0) {
    throw new CopyToPostgresError(
      "balances_differ",
      `${differences.length} balance(s) rebuilt from the postings differ from SQLite's: ${differences.slice(0, 5).join("; ")}`,
    );
  }
  return sqlite.size;
}

/**
 * The usage days copied from SQLite against what the copied calls add up to: the calls' trigger (migration 0019) made
 * a pending delta of each counted call, on top of the copied days. Equal, the deltas are dropped (the days hold them
 * already); a difference is the SQLite file's and refuses the copy. Returns how many day rows were compared.
 */
async function compareUsage(tx: Sql): Promise<number> {
  const differences = await tx.all<{ account_id: string; day: bigint; api_key_id: string; skill_id: string }>(
    `WITH counted AS (
       SELECT account_id, day, api_key_id, skill_id, COUNT(*) AS calls, SUM(spend_micros) AS spend_micros
       FROM usage_day_deltas GROUP BY account_id, day, api_key_id, skill_id
     )
     SELECT COALESCE(u.account_id, c.account_id) AS account_id, COALESCE(u.day, c.day) AS day,
            COALESCE(u.api_key_id, c.api_key_id) AS api_key_id, COALESCE(u.skill_id, c.skill_id) AS skill_id
     FROM usage_days u FULL OUTER JOIN counted c
       ON c.account_id = u.account_id AND c.day = u.day AND c.api_key_id = u.api_key_id AND c.skill_id = u.skill_id
     WHERE u.calls IS DISTINCT FROM c.calls OR u.spend_micros IS DISTINCT FROM c.spend_micros
     ORDER BY 1, 2, 3, 4 LIMIT 5`,
  );
  if (differences.length > 0) {
    throw new CopyToPostgresError(
      "usage_differs",
      `the SQLite file's usage days differ from what its calls add up to: ${differences
        .map((d) => `${d.account_id} day ${d.day} key ${d.api_key_id} skill ${d.skill_id}`)
        .join("; ")}`,
    );
  }
  await tx.run("DELETE FROM usage_day_deltas");
  return Number(await tx.value<bigint>("SELECT COUNT(*) FROM usage_days"));
}

/** A table or column name as an SQL identifier (the same quoting on both engines). */
function quote(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
