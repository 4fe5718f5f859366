import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { openDatabase } from "../../server/db/db";
import { type Database, isUniqueViolation, numberPlaceholders, type Sql } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { SCHEMA } from "../../server/schema";
import { Ledger } from "../../server/ledger/ledger";
import { assertBalanced } from "../../server/ledger/invariants";
import { computeCharge } from "../../server/ledger/fees";
import { PostgresDatabase, postgresTraffic } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { describeEachEngine } from "../helpers/engines";

describe("numberPlaceholders", () => {
  it("numbers each ? for PostgreSQL, leaving quoted text and comments alone", () => {
    expect(numberPlaceholders("SELECT ? , '?' , \"a?\" -- ?\n, ?")).to.equal("SELECT $1 , '?' , \"a?\" -- ?\n, $2");
  });
});

describeEachEngine("Database", (engine) => {
  let db: Database;
  beforeEach(async () => {
    db = await engine.open();
  });

  it("reads integers back as bigints, and binds bigints, strings and nulls", async () => {
    await db.run("INSERT INTO accounts (id, kind, name, daily_call_cap, created_at) VALUES (?, ?, ?, ?, ?)", ["a", "user", "A", null, 5n]);
    const row = await db.one<{ created_at: bigint; daily_call_cap: bigint | null }>(
      "SELECT created_at, daily_call_cap FROM accounts WHERE id = ?",
      ["a"],
    );
    expect(row).to.deep.equal({ created_at: 5n, daily_call_cap: null });
    expect(await db.value("SELECT COUNT(*) FROM accounts WHERE id = ?", ["a"])).to.equal(1n);
    expect(await db.value("SELECT id FROM accounts WHERE id = ?", ["missing"])).to.equal(undefined);
  });

  it("undoes a transaction that throws, and keeps one that resolves", async () => {
    await db.transaction(async (tx) => {
      await tx.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('kept', 'user', 'K', 1)");
    });
    await db
      .transaction(async (tx) => {
        await tx.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('undone', 'user', 'U', 1)");
        throw new Error("boom");
      })
      .then(
        () => expect.fail("the transaction should have thrown"),
        (error: Error) => expect(error.message).to.equal("boom"),
      );
    expect(await db.all("SELECT id FROM accounts WHERE id IN ('kept', 'undone')")).to.deep.equal([{ id: "kept" }]);
  });

  it("names a uniqueness violation the same way on both engines", async () => {
    await db.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('x', 'user', 'X', 1)");
    const error = await db.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('x', 'user', 'X', 1)").catch((e: unknown) => e);
    expect(isUniqueViolation(error)).to.equal(true);
  });

  it("lets exactly as many concurrent holds through as the balance covers, and the books balance", async () => {
    const ledger = await Ledger.open(db);
    const user = await ledger.ensureAccount({ id: "user:u", kind: "user", name: "U" });
    const seller = await ledger.ensureAccount({ id: "seller:s", kind: "seller", name: "S" });
    await ledger.credit(user.id, 10_000n, "dev_credit");
    const charge = computeCharge(1_000n, "included", 1000n);
    const results = await Promise.all(
      Array.from({ length: 30 }, () => ledger.hold({ accountId: user.id, sellerAccountId: seller.id, skillId: "s", charge })),
    );
    const held = results.filter((r) => r.ok);
    expect(held).to.have.length(10);
    await Promise.all(held.map((r, i) => (r.ok ? (i % 2 ? ledger.capture(r.hold.id) : ledger.release(r.hold.id)) : null)));
    expect(await ledger.balance(user.id)).to.deep.equal({ availableMicros: 5_000n, heldMicros: 0n });
    expect(await ledger.balanceOf(seller.id, "earned")).to.equal(4_500n);
    await assertBalanced(db);
  });
});

