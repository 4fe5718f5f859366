import Database from "better-sqlite3";
import { expect } from "chai";
import { openDatabase } from "../../server/db/db";
import { migrate } from "../../server/db/migrations";
import { assembleSchema, SCHEMA as CURRENT_SCHEMA } from "../../server/schema";
import { MIGRATIONS as OLD_MIGRATIONS, migrate as oldMigrate } from "../fixtures/migrations-at-v15";
import { makeTempDir } from "../helpers/ledger";
import { writeLegacyBooks } from "../helpers/legacy-books";

/*
 * The schema moved from one file (db/migrations.ts, frozen in test/fixtures/migrations-at-v15.ts) into each
 * module's schema.ts. A database the old code built must open unchanged under the new code, and the new code must
 * build, from nothing or from any older version, exactly what the old code built.
 */

/** The schema as it stood when it moved (versions 1-15); later versions are new code, tested on their own below. */
const SCHEMA = CURRENT_SCHEMA.filter((m) => m.version <= 15);

type MasterRow = { type: string; name: string; tbl_name: string; rootpage: bigint; sql: string | null };

/** Every table, index and trigger, in creation order, with its SQL as SQLite stored it and whitespace collapsed. */
function masterOf(db: Database.Database): MasterRow[] {
  return (db.prepare("SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master ORDER BY rowid").all() as MasterRow[]).map((r) => ({
    ...r,
    sql: r.sql === null ? null : r.sql.replace(/\s+/g, " ").trim(),
  }));
}

function versionsOf(db: Database.Database): { version: bigint; name: string }[] {
  return db.prepare("SELECT version, name FROM schema_migrations ORDER BY version").all() as { version: bigint; name: string }[];
}

/** Every row of every table, so two databases can be compared whole. */
function contentsOf(db: Database.Database): Record<string, unknown[]> {
  const tables = db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'schema_migrations' ORDER BY name")
    .pluck()
    .all() as string[];
  // Some tables are WITHOUT ROWID: rows are put in a fixed order by their JSON text.
  const json = (row: unknown) => JSON.stringify(row, (_k, x) => (typeof x === "bigint" ? x.toString() : x));
  const sorted = (rows: unknown[]) => rows.map((r) => [json(r), r] as const).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(tables.map((t) => [t, sorted(db.prepare(`SELECT * FROM "${t}"`).all()).map(([, r]) => r)]));
}

/** A database as the old code left it at `version`, with the settings openDatabase gives every handle. */
function oldDatabase(file: string, version: number): Database.Database {
  const db = new Database(file);
  db.defaultSafeIntegers(true);
  db.pragma("foreign_keys = ON");
  db.pragma("recursive_triggers = ON");
  if (version === OLD_MIGRATIONS.length) {
    oldMigrate(db);
    return db;
  }
  // The old migrate() applies every version; stopping earlier means running its loop by hand (none up to 14
  // rebuilds a table, so no foreign-key switching is needed).
  // The old migrate()'s own statement, word for word: SQLite keeps its text in sqlite_master.
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  for (const m of OLD_MIGRATIONS.filter((m) => m.version <= version)) {
    expect(m.rebuildsTables, `old migration ${m.version}`).to.not.equal(true);
    db.transaction(() => {
      db.exec(m.sql);
      db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, Date.now());
    })();
  }
  return db;
}

