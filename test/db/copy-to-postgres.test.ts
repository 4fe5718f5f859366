import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Sqlite from "better-sqlite3";
import { expect } from "chai";
import pg from "pg";
import {
  type CopyRefusal,
  type CopySqliteToPostgresReport,
  copySqliteToPostgres,
  CopyToPostgresError,
  foreignKeyOrder,
} from "../../server/db/copy-to-postgres";
import { openDatabase } from "../../server/db/db";
import type { Migration } from "../../server/db/migrations";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { migratePostgres } from "../../server/db/postgres/migrate";
import { createPostgresPool } from "../../server/db/postgres/pool";
import type { Sql } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { computeCharge } from "../../server/ledger/fees";
import { assertBalanced } from "../../server/ledger/invariants";
import { Ledger } from "../../server/ledger/ledger";
import { SCHEMA } from "../../server/schema";
import { type PostgresServer, startPostgresOrSkip } from "../helpers/postgres";

const ROOT = path.resolve(__dirname, "../..");
/** The calls row written with a rowid of its own, far from 1, so that keeping it is visible (the next call gets 42). */
const CALL_ROWID = 41n;

/**
 * A SQLite ledger with real activity, written through the Ledger and plain SQL: accounts, some 300 development
 * credits, holds captured (one of them batched for settlement), released and left open, and a row in the
 * catalogue, the keys, the calls log (rowid 41), the embedded wallets (a BLOB) and the outbox.
 */
async function buildLedgerFile(file: string, migrations: readonly Migration[] = SCHEMA): Promise<void> {
  const db = new SqliteDatabase(openDatabase(file, migrations));
  try {
    const ledger = await Ledger.open(db);
    const alice = await ledger.ensureAccount({ id: "user:alice", kind: "user", name: "Alice" });
    const bob = await ledger.ensureAccount({ id: "user:bob", kind: "user", name: "Bob", dailyCallCap: 500 });
    const seller = await ledger.ensureAccount({ id: "seller:acme", kind: "seller", name: "Acme" });
    await ledger.credit(alice.id, 10_000_000n, "dev_credit", "seed");
    await ledger.credit(bob.id, 3_000_000n, "dev_credit");
    // Enough postings (600) to take more than one INSERT of 500 rows.
    await db.transaction(async (tx) => {
      for (let i = 1n; i <= 300n; i++) await ledger.credit(bob.id, i, "dev_credit", `top-up ${i}`, tx);
    });
    const charge = computeCharge(1_000_000n, "included", 1000n);
    const holds: string[] = [];
    for (const accountId of [alice.id, alice.id, alice.id, bob.id, bob.id]) {
      const result = await ledger.hold({ accountId, sellerAccountId: seller.id, skillId: "skill:echo", charge });
      if (!result.ok) throw new Error(`hold refused: ${result.reason}`);
      holds.push(result.hold.id);
    }
    await ledger.capture(holds[0]);
    await ledger.capture(holds[1]);
    await ledger.release(holds[2]);
    await ledger.capture(holds[3]);
    // holds[4] stays open.
    await db.transaction(async (tx) => {
      await tx.run(
        `INSERT INTO settlement_batches (number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, created_at)
         VALUES (1, 'pending', ?, 1, ?, ?, 7, ?)`,
        [`0x${"ab".repeat(32)}`, charge.chargedMicros, charge.feeMicros, Date.now()],
      );
      await ledger.assignHoldToBatch(holds[0], 1, tx);
    });
    const now = BigInt(Date.now());
    await db.run(
      `INSERT INTO skills (id, slug, name, price_micros, seller_account_id, backend_url, timeout_ms, signing_secret, created_at, updated_at)
       VALUES ('skill:echo', 'echo', 'Echo', 1000000, ?, 'http://127.0.0.1:9/echo', 5000, 'secret', ?, ?)`,
      [seller.id, now, now],
    );
    await db.run(
      "INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES ('key:1', ?, 'laptop', 'atom_abc', 'sha256:1', ?)",
      [alice.id, now],
    );
    await db.run(
      `INSERT INTO calls (rowid, id, account_id, api_key_id, skill_id, endpoint, http_status, outcome, charged_micros, hold_id, latency_us, created_at)
       VALUES (?, 'call:1', ?, 'key:1', 'skill:echo', 'call', 200, 'ok', ?, ?, 1234, ?)`,
      [CALL_ROWID, alice.id, charge.chargedMicros, holds[0], now],
    );
    await db.run(
      `INSERT INTO calls (id, account_id, api_key_id, skill_id, endpoint, http_status, outcome, latency_us, created_at)
       VALUES ('call:2', ?, 'key:1', 'skill:echo', 'skill_call', 402, 'insufficient_balance', 99, ?)`,
      [bob.id, now],
    );
    await db.run(
      `INSERT INTO embedded_wallets (account_id, address, owner_kind, owner_address, encrypted_owner_key, created_at)
       VALUES (?, ?, 'server', ?, ?, ?)`,
      [alice.id, `0x${"11".repeat(20)}`, `0x${"22".repeat(20)}`, Buffer.from([0, 1, 2, 254, 255]), now],
    );
    await db.run("INSERT INTO outbox (to_address, subject, body, created_at) VALUES ('a@example.com', 'Sign in', 'link', ?)", [now]);
  } finally {
    await db.close();
  }
}