describeEachEngine("grouped durable transactions", (engine) => {
  it("share commits, each undoing only itself when it throws, and all answered once committed", async () => {
    const db = await engine.open();
    const before = postgresTraffic.transactions;
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) =>
        db.transaction(
          async (tx) => {
            await tx.run("INSERT INTO accounts (id, kind, name, created_at) VALUES (?, 'user', ?, 1)", [`g${i}`, `g${i}`]);
            if (i % 10 === 3) throw new Error(`member ${i} fails`);
            return i;
          },
          { durable: true, group: true },
        ),
      ),
    );
    expect(results.filter((r) => r.status === "fulfilled").map((r) => (r as PromiseFulfilledResult<number>).value)).to.have.length(36);
    expect(results.filter((r) => r.status === "rejected")).to.have.length(4);
    const ids = (await db.all<{ id: string }>("SELECT id FROM accounts WHERE id LIKE 'g%' ORDER BY id")).map((r) => r.id);
    expect(ids).to.have.length(36);
    expect(ids).to.not.include("g3");
    // On PostgreSQL the 40 shared a few transactions (the first alone, the rest waiting for it together).
    if (engine.name === "postgres") expect(postgresTraffic.transactions - before).to.be.at.most(5);
  });

  it("answer a member whose statement the database refused with its own error, and commit the others", async () => {
    const db = await engine.open();
    await db.run(
      "INSERT INTO accounts (id, kind, name, created_at) VALUES ('taken3', 'user', 'taken3', 1), ('taken7', 'user', 'taken7', 1)",
    );
    // Members 3 and 7 insert an id that exists: on PostgreSQL their statements are pipelined with the others', so the
    // statements sent after 3's are refused as part of a failed transaction (25P02), which is nobody's own failure.
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) =>
        db.transaction(
          async (tx) => {
            const id = i === 3 || i === 7 ? `taken${i}` : `d${String(i).padStart(2, "0")}`;
            await tx.run("INSERT INTO accounts (id, kind, name, created_at) VALUES (?, 'user', ?, 1)", [id, `x${i}`]);
            await tx.run("UPDATE accounts SET name = ? WHERE id = ?", [`y${i}`, id]);
            return i;
          },
          { durable: true, group: true },
        ),
      ),
    );
    const rejected = results.flatMap((r, i) => (r.status === "rejected" ? [i] : []));
    expect(rejected).to.deep.equal([3, 7]);
    for (const i of rejected) expect(isUniqueViolation((results[i] as PromiseRejectedResult).reason)).to.equal(true);
    const rows = await db.all<{ id: string; name: string }>(
      "SELECT id, name FROM accounts WHERE id LIKE 'd%' OR id LIKE 'taken%' ORDER BY id",
    );
    expect(rows.map((r) => `${r.id}:${r.name}`)).to.deep.equal([
      ...[0, 1, 2, 4, 5, 6, 8, 9, 10, 11].map((i) => `d${String(i).padStart(2, "0")}:y${i}`),
      "taken3:taken3",
      "taken7:taken7",
    ]);
  });

  it("on PostgreSQL, blame the member whose statement failed first, not one whose next statement the failure refused", async function () {
    if (engine.name !== "postgres") this.skip();
    const db = await engine.open();
    await db.run("INSERT INTO accounts (id, kind, name, created_at) VALUES ('taken', 'user', 'taken', 1)");
    // A group still running, so the members below form one group of their own.
    const busy = db.transaction((tx) => tx.value("SELECT pg_sleep(0.05)"), { durable: true, group: true });
    // Every member's INSERT leaves in one write; member 3's fails (23505) and fails the transaction. Members 0 to 2
    // then send their UPDATE, a statement this connection has not parsed: the first's Parse is refused (25P02), and
    // the next two, sent as a Bind of that name only, are refused 26000. Neither is their own failure.
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) =>
        db.transaction(
          async (tx) => {
            const id = i === 3 ? "taken" : `b${i}`;
            await tx.run("INSERT INTO accounts (id, kind, name, created_at) VALUES (?, 'user', ?, 1)", [id, `x${i}`]);
            await tx.run("UPDATE accounts SET name = ? WHERE id = ? AND kind = 'user' /* blame test */", [`y${i}`, id]);
            return i;
          },
          { durable: true, group: true },
        ),
      ),
    );
    await busy;
    expect(results.flatMap((r, i) => (r.status === "rejected" ? [i] : []))).to.deep.equal([3]);
    expect(isUniqueViolation((results[3] as PromiseRejectedResult).reason)).to.equal(true);
    const names = await db.all<{ id: string; name: string }>("SELECT id, name FROM accounts WHERE id LIKE 'b%' ORDER BY id");
    expect(names.map((r) => `${r.id}:${r.name}`)).to.deep.equal(["b0:y0", "b1:y1", "b2:y2", "b4:y4", "b5:y5"]);
  });

  it("on PostgreSQL, send every member's statement before the first answer comes back (pipelined)", async function () {
    if (engine.name !== "postgres") this.skip();
    const db = await engine.open();
    await db.value("SELECT 1"); // the pool's first connection, open
    const events: string[] = [];
    // The first group is the first member alone; the next nine wait for it and run side by side.
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        db.transaction(
          async (tx) => {
            events.push(`sent ${i}`);
            await tx.value("SELECT ?::int", [i]);
            events.push(`answered ${i}`);
          },
          { durable: true, group: true },
        ),
      ),
    );
    const second = events.slice(2);
    expect(second.slice(0, 9)).to.deep.equal(Array.from({ length: 9 }, (_, i) => `sent ${i + 1}`));
  });

  it("on PostgreSQL, run a group's members in their groupOrder, arrival order among equals", async function () {
    if (engine.name !== "postgres") this.skip();
    const db = await engine.open();
    const ran: string[] = [];
    const member = (name: string, order: string) =>
      db.transaction(
        async (tx) => {
          ran.push(name);
          await tx.value("SELECT 1");
        },
        { group: true, groupOrder: order },
      );
    // The first runs alone; the rest wait for it and form the next group.
    await Promise.all([member("first", "z"), member("c", "c"), member("a1", "a"), member("b", "b"), member("a2", "a")]);
    expect(ran).to.deep.equal(["first", "a1", "a2", "b", "c"]);
  });

  it("on PostgreSQL, two replicas' groups of holds on the same buyers take their rows in one order: no deadlock", async function () {
    if (engine.name !== "postgres") this.skip();
    const one = await engine.open();
    const other = new PostgresDatabase(createPostgresPool({ url: engine.lastUrl(), max: 20 }));
    try {
      const ledgers = [await Ledger.open(one, { replicaId: "r1" }), await Ledger.open(other, { replicaId: "r2" })];
      for (const id of ["buyer:a", "buyer:b", "buyer:c"]) {
        await ledgers[0]!.ensureAccount({ id, kind: "user", name: id });
        await ledgers[0]!.credit(id, 1_000_000n, "dev_credit");
      }
      await ledgers[0]!.ensureAccount({ id: "seller:s", kind: "seller", name: "S" });
      const retriedBefore = postgresTraffic.retried;
      const charge = computeCharge(1_000n, "included", 1000n);
      const hold = (ledger: Ledger, accountId: string) => ledger.hold({ accountId, sellerAccountId: "seller:s", skillId: "s", charge });
      // Each replica's holds queue behind a group still running, so they form one group on each; between the first
      // buyer's hold and the others a member sleeps, so the two groups run at once. The holds arrive in opposite
      // orders: run as they came, one group would lock a then c, the other c then a, and each wait for the other.
      const busy = [one, other].map((db) => db.transaction((tx) => tx.value("SELECT pg_sleep(0.05)"), { group: true }));
      const pause = (db: Database) => db.transaction((tx) => tx.value("SELECT pg_sleep(0.2)"), { group: true, groupOrder: "buyer:a~" });
      const results = await Promise.all([
        ...busy,
        hold(ledgers[0]!, "buyer:a"),
        pause(one),
        hold(ledgers[0]!, "buyer:b"),
        hold(ledgers[0]!, "buyer:c"),
        hold(ledgers[1]!, "buyer:c"),
        pause(other),
        hold(ledgers[1]!, "buyer:b"),
        hold(ledgers[1]!, "buyer:a"),
      ]);
      expect(results.filter((r) => typeof r === "object" && r !== null && "ok" in r && r.ok)).to.have.length(6);
      // A deadlock is detected, and its loser run again, after deadlock_timeout: none was.
      expect(postgresTraffic.retried).to.equal(retriedBefore);
      await assertBalanced(one);
    } finally {
      await other.close();
    }
  });
});

