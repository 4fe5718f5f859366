import fs from "node:fs";
import path from "node:path";
import { expect } from "chai";

const SERVER = path.resolve(__dirname, "../../server");

/**
 * Where SQL may run: a module's store files (*-store.ts, store.ts), db/ (the handle, migrations, group commit) and
 * ledger/ (the books, whose write API is the only way money moves). The composition root and the development
 * stack are not allowed either: they build stores and hand them on.
 */
const MAY_RUN_SQL = /^(db|ledger)\/|(^|\/|-)store\.ts$/;

/**
 * A statement run through a database handle: the async interface's `db.one(`, `tx.all<Row>(`, `sql.value(`,
 * `ledger.db.run(` (server/db/sql.ts), and better-sqlite3's own `db.prepare(`, `this.db.exec(`, `db.pragma(`,
 * also split over lines. `db.transaction(` is not one: it opens a transaction whose `tx` the stores' methods
 * run their statements on, so a statement inside it still shows as `tx.run(`. The dependency-cruiser rule
 * `only-stores-hold-the-database` catches a file importing the SQLite handle; this catches one running SQL
 * through `ledger.db` or a transaction without importing anything.
 */
const RUNS_SQL = /\b(?:db|tx|sql|database)\s*\.\s*(?:one|all|value|run|prepare|exec|pragma|function|aggregate)\s*(?:<[^()]*>)?\s*\(/g;

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "web" && dir === SERVER ? [] : sourceFiles(full);
    return /\.(ts|cjs|js)$/.test(entry.name) ? [full] : [];
  });
}

/** Every `file:line: text` in `source` that runs SQL. */
function sqlRunsIn(file: string, source: string): string[] {
  return [...source.matchAll(RUNS_SQL)].map((match) => {
    const line = source.slice(0, match.index).split("\n").length;
    return `${file}:${line}: ${match[0]}`;
  });
}

describe("SQL runs only in stores, db/ and ledger/", () => {
  it("no other file under server/ runs a statement through a database handle", () => {
    const found = sourceFiles(SERVER)
      .map((file) => path.relative(SERVER, file).split(path.sep).join("/"))
      .filter((file) => !MAY_RUN_SQL.test(file))
      .flatMap((file) => sqlRunsIn(file, fs.readFileSync(path.join(SERVER, file), "utf8")));
    expect(found, "move these statements into the module's store").to.deep.equal([]);
  });

  it("would catch SQL run through ledger.db, on one line or split over several", () => {
    expect(sqlRunsIn("x.ts", 'ledger.db.prepare("SELECT 1").get();')).to.have.length(1);
    expect(sqlRunsIn("x.ts", "const rows = this.ledger.db\n  .prepare(`SELECT 1`)\n  .all();")).to.deep.equal(["x.ts:1: db\n  .prepare("]);
    expect(sqlRunsIn("x.ts", 'db.exec("DELETE FROM holds")')).to.have.length(1);
    // Not SQL: another object's method that happens to be called prepare.
    expect(sqlRunsIn("x.ts", "await this.ownerSigned.prepare(wallet)")).to.deep.equal([]);
  });

  it("would catch SQL run through the async interface, on a database, a transaction or ledger.db", () => {
    expect(sqlRunsIn("x.ts", 'await this.ledger.db.value("SELECT 1")')).to.have.length(1);
    expect(sqlRunsIn("x.ts", 'const row = await db.one<{ n: bigint }>("SELECT 1 AS n")')).to.have.length(1);
    expect(sqlRunsIn("x.ts", 'await tx.run("DELETE FROM holds WHERE id = ?", [id])')).to.have.length(1);
    expect(sqlRunsIn("x.ts", "const rows = await this.db\n  .all<Record<string, bigint>>(`SELECT 1`);")).to.deep.equal([
      "x.ts:1: db\n  .all<Record<string, bigint>>(",
    ]);
    expect(sqlRunsIn("x.ts", 'await sql.all("SELECT 1"); await database.run("DELETE FROM calls")')).to.have.length(2);
    // Not SQL of its own: a transaction's boundary (its statements run in stores, on `tx`), and other objects' run().
    expect(sqlRunsIn("x.ts", "await this.db.transaction(async (tx) => this.store.revoke(id, now, tx), { durable: true })")).to.deep.equal(
      [],
    );
    expect(sqlRunsIn("x.ts", "await this.loop.run(); await job.value(); await worker.all()")).to.deep.equal([]);
  });

  it("lets stores, db/ and ledger/ run SQL, and nothing else", () => {
    for (const file of [
      "settlement/exits-store.ts",
      "identity/sign-in-store.ts",
      "settlement/store.ts",
      "db/migrations.ts",
      "ledger/ledger.ts",
    ]) {
      expect(MAY_RUN_SQL.test(file), file).to.equal(true);
    }
    for (const file of [
      "settlement/exits.ts",
      "settlement/indexer.ts",
      "index.ts",
      "devstack/seed.ts",
      "http/routes/seller.ts",
      "restore.ts",
    ]) {
      expect(MAY_RUN_SQL.test(file), file).to.equal(false);
    }
  });
});
