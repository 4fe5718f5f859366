import { expect } from "chai";
import { type Database, isUniqueViolation, numberPlaceholders } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";
import { assertBalanced } from "../../server/ledger/invariants";
import { computeCharge } from "../../server/ledger/fees";
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
    const row = await db.one<{ created_at: bigint; daily_call_cap: bigint | null }>("SELECT created_at, daily_call_cap FROM accounts WHERE id = ?", ["a"]);
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
