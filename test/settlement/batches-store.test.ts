import { expect } from "chai";
import { type Database, isUniqueViolation } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";
import { computeCharge } from "../../server/ledger/fees";
import { BatchesStore } from "../../server/settlement/batches-store";
import { describeEachEngine } from "../helpers/engines";

/** A user credited with 10 USDC of development credit, and a seller. */
async function parties(ledger: Ledger): Promise<{ userId: string; sellerId: string }> {
  const userId = (await ledger.ensureAccount({ id: "user:alice", kind: "user", name: "Alice" })).id;
  const sellerId = (await ledger.ensureAccount({ id: "seller:acme", kind: "seller", name: "Acme skills" })).id;
  await ledger.credit(userId, 10_000_000n, "dev_credit");
  return { userId, sellerId };
}

/** A captured hold of `priceMicros` (10% fee included); returns its id. */
async function captured(ledger: Ledger, userId: string, sellerId: string, priceMicros: bigint): Promise<string> {
  const held = await ledger.hold({
    accountId: userId,
    sellerAccountId: sellerId,
    skillId: "skill:echo",
    charge: computeCharge(priceMicros, "included", 1000n),
  });
  if (!held.ok) throw new Error(`expected the hold to succeed, got ${held.reason}`);
  if (!(await ledger.capture(held.hold.id)).ok) throw new Error("expected the capture to succeed");
  return held.hold.id;
}

