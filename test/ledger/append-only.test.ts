import BetterSqlite from "better-sqlite3";
import { expect } from "chai";
import type { Database, Sql } from "../../server/db/sql";
import { assertBalanced } from "../../server/ledger/invariants";
import type { Ledger } from "../../server/ledger/ledger";
import { migrate } from "../../server/db/migrations";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { SCHEMA } from "../../server/schema";
import { describeEachEngine, type EngineName } from "../helpers/engines";
import { databaseAtVersion, writeLegacyBooks } from "../helpers/legacy-books";
import { APPEND_ONLY_TRIGGERS, allBalances, countRows, holdOk, makeLedger, makeParties, rejectionOf } from "../helpers/ledger";

const ENTRY_CHANGED = "entries are append-only: an entry cannot be changed, post a reversing entry instead";
const ENTRY_DELETED = "entries are append-only: an entry cannot be deleted, post a reversing entry instead";
const POSTING_CHANGED = "postings are append-only: a posting cannot be changed, post a reversing entry instead";
const POSTING_DELETED = "postings are append-only: a posting cannot be deleted, post a reversing entry instead";

/** How each engine's refusing trigger reports itself: SQLite's RAISE(ABORT), PostgreSQL's integrity_constraint_violation. */
const REFUSAL_CODE: Record<EngineName, string> = { sqlite: "SQLITE_CONSTRAINT_TRIGGER", postgres: "23000" };

type Journal = { entries: unknown[]; postings: unknown[] };

async function journalOf(sql: Sql): Promise<Journal> {
  return {
    entries: await sql.all("SELECT * FROM entries ORDER BY id"),
    postings: await sql.all("SELECT * FROM postings ORDER BY id"),
  };
}

/** Each way of rewriting history, the exact refusal the database answers it with, and the engines that have it. */
const REWRITES: { it: string; sql: string; refusal: string; engines?: readonly EngineName[] }[] = [
  {
    it: "refuses to change an entry's kind",
    sql: "UPDATE entries SET kind = 'hold' WHERE id = (SELECT MIN(id) FROM entries)",
    refusal: ENTRY_CHANGED,
  },
  { it: "refuses to change an entry's memo", sql: "UPDATE entries SET memo = 'rewritten'", refusal: ENTRY_CHANGED },
  { it: "refuses to delete an entry", sql: "DELETE FROM entries WHERE id = (SELECT MAX(id) FROM entries)", refusal: ENTRY_DELETED },
  { it: "refuses to delete every entry", sql: "DELETE FROM entries", refusal: ENTRY_DELETED },
  {
    it: "refuses to change a posting's amount",
    sql: "UPDATE postings SET amount = amount + 1 WHERE id = (SELECT MIN(id) FROM postings)",
    refusal: POSTING_CHANGED,
  },
  {
    it: "refuses to move a posting to another account",
    sql: "UPDATE postings SET account_id = 'platform', bucket = 'fees' WHERE bucket = 'earned'",
    refusal: POSTING_CHANGED,
  },
  { it: "refuses to delete a posting", sql: "DELETE FROM postings WHERE id = (SELECT MAX(id) FROM postings)", refusal: POSTING_DELETED },
  // A REPLACE deletes the row it replaces (openDatabase turns recursive triggers on so that this fires the DELETE trigger).
  {
    it: "refuses an INSERT OR REPLACE that would replace a posting",
    sql: "INSERT OR REPLACE INTO postings (id, entry_id, account_id, bucket, amount) SELECT id, entry_id, account_id, bucket, amount FROM postings LIMIT 1",
    refusal: POSTING_DELETED,
    engines: ["sqlite"],
  },
  {
    it: "refuses an INSERT OR REPLACE that would swap a hold's capture for a release",
    sql: "INSERT OR REPLACE INTO entries (kind, hold_id, memo, created_at) SELECT 'release', hold_id, 'swapped', 0 FROM entries WHERE kind = 'capture'",
    refusal: ENTRY_DELETED,
    engines: ["sqlite"],
  },
  // An upsert rewrites the row it conflicts with in place: an UPDATE, which the row trigger refuses (on both engines).
  {
    it: "refuses an upsert that would rewrite a posting",
    sql: "INSERT INTO postings (id, entry_id, account_id, bucket, amount) SELECT id, entry_id, account_id, bucket, amount FROM postings WHERE true ORDER BY id LIMIT 1 ON CONFLICT (id) DO UPDATE SET amount = excluded.amount + 1",
    refusal: POSTING_CHANGED,
  },
  // TRUNCATE fires no row trigger: PostgreSQL's statement triggers refuse it (SQLite has no TRUNCATE).
  { it: "refuses to truncate the entries", sql: "TRUNCATE entries CASCADE", refusal: ENTRY_DELETED, engines: ["postgres"] },
  { it: "refuses to truncate the postings", sql: "TRUNCATE postings", refusal: POSTING_DELETED, engines: ["postgres"] },
];

