import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type Database from "better-sqlite3";
import { openDatabase } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { expect } from "chai";
import { migrate } from "../../server/db/migrations";
import { assertBalanced, findViolations } from "../../server/ledger/invariants";
import { Ledger } from "../../server/ledger/ledger";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { APPEND_ONLY_TRIGGERS, allBalances, rejectionOf } from "../helpers/ledger";
import { databaseAtVersion, LEGACY, writeLegacyBooks } from "../helpers/legacy-books";

type EntryRow = {
  id: bigint;
  kind: string;
  hold_id: string | null;
  voucher_address: string | null;
  voucher_nonce: bigint | null;
  deposit_tx_hash: string | null;
  deposit_log_index: bigint | null;
  exit_tx_hash: string | null;
  exit_log_index: bigint | null;
  memo: string;
  created_at: bigint;
};

/** The migrations up to 15, the one this file is about. */
const UP_TO_15 = SCHEMA.filter((m) => m.version <= 15);

function entriesOf(db: Database.Database): EntryRow[] {
  return db.prepare("SELECT * FROM entries ORDER BY id").all() as EntryRow[];
}

/** The books on a raw connection, as the ledger and its invariants read them (the one SQL interface). */
function booksOn(db: Database.Database): SqliteDatabase {
  return new SqliteDatabase(db);
}

