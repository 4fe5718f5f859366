import { expect } from "chai";
import type { StoredAddress } from "../../server/settlement/addresses-store";
import { SqliteExitsStore } from "../../server/settlement/exits-store";
import { makeLedger, makeParties } from "../helpers/ledger";

const ADA = `0x${"ad".repeat(20)}` as StoredAddress;

/** Where a log sits; `n` makes its key distinct. */
function at(n: number) {
  return { txHash: `0x${n.toString(16).padStart(64, "0")}`, logIndex: n, blockNumber: BigInt(n), blockHash: `0x${"cc".repeat(32)}` };
}

describe("ExitsStore: exit requests and their ends on a real SQLite database", () => {
  it("records a pending request once, finds it by its log and its address, and closes it once", () => {
    const { db, ledger } = makeLedger();
    try {
      const store = new SqliteExitsStore(db);
      const { userId } = makeParties(ledger, 0n);
      const request = at(1);
      store.insertPending({ ...request, address: ADA, accountId: userId, requestedMicros: 5n, readyAtSec: 100n }, 5n, 1);
      expect(() =>
        store.insertPending({ ...request, address: ADA, accountId: userId, requestedMicros: 5n, readyAtSec: 100n }, 5n, 1),
      ).to.throw(/UNIQUE/);
      expect(store.byRequestLog(request.txHash, request.logIndex)).to.deep.equal({ address: ADA, requested: 5n, ready_at: 100n });
      expect(store.frozen(request.txHash, request.logIndex)).to.equal(0n);
      const pending = store.pendingAt(ADA)!;
      expect(pending).to.include({ account_id: userId, requested: 5n, frozen: 0n, shortfall: 5n });

      const closing = at(2);
      const end = { status: "completed" as const, keptMicros: 0n, paidMicros: 3n, uncoveredMicros: 3n };
      expect(store.close(pending, end, closing, 2)).to.equal(true);
      expect(store.close(pending, end, closing, 3)).to.equal(false);
      expect(store.pendingAt(ADA)).to.equal(undefined);
      expect(store.byClosingLog(closing.txHash, closing.logIndex)).to.deep.equal({
        tx_hash: request.txHash,
        log_index: 1n,
        status: "completed",
      });
    } finally {
      db.close();
    }
  });

  it("gives an unowned address's exits to the account that links it: a pending one owes its whole request", () => {
    const { db, ledger } = makeLedger();
    try {
      const store = new SqliteExitsStore(db);
      const { userId } = makeParties(ledger, 0n);
      store.insertPending({ ...at(1), address: ADA, accountId: null, requestedMicros: 4n, readyAtSec: 9n }, 0n, 1);
      store.close(store.pendingAt(ADA)!, { status: "completed", keptMicros: 0n, paidMicros: 4n, uncoveredMicros: 4n }, at(2), 2);
      store.insertPending({ ...at(3), address: ADA, accountId: null, requestedMicros: 7n, readyAtSec: 9n }, 0n, 3);
      expect(store.completedUnownedCount(ADA)).to.equal(1);
      expect(store.pendingAt(ADA)).to.include({ account_id: null, shortfall: 0n });

      expect(store.adoptUnowned(ADA, userId)).to.equal(2);
      expect(store.pendingAt(ADA)).to.include({ account_id: userId, shortfall: 7n });
      expect(store.completedUnownedCount(ADA)).to.equal(0);
      expect(store.adoptUnowned(ADA, userId)).to.equal(0);
    } finally {
      db.close();
    }
  });
});