/** The tables a copy fills: every PostgreSQL table but the migrations' record, the replicas registry and the deltas (and no view). */
async function copiedTables(sql: Sql): Promise<{ table: string; columns: string[] }[]> {
  const rows = await sql.all<{ table_name: string; column_name: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
     WHERE table_schema = current_schema() AND table_name NOT IN ('schema_migrations', 'gateway_replicas', 'ledger_balance_deltas', 'usage_day_deltas', 'ledger_balances', 'usage_by_day')
     ORDER BY table_name, ordinal_position`,
  );
  const tables = new Map<string, string[]>();
  for (const r of rows) tables.set(r.table_name, [...(tables.get(r.table_name) ?? []), r.column_name]);
  return [...tables].map(([table, columns]) => ({ table, columns }));
}

/** One row as text, byte for byte: bigints as digits, BLOB/BYTEA as hex. */
function canonical(row: Record<string, unknown>): string {
  const values = Object.entries(row).map(([k, v]) => [k, Buffer.isBuffer(v) ? `hex:${v.toString("hex")}` : v]);
  return JSON.stringify(Object.fromEntries(values), (_k, v: unknown) => (typeof v === "bigint" ? `${v}n` : v));
}

/** Every row of every copied table (PostgreSQL's columns, calls.rowid included), each table's rows sorted. */
async function dump(sql: Sql, tables: { table: string; columns: string[] }[]): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const { table, columns } of tables) {
    const rows = await sql.all<Record<string, unknown>>(`SELECT ${columns.join(", ")} FROM ${table}`);
    out[table] = rows.map(canonical).sort();
  }
  return out;
}

/** The SQLite file read-only, as a Sql. */
function readSqlite(file: string): { sql: SqliteDatabase; close(): void } {
  const raw = new Sqlite(file, { readonly: true, fileMustExist: true });
  raw.defaultSafeIntegers(true);
  return { sql: new SqliteDatabase(raw), close: () => raw.close() };
}

async function refusal(promise: Promise<unknown>): Promise<CopyToPostgresError> {
  const error = await promise.then(
    () => expect.fail("the copy should have been refused"),
    (e: unknown) => e,
  );
  expect(error).to.be.instanceOf(CopyToPostgresError);
  return error as CopyToPostgresError;
}

function expectRefused(error: CopyToPostgresError, reason: CopyRefusal, message: RegExp): void {
  expect(error.reason).to.equal(reason);
  expect(error.message).to.match(message);
  expect(error.message).not.to.include("\n");
}

describe("foreignKeyOrder", () => {
  it("puts every table after the tables it references, ties alphabetically, and refuses a cycle", () => {
    const edges = [
      { child: "postings", parent: "entries" },
      { child: "postings", parent: "ledger_accounts" },
      { child: "ledger_accounts", parent: "accounts" },
      { child: "holds", parent: "accounts" },
      { child: "tree", parent: "tree" },
    ];
    expect(foreignKeyOrder(["postings", "holds", "entries", "ledger_accounts", "accounts", "tree"], edges)).to.deep.equal([
      "accounts",
      "entries",
      "holds",
      "ledger_accounts",
      "postings",
      "tree",
    ]);
    expect(() =>
      foreignKeyOrder(
        ["a", "b"],
        [
          { child: "a", parent: "b" },
          { child: "b", parent: "a" },
        ],
      ),
    ).to.throw(/a, b form a cycle/);
  });
});

describe("copySqliteToPostgres", function () {
  this.timeout(120_000);
  let server: PostgresServer;
  let dir: string;
  let ledgerFile: string;
  let databases = 0;
  const pools: pg.Pool[] = [];

  before(async function () {
    server = await startPostgresOrSkip(this);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "copy-to-pg-"));
    ledgerFile = path.join(dir, "gateway.db");
    await buildLedgerFile(ledgerFile);
  });

  after(async () => {
    await server?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  afterEach(async () => {
    for (const pool of pools.splice(0)) await pool.end().catch(() => {});
  });

  /** A new, empty database on the server; its URL. */
  /** The test's ledger file built anew as `name` in the scratch folder, then changed behind the gateway's back by `sql`. */
  async function tamperedLedgerFile(name: string, sql: string): Promise<string> {
    const file = path.join(dir, name);
    await buildLedgerFile(file);
    const raw = openDatabase(file, SCHEMA);
    raw.prepare(sql).run();
    raw.close();
    return file;
  }

  async function freshDatabase(): Promise<string> {
    const name = `copy_${++databases}`;
    await server.createDatabase(name);
    return server.urlFor(name);
  }

  function open(url: string): PostgresDatabase {
    const pool = createPostgresPool({ url, max: 4 });
    pools.push(pool);
    return new PostgresDatabase(pool);
  }

  function copy(sqlitePath: string, databaseUrl: string): Promise<CopySqliteToPostgresReport> {
    return copySqliteToPostgres({ sqlitePath, databaseUrl, sqliteSchema: SCHEMA, assertBalanced });
  }

  /** How many tables the database has: none means nothing was written to it, not even the schema. */
  async function tableCount(url: string): Promise<bigint> {
    return (await open(url).value<bigint>("SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()"))!;
  }

  it("copies every table row for row, rebuilds every balance from the postings, and the books balance", async () => {
    const url = await freshDatabase();
    const report = await copy(ledgerFile, url);
    const target = open(url);
    const tables = await copiedTables(target);
    const source = readSqlite(ledgerFile);
    try {
      expect(await dump(target, tables)).to.deep.equal(await dump(source.sql, tables));
      for (const { table, rows } of report.tables) {
        expect(BigInt(rows), table).to.equal(await source.sql.value(`SELECT COUNT(*) FROM ${table}`));
      }
      const balances = await source.sql.all("SELECT account_id, bucket, balance FROM ledger_accounts ORDER BY account_id, bucket");
      // PostgreSQL's balances add the deltas its trigger left pending (migration 0016): Dialect.balances.
      expect(
        await target.all(`SELECT account_id, bucket, balance FROM ${target.dialect.balances} ORDER BY account_id, bucket`),
      ).to.deep.equal(balances);
      expect(report.balances).to.equal(balances.length);
    } finally {
      source.close();
    }
    await assertBalanced(target);

    expect(report.schemaVersion).to.equal(SCHEMA[SCHEMA.length - 1].version);
    expect(report.tables.map((t) => t.table).sort()).to.deep.equal(tables.map((t) => t.table).sort());
    const position = (table: string) => report.tables.findIndex((t) => t.table === table);
    expect(position("accounts")).to.be.below(position("ledger_accounts"));
    expect(position("ledger_accounts")).to.be.below(position("postings"));
    expect(position("entries")).to.be.below(position("postings"));
    expect(position("settlement_batches")).to.be.below(position("holds"));
    const rows = Object.fromEntries(report.tables.map((t) => [t.table, t.rows]));
    expect(rows).to.include({ accounts: 7, holds: 5, skills: 1, api_keys: 1, calls: 2, embedded_wallets: 1, outbox: 1 });
    expect(rows.postings, "postings, in more than one INSERT").to.be.above(500);
    expect(rows).not.to.have.property("gateway_replicas");
    expect(rows).not.to.have.property("schema_migrations");

    expect(await target.value("SELECT rowid FROM calls WHERE id = 'call:1'")).to.equal(CALL_ROWID);
    expect(await target.value("SELECT encrypted_owner_key FROM embedded_wallets")).to.deep.equal(Buffer.from([0, 1, 2, 254, 255]));
    expect(await target.value("SELECT status FROM holds WHERE batch_number = 1")).to.equal("captured");
  });

  it("moves every identity past the copied ids, so new entries, postings and calls get new numbers", async () => {
    const url = await freshDatabase();
    const report = await copy(ledgerFile, url);
    const target = open(url);
    const copied = {
      entries: (await target.value<bigint>("SELECT MAX(id) FROM entries"))!,
      postings: (await target.value<bigint>("SELECT MAX(id) FROM postings"))!,
      outbox: (await target.value<bigint>("SELECT MAX(id) FROM outbox"))!,
      calls: (await target.value<bigint>("SELECT MAX(rowid) FROM calls"))!,
    };
    expect(copied.calls > CALL_ROWID, "call:2 numbered after call:1").to.equal(true);
    expect(report.sequences).to.deep.include.members([
      { table: "entries", column: "id", next: copied.entries + 1n },
      { table: "postings", column: "id", next: copied.postings + 1n },
      { table: "calls", column: "rowid", next: copied.calls + 1n },
      { table: "outbox", column: "id", next: copied.outbox + 1n },
    ]);

    const ledger = await Ledger.open(new PostgresDatabase(createPostgresPool({ url })));
    try {
      await ledger.credit("user:alice", 1_000n, "dev_credit", "after the move");
    } finally {
      await ledger.db.close();
    }
    const entry = await target.one<{ id: bigint; posting: bigint }>(
      "SELECT e.id, MIN(p.id) AS posting FROM entries e JOIN postings p ON p.entry_id = e.id WHERE e.memo = 'after the move' GROUP BY e.id",
    );
    expect(entry!.id).to.equal(copied.entries + 1n);
    expect(entry!.posting).to.equal(copied.postings + 1n);
    const rowid = await target.value(
      `INSERT INTO calls (id, account_id, api_key_id, skill_id, endpoint, http_status, outcome, latency_us, created_at)
       VALUES ('call:new', 'user:alice', 'key:1', 'skill:echo', 'call', 200, 'ok', 1, 1) RETURNING rowid`,
    );
    expect(rowid).to.equal(copied.calls + 1n);
    expect(
      await target.value("INSERT INTO outbox (to_address, subject, body, created_at) VALUES ('b', 's', 'b', 1) RETURNING id"),
    ).to.equal(copied.outbox + 1n);
    await assertBalanced(target);
  });

  it("refuses a second copy into the same database, and changes nothing in it", async () => {
    const url = await freshDatabase();
    await copy(ledgerFile, url);
    const target = open(url);
    const tables = await copiedTables(target);
    const before = await dump(target, tables);
    const error = await refusal(copy(ledgerFile, url));
    expectRefused(error, "target_not_empty", /already holds data \(accounts is not empty\).*never merges/);
    expect(await dump(target, tables)).to.deep.equal(before);
  });

  it("refuses a SQLite ledger whose books do not balance, before writing anything to PostgreSQL", async () => {
    const file = await tamperedLedgerFile(
      "unbalanced.db",
      "UPDATE ledger_accounts SET balance = balance + 1 WHERE account_id = 'user:alice' AND bucket = 'available'",
    );
    const url = await freshDatabase();
    const error = await refusal(copy(file, url));
    expectRefused(error, "sqlite_books_unbalanced", /every balance equals the sum of its postings/);
    expect(await tableCount(url)).to.equal(0n);
  });

  it("refuses a SQLite file at an older schema version, saying to start the gateway on it first", async () => {
    const file = path.join(dir, "old.db");
    openDatabase(file, SCHEMA.slice(0, -1)).close();
    const url = await freshDatabase();
    const error = await refusal(copy(file, url));
    expectRefused(error, "sqlite_schema_outdated", new RegExp(`schema version ${SCHEMA.length - 1}, .*start the gateway once on it`));
    expect(await tableCount(url)).to.equal(0n);
  });

  it("refuses a SQLite file a running gateway holds, and a file that does not exist", async () => {
    const url = await freshDatabase();
    // The lock a gateway takes (server/db/lock.ts), held by another live process: the PostgreSQL server will do.
    const lockFile = `${ledgerFile}.lock`;
    fs.writeFileSync(lockFile, String(server.pid), { flag: "wx" });
    try {
      expectRefused(await refusal(copy(ledgerFile, url)), "sqlite_in_use", new RegExp(`in use by another gateway \\(pid ${server.pid}\\)`));
    } finally {
      fs.unlinkSync(lockFile);
    }
    expectRefused(await refusal(copy(path.join(dir, "missing.db"), url)), "sqlite_unreadable", /does not exist/);
    expect(fs.existsSync(path.join(dir, "missing.db"))).to.equal(false);
    expect(await tableCount(url)).to.equal(0n);
  });

  for (const [table, row] of [
    [
      "usage_day_deltas",
      "(call_id, account_id, day, api_key_id, skill_id, spend_micros) VALUES ('call:stray', 'user:alice', 0, 'key:1', 'skill:echo', 1000)",
    ],
    ["ledger_balance_deltas", "(posting_id, account_id, bucket, amount) VALUES (1, 'user:alice', 'available', 1000)"],
  ] as const) {
    it(`refuses a database holding a pending delta of its own (${table}), and changes nothing in it`, async () => {
      const url = await freshDatabase();
      const target = open(url);
      await migratePostgres(target.pool);
      await target.run(`INSERT INTO ${table} ${row}`);
      const error = await refusal(copy(ledgerFile, url));
      expectRefused(error, "target_not_empty", new RegExp(`\\(${table} is not empty\\)`));
      expect(await target.value(`SELECT COUNT(*) FROM ${table}`)).to.equal(1n);
      expect(await target.value("SELECT COUNT(*) FROM accounts")).to.equal(0n);
    });
  }

  it("undoes the whole copy when a rebuilt balance differs from SQLite's", async () => {
    const url = await freshDatabase();
    const target = open(url);
    await migratePostgres(target.pool);
    // A sabotaged trigger that moves each balance twice: the copy must notice, and commit nothing.
    await target.run(`CREATE OR REPLACE FUNCTION postings_move_balance() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE ledger_accounts SET balance = balance + 2 * NEW.amount WHERE account_id = NEW.account_id AND bucket = NEW.bucket;
        RETURN NULL;
      END;
      $$`);
    const error = await refusal(copy(ledgerFile, url));
    expectRefused(error, "balances_differ", /user:alice\/available: SQLite \d+, PostgreSQL \d+/);
    for (const table of ["accounts", "ledger_accounts", "entries", "postings", "calls"]) {
      expect(await target.value(`SELECT COUNT(*) FROM ${table}`), table).to.equal(0n);
    }
  });

  it("undoes the whole copy when the SQLite file's usage days are not what its calls add up to", async () => {
    // The days only grow (their trigger), but a growth no call made is still a lie.
    const file = await tamperedLedgerFile("usage-off.db", "UPDATE usage_days SET calls = calls + 1 WHERE account_id = 'user:alice'");
    const url = await freshDatabase();
    const error = await refusal(copy(file, url));
    expectRefused(error, "usage_differs", /usage days differ from what its calls add up to: user:alice day \d+ key key:1 skill skill:echo/);
    const target = open(url);
    for (const table of ["accounts", "calls", "usage_days", "usage_day_deltas"]) {
      expect(await target.value(`SELECT COUNT(*) FROM ${table}`), table).to.equal(0n);
    }
  });

  describe("npm run migrate:sqlite-to-postgres", () => {
    function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
      const env = { ...process.env };
      delete env.DATABASE_URL;
      delete env.DB_PATH;
      return new Promise((resolve) => {
        execFile(
          process.execPath,
          ["-r", "ts-node/register/transpile-only", "scripts/migrate-sqlite-to-postgres.ts", ...args],
          { cwd: ROOT, env },
          (error, stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
        );
      });
    }

    it("prints a table of what it copied, then refuses a second run in one line with exit code 1, never showing the password", async () => {
      const url = await freshDatabase();
      const password = decodeURIComponent(new URL(url).password);
      const first = await run(["--from", ledgerFile, "--to", url]);
      expect(first.code, first.stderr).to.equal(0);
      expect(first.stdout).to.match(/^Copied .*gateway\.db \(schema version \d+\) into postgres:\/\/127\.0\.0\.1:\d+\/copy_\d+:$/m);
      expect(first.stdout).to.match(/^ {2}postings +\d+$/m);
      expect(first.stdout).to.match(/^ {2}calls +2$/m);
      expect(first.stdout).to.match(/^Balances: \d+ \(account, bucket\) pair\(s\)/m);

      const second = await run(["--from", ledgerFile, "--to", url]);
      expect(second.code).to.equal(1);
      const lines = second.stderr.trim().split("\n");
      expect(lines[lines.length - 1]).to.match(/^migrate:sqlite-to-postgres failed: the PostgreSQL database already holds data/);
      expect(second.stdout).to.equal("");
      for (const output of [first.stdout, first.stderr, second.stdout, second.stderr]) expect(output).not.to.include(password);
    });
  });
});
