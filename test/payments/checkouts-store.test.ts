import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";
import { CheckoutsStore } from "../../server/payments/checkouts-store";
import { describeEachEngine } from "../helpers/engines";

describeEachEngine("CheckoutsStore", (engine) => {
  let db: Database;
  let store: CheckoutsStore;
  const address = `0x${"a1".repeat(20)}`;
  const insert = (id: string, nowMs = 1) =>
    store.insertCreated({ id, provider: "sandbox", accountId: "ada", address, amountMicros: 5_000_000n, nowMs, expiresAtMs: 100 });

  beforeEach(async () => {
    db = await engine.open();
    await (await Ledger.open(db)).ensureAccount({ id: "ada", kind: "user", name: "Ada" });
    store = new CheckoutsStore(db);
  });

  it("moves a checkout out of created exactly once, records its funding and marks a paid one funded", async () => {
    await insert("co1");
    expect(await store.get("co1")).to.include({ status: "created", amountMicros: 5_000_000n, credited: false, expiresAtMs: 100 });
    expect(await store.settleCreated("co1", "paid", null, 2)).to.equal(2);
    expect(await store.settleCreated("co1", "declined", "card_declined", 3)).to.equal(undefined);
    expect(await store.setFundingTx("co1", "mint", `0x${"11".repeat(32)}`, 4)).to.equal(4);
    expect(await store.setFundingTx("co1", "deposit", `0x${"22".repeat(32)}`, 5)).to.equal(5);
    expect(await store.markFunded("co1", 6)).to.equal(true);
    expect(await store.markFunded("co1", 7)).to.equal(false);
    expect(await store.get("co1")).to.include({ status: "funded", mintTx: `0x${"11".repeat(32)}`, depositTx: `0x${"22".repeat(32)}` });
    expect(await store.get("nope")).to.equal(undefined);
  });

  it("lets two concurrent settlements of one checkout move it once", async () => {
    await insert("co1");
    const moved = await Promise.all([
      db.transaction((tx) => store.settleCreated("co1", "paid", null, 2, tx)),
      db.transaction((tx) => store.settleCreated("co1", "declined", "card_declined", 2, tx)),
    ]);
    expect(moved.filter((stamp) => stamp !== undefined)).to.have.length(1);
  });

  it("grants the funding lease to its holder at once, to anyone else only once it is stale, and never on an unpaid checkout", async () => {
    await insert("co1");
    expect(await store.holdFunding("co1", undefined, 1_000, 10), "created: nothing to fund").to.equal(undefined);
    const mine = (await store.settleCreated("co1", "paid", null, 10))!;
    expect(await store.holdFunding("co1", undefined, 5, 20), "fresh: another funder waits").to.equal(undefined);
    const renewed = (await store.holdFunding("co1", mine, 5, 20))!;
    expect(renewed).to.equal(20);
    expect(await store.holdFunding("co1", mine, 5, 30), "an old stamp is not the holder's any more").to.equal(undefined);
    // The holder went quiet: once its last word is older than the cut-off, another funder takes over, and the
    // first one's stamp no longer holds.
    const theirs = (await store.holdFunding("co1", undefined, 21, 40))!;
    expect(theirs).to.equal(40);
    expect(await store.holdFunding("co1", renewed, 0, 41)).to.equal(undefined);
    expect(await store.holdFunding("co1", theirs, 0, 41)).to.equal(41);
  });

  it("never leaves the same updated_at twice, even when the clock stands still or goes back", async () => {
    await insert("co1", 50);
    const paid = (await store.settleCreated("co1", "paid", null, 50))!;
    expect(paid).to.equal(51);
    const held = (await store.holdFunding("co1", paid, 0, 10))!;
    expect(held).to.equal(52);
    expect(await store.setFundingTx("co1", "mint", `0x${"11".repeat(32)}`, 52)).to.equal(53);
  });
});