describe("the schema beside its modules (server/<module>/schema.ts)", () => {
  let tmp: ReturnType<typeof makeTempDir>;
  let reference: Database.Database;
  beforeEach(() => {
    tmp = makeTempDir();
    reference = oldDatabase(":memory:", OLD_MIGRATIONS.length);
  });
  afterEach(() => {
    reference.close();
    tmp.remove();
  });

  it("has the old code's versions, names and flags, in order", () => {
    expect(SCHEMA.map((m) => [m.version, m.name, m.rebuildsTables ?? false, m.before !== undefined])).to.deep.equal(
      OLD_MIGRATIONS.map((m) => [m.version, m.name, m.rebuildsTables ?? false, m.before !== undefined]),
    );
  });

  it("builds a fresh database identical to the old code's: every table, index and trigger, and schema_migrations", () => {
    const fresh = openDatabase(":memory:", SCHEMA);
    try {
      expect(masterOf(fresh)).to.deep.equal(masterOf(reference));
      expect(versionsOf(fresh)).to.deep.equal(versionsOf(reference));
      expect(masterOf(reference).length).to.be.greaterThan(60);
    } finally {
      fresh.close();
    }
  });

  it("opens a database the old code migrated fully without applying or changing anything", () => {
    const file = tmp.file("old.db");
    const old = oldDatabase(file, OLD_MIGRATIONS.length);
    const master = masterOf(old);
    const applied = old.prepare("SELECT * FROM schema_migrations ORDER BY version").all();
    old.close();

    const opened = openDatabase(file, SCHEMA);
    try {
      expect(masterOf(opened)).to.deep.equal(master);
      expect(opened.prepare("SELECT * FROM schema_migrations ORDER BY version").all()).to.deep.equal(applied);
      expect(migrate(opened, SCHEMA)).to.equal(0);
    } finally {
      opened.close();
    }
  });

  for (let version = 0; version < 15; version++) {
    it(`brings a database the old code left at version ${version} to what the old code builds`, () => {
      const file = tmp.file(`at-${version}.db`);
      oldDatabase(file, version).close();
      const opened = openDatabase(file, SCHEMA);
      try {
        expect(masterOf(opened)).to.deep.equal(masterOf(reference));
        expect(versionsOf(opened)).to.deep.equal(versionsOf(reference));
      } finally {
        opened.close();
      }
    });
  }

  it("converts books written at version 14 exactly as the old code's migration 15 does", () => {
    const byOld = oldDatabase(tmp.file("books-old.db"), 14);
    const byNew = oldDatabase(tmp.file("books-new.db"), 14);
    try {
      writeLegacyBooks(byOld);
      writeLegacyBooks(byNew);
      expect(oldMigrate(byOld)).to.equal(1);
      expect(migrate(byNew, SCHEMA)).to.equal(1);
      expect(masterOf(byNew)).to.deep.equal(masterOf(byOld));
      expect(contentsOf(byNew)).to.deep.equal(contentsOf(byOld));
      expect(contentsOf(byNew).entries).to.have.length.greaterThan(5);
    } finally {
      byOld.close();
      byNew.close();
    }
  });

  it("refuses a step of an unnamed version, a version with no step, and two before-checks in one version", () => {
    const check = () => {};
    expect(() => assembleSchema([{ version: 1, name: "one" }], [[{ version: 2, sql: "" }]])).to.throw(/version 2, which has no name/);
    expect(() => assembleSchema([{ version: 1, name: "one" }], [[]])).to.throw(/version 1 has no step/);
    expect(() =>
      assembleSchema([{ version: 1, name: "one" }], [[{ version: 1, sql: "", before: check }], [{ version: 1, sql: "", before: check }]]),
    ).to.throw(/2 before-checks/);
  });

  it("refuses to apply migrations out of order", () => {
    const db = new Database(":memory:");
    try {
      expect(() =>
        migrate(db, [
          { version: 2, name: "two", sql: "" },
          { version: 1, name: "one", sql: "" },
        ]),
      ).to.throw(/out of order: version 1 after 2/);
    } finally {
      db.close();
    }
  });
});

describe("the schema after the move", () => {
  it("adds each hold's replica (version 16) to a database the old code left at version 15, and nothing else", () => {
    const tmp = makeTempDir();
    const old = oldDatabase(tmp.file("v15.db"), OLD_MIGRATIONS.length);
    const before = masterOf(old).filter((r) => r.name !== "holds");
    old.close();
    const opened = openDatabase(
      tmp.file("v15.db"),
      CURRENT_SCHEMA.filter((m) => m.version <= 16),
    );
    try {
      expect(versionsOf(opened).map((v) => v.version)).to.include(16n);
      const columns = (opened.pragma("table_info(holds)") as { name: string }[]).map((c) => c.name);
      expect(columns).to.include("replica_id");
      expect(masterOf(opened).filter((r) => r.name !== "holds")).to.deep.equal(before);
    } finally {
      opened.close();
      tmp.remove();
    }
  });

  it("adds keys' spending limits and each hold's key period (version 17) to a version 16 database, and nothing else", () => {
    const tmp = makeTempDir();
    const v16 = openDatabase(
      tmp.file("v16.db"),
      CURRENT_SCHEMA.filter((m) => m.version <= 16),
    );
    const before = masterOf(v16).filter((r) => r.name !== "holds");
    v16.close();
    const opened = openDatabase(
      tmp.file("v16.db"),
      CURRENT_SCHEMA.filter((m) => m.version <= 17),
    );
    try {
      expect(versionsOf(opened).map((v) => v.version)).to.include(17n);
      const columns = (opened.pragma("table_info(holds)") as { name: string }[]).map((c) => c.name);
      expect(columns.slice(-2)).to.deep.equal(["spend_key_id", "spend_period_seq"]);
      const added = masterOf(opened).filter((r) => r.name !== "holds" && !before.some((b) => b.name === r.name));
      expect(added.map((r) => `${r.type} ${r.name}`)).to.deep.equal(["table key_spend_limits", "index holds_by_spend_period"]);
      expect(masterOf(opened).filter((r) => before.some((b) => b.name === r.name))).to.deep.equal(before);
    } finally {
      opened.close();
      tmp.remove();
    }
  });
});

