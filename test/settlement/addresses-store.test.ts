import { expect } from "chai";
import { type Database, isUniqueViolation } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";
import { AddressesStore, type ChainDeposit, type StoredAddress } from "../../server/settlement/addresses-store";
import { describeEachEngine } from "../helpers/engines";

const ADA = `0x${"ad".repeat(20)}` as StoredAddress;
const BOB = `0x${"b0".repeat(20)}` as StoredAddress;

/** A deposit log to `address`; `n` makes its key distinct. */
function buildDeposit(n: number, address: StoredAddress, overrides: Partial<ChainDeposit> = {}): ChainDeposit {
  return {
    txHash: `0x${n.toString(16).padStart(64, "0")}`,
    logIndex: n,
    blockNumber: BigInt(10 + n),
    blockHash: `0x${"cc".repeat(32)}`,
    address,
    sender: BOB,
    amountMicros: BigInt(n) * 1_000_000n,
    ...overrides,
  };
}

/** What a promise rejected with (fails the test if it resolved). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail("expected a rejection"),
    (error: unknown) => error,
  );
}

describeEachEngine("AddressesStore: linked addresses and recorded deposits", (engine) => {
  let db: Database;
  let ledger: Ledger;
  let store: AddressesStore;
  let userId: string;
  let sellerId: string;
  beforeEach(async () => {
    db = await engine.open();
    ledger = await Ledger.open(db);
    store = new AddressesStore(db);
    userId = (await ledger.ensureAccount({ id: "user:alice", kind: "user", name: "Alice" })).id;
    sellerId = (await ledger.ensureAccount({ id: "seller:acme", kind: "seller", name: "Acme skills" })).id;
  });

  it("links an address to one account for good, oldest link first", async () => {
    expect(await store.accountFor(ADA)).to.equal(undefined);
    expect(await store.addressesOf(userId)).to.deep.equal([]);
    await store.link(ADA, userId, 2);
    await store.link(BOB, userId, 1);
    expect(await store.accountFor(ADA)).to.equal(userId);
    expect(await store.addressesOf(userId)).to.deep.equal([BOB, ADA]);
    expect(isUniqueViolation(await rejection(store.link(ADA, sellerId, 3)))).to.equal(true);
    expect(await store.accountFor(ADA)).to.equal(userId);
  });

  it("records deposits once, keeps waiting ones in chain order, and lets one account claim each", async () => {
    const later = buildDeposit(2, ADA, { blockNumber: 20n });
    const earlier = buildDeposit(3, ADA, { blockNumber: 5n });
    await store.recordDeposit(later, null, null, 1);
    await store.recordDeposit(earlier, null, null, 1);
    await store.recordDeposit(buildDeposit(4, BOB), null, null, 1);
    expect(isUniqueViolation(await rejection(store.recordDeposit(later, null, null, 2)))).to.equal(true);
    expect(await store.deposit(later.txHash, later.logIndex)).to.deep.equal({ address: ADA, amountMicros: 2_000_000n });
    expect(await store.deposit(later.txHash, 99)).to.equal(undefined);

    expect(await store.waitingDeposits(ADA)).to.deep.equal([
      { txHash: earlier.txHash, logIndex: 3, amountMicros: 3_000_000n },
      { txHash: later.txHash, logIndex: 2, amountMicros: 2_000_000n },
    ]);
    const claimed = await db.transaction(async (tx) => {
      const entryId = await ledger.creditChainDeposit(userId, 3_000_000n, earlier, "", tx);
      return [
        await store.claimDeposit(earlier.txHash, earlier.logIndex, userId, entryId, tx),
        await store.claimDeposit(earlier.txHash, earlier.logIndex, userId, entryId, tx),
      ];
    });
    expect(claimed).to.deep.equal([true, false]);
    expect((await store.waitingDeposits(ADA)).map((d) => d.logIndex)).to.deep.equal([2]);
  });

  it("records a credited deposit with its account and entry, and never as waiting", async () => {
    const deposit = buildDeposit(5, ADA);
    await db.transaction(async (tx) => {
      await store.link(ADA, userId, 1, tx);
      const entryId = await ledger.creditChainDeposit(userId, deposit.amountMicros, deposit, "", tx);
      await store.recordDeposit(deposit, userId, entryId, 2, tx);
    });
    expect(await store.waitingDeposits(ADA)).to.deep.equal([]);
    expect(await db.one("SELECT account_id, amount FROM chain_deposits")).to.deep.equal({ account_id: userId, amount: 5_000_000n });
  });
});
