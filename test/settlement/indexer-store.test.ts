import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { IndexerStore } from "../../server/settlement/indexer-store";
import { describeEachEngine } from "../helpers/engines";

describeEachEngine("IndexerStore: an indexer's progress", (engine) => {
  let db: Database;
  let store: IndexerStore;
  beforeEach(async () => {
    db = await engine.open();
    store = new IndexerStore(db);
  });

  it("has no progress before the first chunk, then keeps the last one saved, per indexer", async () => {
    expect(await store.progress("deposits:0xabc")).to.equal(undefined);
    await store.saveProgress("deposits:0xabc", { lastBlock: 10n, lastBlockHash: "0x10" }, 1);
    await store.saveProgress("deposits:0xabc", { lastBlock: 12n, lastBlockHash: "0x12" }, 2);
    await store.saveProgress("deposits:0xdef", { lastBlock: 3n, lastBlockHash: "0x03" }, 2);
    expect(await store.progress("deposits:0xabc")).to.deep.equal({ lastBlock: 12n, lastBlockHash: "0x12" });
    expect(await store.progress("deposits:0xdef")).to.deep.equal({ lastBlock: 3n, lastBlockHash: "0x03" });
  });

  it("advances only from the progress the caller read, so of two indexers starting from one point only the first moves it", async () => {
    const first = { lastBlock: 10n, lastBlockHash: "0x10" };
    const second = { lastBlock: 12n, lastBlockHash: "0x12" };
    expect(await db.transaction((tx) => store.advance("deposits:0xabc", undefined, first, 1, tx))).to.equal(true);
    // A second indexer that also read "no progress yet" is refused, and changes nothing.
    expect(await db.transaction((tx) => store.advance("deposits:0xabc", undefined, second, 2, tx))).to.equal(false);
    expect(await store.progress("deposits:0xabc")).to.deep.equal(first);

    expect(await db.transaction((tx) => store.advance("deposits:0xabc", first, second, 3, tx))).to.equal(true);
    // One that read the first progress comes too late now; so does one that read the right block with another hash.
    expect(await db.transaction((tx) => store.advance("deposits:0xabc", first, { lastBlock: 20n, lastBlockHash: "0x20" }, 4, tx))).to.equal(
      false,
    );
    expect(
      await db.transaction((tx) =>
        store.advance("deposits:0xabc", { ...second, lastBlockHash: "0xother" }, { lastBlock: 20n, lastBlockHash: "0x20" }, 5, tx),
      ),
    ).to.equal(false);
    expect(await store.progress("deposits:0xabc")).to.deep.equal(second);
  });

  it("reads the progress under its lock inside a transaction", async () => {
    await store.saveProgress("deposits:0xabc", { lastBlock: 7n, lastBlockHash: "0x07" }, 1);
    const read = await db.transaction(async (tx) => {
      await store.lockAll(tx);
      return [await store.lockProgress("deposits:0xabc", tx), await store.lockProgress("deposits:0xnone", tx)];
    });
    expect(read).to.deep.equal([{ lastBlock: 7n, lastBlockHash: "0x07" }, undefined]);
  });

  it("makes a second transaction that locks the progress wait for the first, then read what the first saved", async () => {
    await store.saveProgress("deposits:0xabc", { lastBlock: 7n, lastBlockHash: "0x07" }, 1);
    let locked!: () => void;
    const hasLock = new Promise<void>((resolve) => (locked = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = db.transaction(async (tx) => {
      await store.lockProgress("deposits:0xabc", tx);
      locked();
      await gate;
      await store.saveProgress("deposits:0xabc", { lastBlock: 9n, lastBlockHash: "0x09" }, 2, tx);
    });
    await hasLock;
    let secondRead: unknown = "not yet";
    const second = db.transaction((tx) => store.lockProgress("deposits:0xabc", tx)).then((read) => (secondRead = read));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(secondRead).to.equal("not yet");
    release();
    await Promise.all([first, second]);
    expect(secondRead).to.deep.equal({ lastBlock: 9n, lastBlockHash: "0x09" });
  });
});