describeEachEngine("BatchesStore and Ledger.assignHoldToBatch", (engine) => {
  let db: Database;
  let ledger: Ledger;
  let store: BatchesStore;

  beforeEach(async () => {
    db = await engine.open();
    ledger = await Ledger.open(db);
    store = new BatchesStore(db);
  });

  const pendingBatch = (number: number) => ({
    number,
    receiptsRoot: `0x${"ab".repeat(32)}` as const,
    callCount: 1,
    totalDebitsMicros: 1_000_000n,
    platformFeeMicros: 100_000n,
    recordedAtBlock: 7n,
    createdAtMs: 1,
  });

  it("records a pending batch, lists unbatched captured holds, and the ledger alone moves a hold into a batch, once", async () => {
    const { userId, sellerId } = await parties(ledger);
    const first = await captured(ledger, userId, sellerId, 1_000_000n);
    const second = await captured(ledger, userId, sellerId, 2_000_000n);
    expect(await store.lastNumber()).to.equal(0);
    expect(await store.unbatchedCount()).to.equal(2);
    expect(await store.unbatchedDebits()).to.deep.equal(new Map([[userId, 3_000_000n]]));
    expect((await store.unbatchedPage([-1n, ""], 10)).map((h) => h.id)).to.have.members([first, second]);
    expect(await store.unbatchedGroups()).to.deep.equal([{ account_id: userId, seller_account_id: sellerId, calls: 2n }]);

    await db.transaction(async (tx) => {
      await store.insertPending(pendingBatch(1), tx);
      await ledger.assignHoldToBatch(first, 1, tx);
    });
    const twice = await db.transaction((tx) => ledger.assignHoldToBatch(first, 1, tx)).catch((e: unknown) => e);
    expect(twice)
      .to.be.instanceOf(Error)
      .with.property("message")
      .that.matches(/batched twice/);
    expect(await store.pending()).to.include({ number: 1n, status: "pending", total_debits: 1_000_000n, recorded_at_block: 7n });
    expect((await store.holdsOfBatch(1)).map((h) => h.id)).to.deep.equal([first]);
    expect(await store.unbatchedCount()).to.equal(1);
    expect(await store.hold(first)).to.deep.equal({ id: first, status: "captured", batch_number: 1n, calls: 0n });

    await store.setTxHash(1, `0x${"01".repeat(32)}`);
    expect(await store.markSettled(1, null, 5)).to.equal(true);
    expect(await store.markSettled(1, null, 6)).to.equal(false);
    expect(await store.batch(1)).to.include({ status: "settled", tx_hash: `0x${"01".repeat(32)}` });
    expect(await store.pending()).to.equal(undefined);
    expect(await store.lastNumber()).to.equal(1);
  });

  it("pages unbatched holds by (closed_at, id), strictly after the cursor", async () => {
    const { userId, sellerId } = await parties(ledger);
    const ids: string[] = [];
    for (const price of [1_000n, 2_000n, 3_000n]) ids.push(await captured(ledger, userId, sellerId, price));
    const all = await store.unbatchedPage([-1n, ""], 10);
    expect(all.map((h) => h.id)).to.have.members(ids);
    for (let i = 1; i < all.length; i++) {
      const [a, b] = [all[i - 1], all[i]];
      expect(a.closed_at < b.closed_at || (a.closed_at === b.closed_at && a.id < b.id), `row ${i} follows row ${i - 1}`).to.equal(true);
    }
    const rest = await store.unbatchedPage([all[0].closed_at, all[0].id], 10);
    expect(rest.map((h) => h.id)).to.deep.equal(all.slice(1).map((h) => h.id));
    expect((await store.unbatchedPage([-1n, ""], 2)).map((h) => h.id)).to.deep.equal(all.slice(0, 2).map((h) => h.id));
  });

  it("adds a batch's calls to the settled totals as it is marked settled, and keeps a batch's calls as they were", async () => {
    const { userId, sellerId } = await parties(ledger);
    const globex = (await ledger.ensureAccount({ id: "seller:globex", kind: "seller", name: "Globex" })).id;
    const batch = async (number: number, ...holds: string[]) => {
      await db.transaction(async (tx) => {
        await store.insertPending(pendingBatch(number), tx);
        for (const hold of holds) await ledger.assignHoldToBatch(hold, number, tx);
      });
    };
    const totals = () =>
      db.all("SELECT account_id, seller_account_id, calls, debits, credits FROM settled_pair_totals ORDER BY seller_account_id");
    const a = await captured(ledger, userId, sellerId, 1_000_000n);
    const b = await captured(ledger, userId, globex, 2_000_000n);
    await batch(1, a, b);
    expect(await totals()).to.deep.equal([]);
    expect(await store.markSettled(1, null, 5)).to.equal(true);
    expect(await totals()).to.deep.equal([
      { account_id: userId, seller_account_id: sellerId, calls: 1n, debits: 1_000_000n, credits: 900_000n },
      { account_id: userId, seller_account_id: globex, calls: 1n, debits: 2_000_000n, credits: 1_800_000n },
    ]);
    const c = await captured(ledger, userId, sellerId, 3_000_000n);
    await batch(2, c);
    expect(await store.markSettled(2, null, 6)).to.equal(true);
    expect(await store.markSettled(2, null, 7)).to.equal(false);
    expect((await totals())[0]).to.deep.equal({
      account_id: userId,
      seller_account_id: sellerId,
      calls: 2n,
      debits: 4_000_000n,
      credits: 3_600_000n,
    });

    const refused = (sql: string, params: unknown[] = []) =>
      db.run(sql, params as never).then(
        () => expect.fail(`${sql} was accepted`),
        (error: Error) => error.message,
      );
    // A call joins only a pending batch: not a settled one, whose totals are taken.
    const late = await captured(ledger, userId, sellerId, 1_000n);
    expect(await refused("UPDATE holds SET batch_number = 1 WHERE id = ?", [late])).to.include(
      "a hold joins only a pending settlement batch",
    );
    // A call in a batch changes no more, is not deleted, and does not move.
    expect(await refused("UPDATE holds SET amount = amount + 1, seller_amount = seller_amount + 1 WHERE id = ?", [a])).to.include(
      "a hold in a settlement batch cannot change",
    );
    expect(await refused("UPDATE holds SET status = 'released' WHERE id = ?", [c])).to.include(
      "a hold in a settlement batch cannot change",
    );
    expect(await refused("DELETE FROM holds WHERE id = ?", [b])).to.include("a hold in a settlement batch cannot be deleted");
    expect(await refused("UPDATE holds SET batch_number = 2 WHERE id = ?", [a])).to.include("a hold already belongs to a settlement batch");
    // The totals only grow, a batch at a time.
    expect(await refused("UPDATE settled_pair_totals SET credits = credits + 1")).to.include("the settled totals only grow");
    expect(await refused("UPDATE settled_pair_totals SET calls = calls - 1, debits = debits - 1")).to.include(
      "the settled totals only grow",
    );
    expect(await refused("DELETE FROM settled_pair_totals")).to.include("the settled totals cannot be deleted");
    // A call not in a batch is the ledger's to settle as before.
    expect(await db.run("UPDATE holds SET closed_at = closed_at WHERE id = ?", [late])).to.equal(1);
  });

  it("keeps at most one batch pending: a second pending batch is refused as a uniqueness violation", async () => {
    await store.insertPending(pendingBatch(1));
    const error = await store.insertPending(pendingBatch(2)).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(Error);
    expect(isUniqueViolation(error), String(error)).to.equal(true);
    expect(await store.lastNumber()).to.equal(1);
  });
});