describe("migration 15 (SQLite): one entry kind per money movement, linked by columns", () => {
  let db: Database.Database;
  beforeEach(() => {
    db = databaseAtVersion(14);
    writeLegacyBooks(db);
  });
  afterEach(() => db.close());

  it("gives each of the four movements once called 'withdrawal' its own kind and link, keeping ids, times, memos and postings", async () => {
    const before = db.prepare("SELECT id, kind, hold_id, memo, created_at FROM entries ORDER BY id").all() as EntryRow[];
    const postings = db.prepare("SELECT * FROM postings ORDER BY id").all();
    const balances = await allBalances(booksOn(db));

    // Migration 15 alone (those after it change nothing here).
    expect(migrate(db, UP_TO_15)).to.equal(1);

    const after = entriesOf(db);
    expect(after.map(({ id, hold_id, memo, created_at }) => ({ id, hold_id, memo, created_at }))).to.deep.equal(
      before.map(({ id, hold_id, memo, created_at }) => ({ id, hold_id, memo, created_at })),
    );
    expect(db.prepare("SELECT * FROM postings ORDER BY id").all()).to.deep.equal(postings);
    expect(await allBalances(booksOn(db))).to.deep.equal(balances);

    const { address } = LEGACY;
    const link = (e: EntryRow) => ({
      kind: e.kind,
      voucher: e.voucher_address === null ? null : `${e.voucher_address}:${e.voucher_nonce}`,
      deposit: e.deposit_tx_hash === null ? null : `${e.deposit_tx_hash}:${e.deposit_log_index}`,
      exit: e.exit_tx_hash === null ? null : `${e.exit_tx_hash}:${e.exit_log_index}`,
    });
    const none = { voucher: null, deposit: null, exit: null };
    expect(after.map(link)).to.deep.equal([
      { ...none, kind: "dev_credit" },
      { ...none, kind: "deposit", deposit: `${LEGACY.depositTx}:0` },
      { ...none, kind: "hold" },
      { ...none, kind: "capture" },
      { ...none, kind: "hold" },
      { ...none, kind: "release" },
      { ...none, kind: "voucher_withdrawal", voucher: `${address}:7` },
      { ...none, kind: "voucher_withdrawal", voucher: `${address}:8` },
      { ...none, kind: "voucher_return", voucher: `${address}:8` },
      { ...none, kind: "exit_freeze", exit: `${LEGACY.cancelledExitTx}:0` },
      { ...none, kind: "exit_return", exit: `${LEGACY.cancelledExitTx}:0` },
      { ...none, kind: "exit_freeze", exit: `${LEGACY.pendingExitTx}:0` },
    ]);
    expect(
      db.prepare("SELECT balance FROM ledger_accounts WHERE account_id = ? AND bucket = 'available'").pluck().get(LEGACY.alice),
    ).to.equal(9n);
    // The invariants are today's, which read tables of later versions (keys' spending limits, version 17; x402
    // payments, 18): they check the books as a gateway opens them, every later migration applied (none touches these rows).
    migrate(db, SCHEMA);
    await assertBalanced(booksOn(db));
  });

  it("leaves the schema whole: exit_entries gone, the journal still append-only, foreign keys on and intact", () => {
    migrate(db, SCHEMA);
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'exit_entries'").get()).to.equal(undefined);
    expect(
      db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name IN (?, ?, ?, ?) ORDER BY name")
        .pluck()
        .all(...APPEND_ONLY_TRIGGERS),
    ).to.deep.equal([...APPEND_ONLY_TRIGGERS].sort());
    expect(() => db.exec("UPDATE entries SET memo = 'rewritten'")).to.throw(/append-only/);
    expect(() => db.exec("DELETE FROM entries")).to.throw(/append-only/);
    expect(db.pragma("foreign_keys", { simple: true })).to.equal(1n);
    expect(db.pragma("foreign_key_check")).to.deep.equal([]);
    expect(db.prepare("SELECT name FROM schema_migrations WHERE version = 15").pluck().get()).to.equal(
      "one entry kind per money movement, linked by columns",
    );
    // A posting still cannot name an entry that does not exist.
    expect(() =>
      db.prepare("INSERT INTO postings (entry_id, account_id, bucket, amount) VALUES (999, 'platform', 'fees', 1)").run(),
    ).to.throw(/FOREIGN KEY/);
  });

  it("lets the current ledger carry on with the migrated books", async () => {
    migrate(db, SCHEMA);
    const books = booksOn(db);
    const ledger = await Ledger.open(books);
    await books.transaction(async (tx) => {
      const entryId = await ledger.withdrawByVoucher(LEGACY.alice, 2n, { address: LEGACY.address, nonce: 9n }, "", tx);
      await tx.run(
        `INSERT INTO vouchers (address, nonce, account_id, amount, deadline, status, entry_id, created_at)
         VALUES (?, 9, ?, 2, 0, 'issued', ?, 0)`,
        [LEGACY.address, LEGACY.alice, entryId],
      );
    });
    await ledger.credit(LEGACY.alice, 1n, "dev_credit");
    books.commit.flush();
    expect(await ledger.balance(LEGACY.alice)).to.deep.equal({ availableMicros: 8n, heldMicros: 0n });
    await assertBalanced(books);
  });

  it("makes the database refuse a second credit of one deposit log, and a voucher entry without its voucher", async () => {
    migrate(db, SCHEMA);
    const books = booksOn(db);
    const ledger = await Ledger.open(books);
    expect((await rejectionOf(ledger.creditChainDeposit(LEGACY.alice, 5n, { txHash: LEGACY.depositTx, logIndex: 0 }))).message).to.match(
      /UNIQUE/,
    );
    expect(() =>
      db.prepare("INSERT INTO entries (kind, memo, created_at) VALUES ('voucher_withdrawal', 'no voucher named', 0)").run(),
    ).to.throw(/CHECK/);
    expect(() => db.prepare("INSERT INTO entries (kind, memo, created_at) VALUES ('withdrawal', 'the old kind', 0)").run()).to.throw(
      /CHECK/,
    );
    books.commit.flush();
    await assertBalanced(books);
  });

  it("refuses, naming it and changing nothing, a withdrawal entry no voucher or exit accounts for", () => {
    db.prepare("INSERT INTO entries (kind, memo, created_at) VALUES ('withdrawal', 'made by hand', 0)").run();
    const journal = entriesOf(db);
    expect(() => migrate(db, SCHEMA)).to.throw(/migration 15: withdrawal entries .* #13 \("made by hand"\)/);
    expect(entriesOf(db)).to.deep.equal(journal);
    expect(db.prepare("SELECT MAX(version) FROM schema_migrations").pluck().get()).to.equal(14n);
    expect(db.pragma("foreign_keys", { simple: true })).to.equal(1n);
  });

  it("migrated books obey the invariants that read the links, and name a link that goes nowhere", async () => {
    migrate(db, SCHEMA);
    expect(await findViolations(booksOn(db))).to.deep.equal([]);
    db.exec("DROP TRIGGER entries_no_update");
    db.prepare("UPDATE entries SET voucher_nonce = 99 WHERE kind = 'voucher_return'").run();
    expect((await findViolations(booksOn(db))).map((v) => v.rule)).to.deep.equal([
      "a voucher's withdrawal takes exactly its amount from its account, and a returned one gives it back once",
      "every voucher entry is the one its voucher records",
    ]);
  });

  it("brings a database file written at version 14 up to date when the gateway opens it, once", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "entry-kinds-"));
    const file = path.join(dir, "ledger.db");
    try {
      const old = databaseAtVersion(14, file);
      writeLegacyBooks(old);
      const balances = await allBalances(booksOn(old));
      old.close();

      const opened = openDatabase(file, SCHEMA);
      expect(opened.prepare("SELECT version FROM schema_migrations ORDER BY version").pluck().all()).to.deep.equal(
        SCHEMA.map((m) => BigInt(m.version)),
      );
      expect(await allBalances(booksOn(opened))).to.deep.equal(balances);
      await assertBalanced(booksOn(opened));
      opened.close();
      // Opening again applies nothing.
      const again = openDatabase(file, SCHEMA);
      expect(migrate(again, SCHEMA)).to.equal(0);
      expect(await allBalances(booksOn(again))).to.deep.equal(balances);
      again.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
