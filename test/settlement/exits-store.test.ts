import { expect } from "chai";
import { type Database, isUniqueViolation } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";
import type { StoredAddress } from "../../server/settlement/addresses-store";
import { ExitsStore } from "../../server/settlement/exits-store";
import { describeEachEngine } from "../helpers/engines";

const ADA = `0x${"ad".repeat(20)}` as StoredAddress;

/** Where a log sits; `n` makes its key distinct. */
function at(n: number) {
  return { txHash: `0x${n.toString(16).padStart(64, "0")}`, logIndex: n, blockNumber: BigInt(n), blockHash: `0x${"cc".repeat(32)}` };
}

describeEachEngine("ExitsStore: exit requests and their ends", (engine) => {
  let db: Database;
  let store: ExitsStore;
  let userId: string;
  beforeEach(async () => {
    db = await engine.open();
    const ledger = await Ledger.open(db);
    store = new ExitsStore(db);
    userId = (await ledger.ensureAccount({ id: "user:alice", kind: "user", name: "Alice" })).id;
  });

  it("records a pending request once, finds it by its log and its address, and closes it once", async () => {
    const request = at(1);
    await store.insertPending({ ...request, address: ADA, accountId: userId, requestedMicros: 5n, readyAtSec: 100n }, 5n, 1);
    const again = await store
      .insertPending({ ...request, address: ADA, accountId: userId, requestedMicros: 5n, readyAtSec: 100n }, 5n, 1)
      .then(
        () => expect.fail("a second record of the same request was accepted"),
        (error: unknown) => error,
      );
    expect(isUniqueViolation(again)).to.equal(true);
    expect(await store.byRequestLog(request.txHash, request.logIndex)).to.deep.equal({ address: ADA, requested: 5n, ready_at: 100n });
    expect(await store.frozen(request.txHash, request.logIndex)).to.equal(0n);
    const pending = (await store.pendingAt(ADA))!;
    expect(pending).to.include({ account_id: userId, requested: 5n, frozen: 0n, shortfall: 5n });

    const closing = at(2);
    const end = { status: "completed" as const, keptMicros: 0n, paidMicros: 3n, uncoveredMicros: 3n };
    expect(await store.close(pending, end, closing, 2)).to.equal(true);
    expect(await store.close(pending, end, closing, 3)).to.equal(false);
    expect(await store.pendingAt(ADA)).to.equal(undefined);
    expect(await store.byClosingLog(closing.txHash, closing.logIndex)).to.deep.equal({
      tx_hash: request.txHash,
      log_index: 1n,
      status: "completed",
    });
  });

  it("gives an unowned address's exits to the account that links it: a pending one owes its whole request", async () => {
    await store.insertPending({ ...at(1), address: ADA, accountId: null, requestedMicros: 4n, readyAtSec: 9n }, 0n, 1);
    await store.close(
      (await store.pendingAt(ADA))!,
      { status: "completed", keptMicros: 0n, paidMicros: 4n, uncoveredMicros: 4n },
      at(2),
      2,
    );
    await store.insertPending({ ...at(3), address: ADA, accountId: null, requestedMicros: 7n, readyAtSec: 9n }, 0n, 3);
    expect(await store.completedUnownedCount(ADA)).to.equal(1);
    expect(await store.pendingAt(ADA)).to.include({ account_id: null, shortfall: 0n });

    expect(await store.adoptUnowned(ADA, userId)).to.equal(2);
    expect(await store.pendingAt(ADA)).to.include({ account_id: userId, shortfall: 7n });
    expect(await store.completedUnownedCount(ADA)).to.equal(0);
    expect(await store.adoptUnowned(ADA, userId)).to.equal(0);
  });

  it("locks a pending request read inside a transaction, so a concurrent close waits and then finds it closed", async () => {
    await store.insertPending({ ...at(1), address: ADA, accountId: null, requestedMicros: 4n, readyAtSec: 9n }, 0n, 1);
    const end = { status: "cancelled" as const, keptMicros: 0n, paidMicros: null, uncoveredMicros: 0n };
    let locked!: () => void;
    const hasLock = new Promise<void>((resolve) => (locked = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = db.transaction(async (tx) => {
      const pending = (await store.pendingAt(ADA, tx))!;
      locked();
      await gate;
      return store.close(pending, end, at(2), 2, tx);
    });
    await hasLock;
    const second = db.transaction(async (tx) => {
      const pending = await store.pendingAt(ADA, tx);
      return pending ? store.close(pending, end, at(3), 3, tx) : "none pending";
    });
    // Long enough for the second to be waiting on the row (PostgreSQL) or for its turn (SQLite).
    await new Promise((resolve) => setTimeout(resolve, 100));
    release();
    expect(await Promise.all([first, second])).to.deep.equal([true, "none pending"]);
    expect(await store.byClosingLog(at(2).txHash, 2)).to.include({ status: "cancelled" });
  });
});