describeEachEngine("the journal is append-only", (engine) => {
  let db: Database;
  let ledger: Ledger;

  beforeEach(async () => {
    ({ db, ledger } = await makeLedger(engine));
    const { userId, sellerId } = await makeParties(ledger);
    await ledger.capture(await holdOk(ledger, userId, sellerId));
    await ledger.release(await holdOk(ledger, userId, sellerId));
    await db.durable();
  });

  describe("with the books checked after each test", () => {
    // Declared here: the suite's own afterEach, which closes the database, runs before one declared beside it.
    afterEach(() => assertBalanced(db));

    for (const rewrite of REWRITES.filter((r) => !r.engines || r.engines.includes(engine.name))) {
      it(`${rewrite.it}, and leaves the journal as it was`, async () => {
        const before = await journalOf(db);
        const balances = await allBalances(db);
        const error = await rejectionOf(db.run(rewrite.sql));
        expect(error.message).to.equal(rewrite.refusal);
        expect(error).to.have.property("code", REFUSAL_CODE[engine.name]);
        expect(await journalOf(db)).to.deep.equal(before);
        expect(await allBalances(db)).to.deep.equal(balances);
      });
    }

    it("refuses a rewrite inside a ledger operation, undoing only that operation", async () => {
      const entries = await countRows(db, "entries");
      const error = await rejectionOf(
        db.transaction(async (tx) => {
          await ledger.credit("user:alice", 1n, "dev_credit", "", tx);
          await tx.run("DELETE FROM postings WHERE entry_id = (SELECT MAX(id) FROM entries)");
        }),
      );
      expect(error.message).to.equal(POSTING_DELETED);
      expect(await countRows(db, "entries")).to.equal(entries);
      // The database goes on (on SQLite, the batch goes on): the next operation commits.
      await ledger.credit("user:alice", 2n, "dev_credit");
      await db.durable();
      expect(await countRows(db, "entries")).to.equal(entries + 1);
    });

    it("lets the ledger undo a failed operation's entries, since a rollback is not a DELETE", async () => {
      const entries = await countRows(db, "entries");
      const error = await rejectionOf(
        db.transaction(async (tx) => {
          await ledger.credit("user:alice", 5n, "dev_credit", "", tx);
          throw new Error("the caller failed after writing");
        }),
      );
      expect(error.message).to.equal("the caller failed after writing");
      expect(await countRows(db, "entries")).to.equal(entries);
    });
  });
});

describe("the journal is append-only (SQLite migration 13)", () => {
  it("guards books written before the migration, and records it as version 13", async () => {
    // A database as it stood at version 12, with money in it, then brought up to date.
    // (Written as the code of that time wrote them: the current Ledger writes columns version 12 lacks.)
    const old = databaseAtVersion(12);
    try {
      writeLegacyBooks(old);
      old.exec("UPDATE entries SET memo = 'still editable at version 12' WHERE id = (SELECT MAX(id) FROM entries)");

      expect(migrate(old, SCHEMA)).to.equal(SCHEMA.filter((m) => m.version > 12).length);
      expect(old.prepare("SELECT name FROM schema_migrations WHERE version = 13").pluck().get()).to.equal(
        "entries and postings are append-only",
      );
      expect(
        old
          .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name IN (?, ?, ?, ?) ORDER BY name")
          .pluck()
          .all(...APPEND_ONLY_TRIGGERS),
      ).to.deep.equal([...APPEND_ONLY_TRIGGERS].sort());
      expect(() => old.exec("UPDATE entries SET memo = 'rewritten'")).to.throw(BetterSqlite.SqliteError, ENTRY_CHANGED);
      expect(() => old.exec("DELETE FROM postings")).to.throw(BetterSqlite.SqliteError, POSTING_DELETED);
      await assertBalanced(new SqliteDatabase(old));
    } finally {
      old.close();
    }
  });
});
