import { expect } from "chai";
import { SqliteBatchesStore } from "../../server/settlement/batches-store";
import { buildCharge, holdOk, makeLedger, makeParties } from "../helpers/ledger";

describe("BatchesStore and Ledger.assignHoldToBatch on a real SQLite database", () => {
  it("records a pending batch, lists unbatched captured holds, and the ledger alone moves a hold into a batch, once", () => {
    const { db, ledger } = makeLedger();
    try {
      const store = new SqliteBatchesStore(db);
      const { userId, sellerId } = makeParties(ledger);
      const first = holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 1_000_000n }));
      const second = holdOk(ledger, userId, sellerId, buildCharge({ priceMicros: 2_000_000n }));
      ledger.capture(first);
      ledger.capture(second);
      expect(store.lastNumber()).to.equal(0);
      expect(store.unbatchedCount()).to.equal(2);
      expect(store.unbatchedDebits()).to.deep.equal(new Map([[userId, 3_000_000n]]));
      expect(store.unbatchedPage([-1n, ""], 10).map((h) => h.id)).to.have.members([first, second]);

      ledger.commit.run(() => {
        store.insertPending({
          number: 1,
          receiptsRoot: `0x${"ab".repeat(32)}`,
          callCount: 1,
          totalDebitsMicros: 1_000_000n,
          platformFeeMicros: 100_000n,
          recordedAtBlock: 7n,
          createdAtMs: 1,
        });
        ledger.assignHoldToBatch(first, 1);
      });
      expect(() => ledger.commit.run(() => ledger.assignHoldToBatch(first, 1))).to.throw(/batched twice/);
      expect(store.pending()).to.include({ number: 1n, status: "pending", total_debits: 1_000_000n, recorded_at_block: 7n });
      expect(store.holdsOfBatch(1).map((h) => h.id)).to.deep.equal([first]);
      expect(store.unbatchedCount()).to.equal(1);
      expect(store.hold(first)).to.deep.equal({ id: first, status: "captured", batch_number: 1n, calls: 0n });

      store.setTxHash(1, `0x${"01".repeat(32)}`);
      expect(store.markSettled(1, null, 5)).to.equal(true);
      expect(store.markSettled(1, null, 6)).to.equal(false);
      expect(store.batch(1)).to.include({ status: "settled", tx_hash: `0x${"01".repeat(32)}` });
      expect(store.pending()).to.equal(undefined);
      expect(store.lastNumber()).to.equal(1);
    } finally {
      db.close();
    }
  });
});