describe("version 18 (x402)", () => {
  it("rebuilds entries and calls with every row, id and rowid kept, their indexes and append-only triggers back", () => {
    const tmp = makeTempDir();
    // Books written at version 14 (every kind of movement), then brought to 17 by the current migrations.
    const old = oldDatabase(tmp.file("v15.db"), 14);
    writeLegacyBooks(old);
    old.close();
    const at17 = openDatabase(
      tmp.file("v15.db"),
      CURRENT_SCHEMA.filter((m) => m.version <= 17),
    );
    const account = at17.prepare("SELECT id FROM accounts WHERE kind = 'user' LIMIT 1").pluck().get();
    for (const [rowid, id] of [
      [7, "call-a"],
      [9, "call-b"],
    ] as const) {
      at17
        .prepare(
          `INSERT INTO calls (rowid, id, account_id, api_key_id, skill_id, endpoint, http_status, outcome, charged_micros, latency_us, created_at)
           VALUES (?, ?, ?, 'key', 'skill', 'call', 200, 'success', 1000, 5, 1)`,
        )
        .run(rowid, id, account);
    }
    const rows = (db: Database.Database) => ({
      entries: db.prepare("SELECT * FROM entries ORDER BY id").all(),
      calls: db.prepare("SELECT rowid AS row_id, * FROM calls ORDER BY rowid").all(),
    });
    const before = rows(at17);
    const indexes = (db: Database.Database) =>
      db
        .prepare(
          "SELECT name, sql FROM sqlite_master WHERE tbl_name IN ('entries', 'calls') AND type IN ('index', 'trigger') ORDER BY name",
        )
        .all();
    const indexesBefore = indexes(at17);
    at17.close();
    // Up to the rebuild (later versions add indexes of their own).
    const opened = openDatabase(
      tmp.file("v15.db"),
      CURRENT_SCHEMA.filter((m) => m.version <= 18),
    );
    try {
      expect(before.entries.length).to.be.greaterThan(0);
      expect(before.calls).to.have.length(2);
      expect(rows(opened)).to.deep.equal(before);
      expect(indexes(opened).map((r) => (r as { name: string }).name)).to.deep.equal(
        indexesBefore.map((r) => (r as { name: string }).name),
      );
      expect(() => opened.prepare("DELETE FROM entries").run()).to.throw(/append-only/);
      expect(opened.pragma("foreign_key_check")).to.deep.equal([]);
      const kinds = opened.prepare("SELECT sql FROM sqlite_master WHERE name = 'entries'").pluck().get() as string;
      expect(kinds).to.include("'x402_payment'");
    } finally {
      opened.close();
      tmp.remove();
    }
  });
});

describe("version 21 (skills the operator registered)", () => {
  it("adds the operator's mark to a version 20 database, 0 for every skill stored before, and nothing else", () => {
    const tmp = makeTempDir();
    const v20 = openDatabase(
      tmp.file("v20.db"),
      CURRENT_SCHEMA.filter((m) => m.version <= 20),
    );
    v20.prepare("INSERT INTO accounts (id, kind, name, created_at) VALUES ('ada', 'seller', 'Ada', 1)").run();
    v20
      .prepare(
        `INSERT INTO skills (id, slug, name, price_micros, seller_account_id, backend_url, timeout_ms, signing_secret, created_at, updated_at)
         VALUES ('s1', 'echo', 'Echo', 5, 'ada', 'http://127.0.0.1:9100/echo', 1000, 'secret', 1, 1)`,
      )
      .run();
    const before = masterOf(v20).filter((r) => r.name !== "skills");
    v20.close();
    const opened = openDatabase(
      tmp.file("v20.db"),
      CURRENT_SCHEMA.filter((m) => m.version <= 21),
    );
    try {
      expect(versionsOf(opened).map((v) => v.version)).to.include(21n);
      const columns = (opened.pragma("table_info(skills)") as { name: string }[]).map((c) => c.name);
      expect(columns.at(-1)).to.equal("operator_listed");
      // A seller's listing cannot be told from the operator's after the fact: every stored skill is a seller's.
      expect(opened.prepare("SELECT operator_listed FROM skills WHERE id = 's1'").pluck().get()).to.equal(0n);
      expect(masterOf(opened).filter((r) => r.name !== "skills")).to.deep.equal(before);
    } finally {
      opened.close();
      tmp.remove();
    }
  });
});