describe("SqliteDatabase", () => {
  let db: SqliteDatabase;
  beforeEach(() => {
    db = new SqliteDatabase(openDatabase(":memory:", SCHEMA));
  });
  afterEach(() => db.close());

  const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve));
  const insertAccount = (sql: Sql, id: string) =>
    sql.run("INSERT INTO accounts (id, kind, name, created_at) VALUES (?, 'user', ?, 1)", [id, id]);
  const accountIds = async () => (await db.all<{ id: string }>("SELECT id FROM accounts ORDER BY id")).map((r) => r.id);

  it("runs a write outside any transaction in a turn of its own, never inside another transaction's", async () => {
    let begun!: () => void;
    const inside = new Promise<void>((resolve) => (begun = resolve));
    const failing = db.transaction(async (tx) => {
      await insertAccount(tx, "in the failing transaction");
      begun();
      await nextTick();
      throw new Error("the transaction failed after yielding");
    });
    await inside;
    // Asked for while the transaction holds the turn: run at once, it would land in its savepoint and be undone with it.
    const outside = insertAccount(db, "outside");
    expect((await failing.catch((e: Error) => e)).message).to.equal("the transaction failed after yielding");
    expect(await outside).to.equal(1);
    expect(await accountIds()).to.deep.equal(["outside"]);
  });

  it("runs a read at once, seeing what the open batch has written", async () => {
    await db.transaction((tx) => insertAccount(tx, "written"));
    expect(db.db.inTransaction, "the batch is still open").to.equal(true);
    expect(await accountIds()).to.deep.equal(["written"]);
  });

  it("refuses a write or a transaction on the database from inside one of its transactions, rather than wait for ever", async () => {
    const error = await db
      .transaction(async (tx) => {
        await insertAccount(tx, "kept?");
        const write = await insertAccount(db, "nested write").catch((e: Error) => e);
        const nested = await db.transaction((inner) => insertAccount(inner, "nested transaction")).catch((e: Error) => e);
        expect(await db.value("SELECT COUNT(*) FROM accounts"), "a read on the database is allowed").to.equal(1n);
        return [write, nested] as Error[];
      })
      .then((errors) => errors.map((e) => e.message));
    expect(error).to.deep.equal([
      "a statement that writes on the database from inside one of its transactions would wait for that transaction for ever: use its tx",
      "a transaction on the database from inside one of its transactions would wait for that transaction for ever: use its tx",
    ]);
    expect(await accountIds()).to.deep.equal(["kept?"]);
  });

  it("lets the transactions already queued finish and commits them when it closes", async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sqlite-database-")), "books.db");
    const onFile = new SqliteDatabase(openDatabase(file, SCHEMA));
    const queued = [
      onFile.transaction(async (tx) => {
        await insertAccount(tx, "first");
        await nextTick();
      }),
      onFile.transaction((tx) => insertAccount(tx, "second")),
    ];
    await onFile.close();
    await Promise.all(queued);
    const reopened = new SqliteDatabase(openDatabase(file, SCHEMA));
    try {
      expect((await reopened.all<{ id: string }>("SELECT id FROM accounts ORDER BY id")).map((r) => r.id)).to.deep.equal([
        "first",
        "second",
      ]);
    } finally {
      await reopened.close();
      fs.rmSync(path.dirname(file), { recursive: true, force: true });
    }
  });
});
