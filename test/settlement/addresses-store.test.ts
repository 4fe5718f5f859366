import { expect } from "chai";
import { SqliteAddressesStore, type ChainDeposit, type StoredAddress } from "../../server/settlement/addresses-store";
import { makeLedger, makeParties } from "../helpers/ledger";

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

describe("AddressesStore: linked addresses and recorded deposits on a real SQLite database", () => {
  it("links an address to one account for good, oldest link first", () => {
    const { db, ledger } = makeLedger();
    try {
      const store = new SqliteAddressesStore(db);
      const { userId, sellerId } = makeParties(ledger, 0n);
      expect(store.accountFor(ADA)).to.equal(undefined);
      expect(store.addressesOf(userId)).to.deep.equal([]);
      store.link(ADA, userId, 2);
      store.link(BOB, userId, 1);
      expect(store.accountFor(ADA)).to.equal(userId);
      expect(store.addressesOf(userId)).to.deep.equal([BOB, ADA]);
      expect(() => store.link(ADA, sellerId, 3)).to.throw(/UNIQUE/);
      expect(store.accountFor(ADA)).to.equal(userId);
    } finally {
      db.close();
    }
  });

  it("records deposits once, keeps waiting ones in chain order, and lets one account claim each", () => {
    const { db, ledger } = makeLedger();
    try {
      const store = new SqliteAddressesStore(db);
      const { userId } = makeParties(ledger, 0n);
      const later = buildDeposit(2, ADA, { blockNumber: 20n });
      const earlier = buildDeposit(3, ADA, { blockNumber: 5n });
      store.recordDeposit(later, null, null, 1);
      store.recordDeposit(earlier, null, null, 1);
      store.recordDeposit(buildDeposit(4, BOB), null, null, 1);
      expect(() => store.recordDeposit(later, null, null, 2)).to.throw(/UNIQUE/);
      expect(store.deposit(later.txHash, later.logIndex)).to.deep.equal({ address: ADA, amountMicros: 2_000_000n });
      expect(store.deposit(later.txHash, 99)).to.equal(undefined);

      expect(store.waitingDeposits(ADA)).to.deep.equal([
        { txHash: earlier.txHash, logIndex: 3, amountMicros: 3_000_000n },
        { txHash: later.txHash, logIndex: 2, amountMicros: 2_000_000n },
      ]);
      const entryId = ledger.commit.run(() => ledger.creditChainDeposit(userId, 3_000_000n, earlier));
      expect(store.claimDeposit(earlier.txHash, earlier.logIndex, userId, entryId)).to.equal(true);
      expect(store.claimDeposit(earlier.txHash, earlier.logIndex, userId, entryId)).to.equal(false);
      expect(store.waitingDeposits(ADA).map((d) => d.logIndex)).to.deep.equal([2]);
    } finally {
      db.close();
    }
  });
});
