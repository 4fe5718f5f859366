import { expect } from "chai";
import { type Db, openDatabase } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { Ledger } from "../../server/ledger/ledger";
import { SqliteCheckoutsStore } from "../../server/payments/checkouts-store";

describe("CheckoutsStore on a real SQLite database", () => {
  let db: Db;

  beforeEach(() => {
    db = openDatabase(":memory:", SCHEMA);
    new Ledger(db).ensureAccount({ id: "ada", kind: "user", name: "Ada" });
  });
  afterEach(() => db.close());

  it("moves a checkout out of created exactly once, records its funding and marks a paid one funded", () => {
    const store = new SqliteCheckoutsStore(db);
    const address = `0x${"a1".repeat(20)}`;
    store.insertCreated({
      id: "co1",
      provider: "sandbox",
      accountId: "ada",
      address,
      amountMicros: 5_000_000n,
      nowMs: 1,
      expiresAtMs: 100,
    });
    expect(store.get("co1")).to.include({ status: "created", amountMicros: 5_000_000n, credited: false, expiresAtMs: 100 });
    expect(store.settleCreated("co1", "paid", null, 2)).to.equal(true);
    expect(store.settleCreated("co1", "declined", "card_declined", 3)).to.equal(false);
    store.setFundingTx("co1", "mint", `0x${"11".repeat(32)}`, 4);
    store.setFundingTx("co1", "deposit", `0x${"22".repeat(32)}`, 5);
    store.markFunded("co1", 6);
    expect(store.get("co1")).to.include({ status: "funded", mintTx: `0x${"11".repeat(32)}`, depositTx: `0x${"22".repeat(32)}` });
    expect(store.get("nope")).to.equal(undefined);
  });
});
