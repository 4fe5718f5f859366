import Database from "better-sqlite3";
import { expect } from "chai";
import type { Db } from "../../server/db/db";
import { assertBalanced } from "../../server/ledger/invariants";
import type { Ledger } from "../../server/ledger/ledger";
import { migrate } from "../../server/db/migrations";
import { SCHEMA } from "../../server/schema";
import { databaseAtVersion, writeLegacyBooks } from "../helpers/legacy-books";
import { APPEND_ONLY_TRIGGERS, allBalances, countRows, holdOk, makeLedger, makeParties } from "../helpers/ledger";

const ENTRY_CHANGED = "entries are append-only: an entry cannot be changed, post a reversing entry instead";
const ENTRY_DELETED = "entries are append-only: an entry cannot be deleted, post a reversing entry instead";
const POSTING_CHANGED = "postings are append-only: a posting cannot be changed, post a reversing entry instead";
const POSTING_DELETED = "postings are append-only: a posting cannot be deleted, post a reversing entry instead";

type Journal = { entries: unknown[]; postings: unknown[] };

function journalOf(db: Db): Journal {
  return {
    entries: db.prepare("SELECT * FROM entries ORDER BY id").all(),
    postings: db.prepare("SELECT * FROM postings ORDER BY id").all(),
  };
}

/** Each way of rewriting history, and the exact refusal the database answers it with. */
const REWRITES: { it: string; sql: string; refusal: string }[] = [
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
  },
  {
    it: "refuses an INSERT OR REPLACE that would swap a hold's capture for a release",
    sql: "INSERT OR REPLACE INTO entries (kind, hold_id, memo, created_at) SELECT 'release', hold_id, 'swapped', 0 FROM entries WHERE kind = 'capture'",
    refusal: ENTRY_DELETED,
  },
];

describe("the journal is append-only (migration 13)", () => {
  let db: Db;
  let ledger: Ledger;

  beforeEach(() => {
    ({ db, ledger } = makeLedger());
    const { userId, sellerId } = makeParties(ledger);
    ledger.capture(holdOk(ledger, userId, sellerId));
    ledger.release(holdOk(ledger, userId, sellerId));
    ledger.commit.flush();
  });

  afterEach(() => {
    assertBalanced(db);
    db.close();
  });

  for (const rewrite of REWRITES) {
    it(`${rewrite.it}, and leaves the journal as it was`, () => {
      const before = journalOf(db);
      const balances = allBalances(db);
      expect(() => db.exec(rewrite.sql)).to.throw(Database.SqliteError, rewrite.refusal);
      expect(journalOf(db)).to.deep.equal(before);
      expect(allBalances(db)).to.deep.equal(balances);
    });
  }

  it("refuses a rewrite inside a ledger operation, undoing only that operation", () => {
    const entries = countRows(db, "entries");
    expect(() =>
      ledger.commit.run(() => {
        ledger.credit("user:alice", 1n, "dev_credit");
        db.prepare("DELETE FROM postings WHERE entry_id = (SELECT MAX(id) FROM entries)").run();
      }),
    ).to.throw(Database.SqliteError, POSTING_DELETED);
    expect(countRows(db, "entries")).to.equal(entries);
    // The batch goes on: the next operation commits.
    ledger.credit("user:alice", 2n, "dev_credit");
    ledger.commit.flush();
    expect(countRows(db, "entries")).to.equal(entries + 1);
  });

  it("lets the ledger undo a failed operation's entries, since a rollback is not a DELETE", () => {
    const entries = countRows(db, "entries");
    expect(() =>
      ledger.commit.run(() => {
        ledger.credit("user:alice", 5n, "dev_credit");
        throw new Error("the caller failed after writing");
      }),
    ).to.throw("the caller failed after writing");
    expect(countRows(db, "entries")).to.equal(entries);
  });

  it("guards books written before the migration, and records it as version 13", () => {
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
      expect(() => old.exec("UPDATE entries SET memo = 'rewritten'")).to.throw(Database.SqliteError, ENTRY_CHANGED);
      expect(() => old.exec("DELETE FROM postings")).to.throw(Database.SqliteError, POSTING_DELETED);
      assertBalanced(old);
    } finally {
      old.close();
    }
  });
});
