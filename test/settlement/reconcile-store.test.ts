import { expect } from "chai";
import { SqliteAddressesStore, type StoredAddress } from "../../server/settlement/addresses-store";
import { SqliteBatchesStore } from "../../server/settlement/batches-store";
import { SqliteExitsStore } from "../../server/settlement/exits-store";
import { SqliteIndexerStore } from "../../server/settlement/indexer-store";
import { SqliteReconcileStore } from "../../server/settlement/reconcile-store";
import { SqliteVoucherStore } from "../../server/settlement/vouchers-store";
import { buildCharge, holdOk, makeLedger } from "../helpers/ledger";

const USDC = 1_000_000n;
const BUYER = `0x${"b1".repeat(20)}` as StoredAddress;
const SELLER = `0x${"5e".repeat(20)}` as StoredAddress;
const NOBODY = `0x${"00".repeat(19)}01` as StoredAddress;

const tx = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;
const log = (n: number, blockNumber: bigint) => ({ txHash: tx(n), logIndex: n, blockNumber, blockHash: `0x${"cc".repeat(32)}` });

describe("ReconcileStore: the ledger's settled view, read across the books on a real SQLite database", () => {
  it("reads batches, settled debits and credits, deposits, vouchers, exits and links as the books hold them", () => {
    const { db, ledger } = makeLedger();
    try {
      const store = new SqliteReconcileStore(db);
      const addresses = new SqliteAddressesStore(db);
      const batches = new SqliteBatchesStore(db);
      const exits = new SqliteExitsStore(db);
      const vouchers = new SqliteVoucherStore(db);
      expect(store.hasSettlementSchema()).to.equal(true);

      const buyer = ledger.ensureAccount({ id: "user:buyer", kind: "user", name: "Buyer" }).id;
      const seller = ledger.ensureAccount({ id: "seller:acme", kind: "seller", name: "Acme" }).id;
      addresses.link(BUYER, buyer, 1);
      addresses.link(SELLER, seller, 2);
      // 10 USDC deposited at block 11 to the buyer; 2 USDC waiting at block 12 for an address nobody linked.
      const deposit = { ...log(1, 11n), address: BUYER, sender: BUYER, amountMicros: 10n * USDC };
      ledger.commit.run(() => addresses.recordDeposit(deposit, buyer, ledger.creditChainDeposit(buyer, 10n * USDC, deposit), 3));
      addresses.recordDeposit({ ...log(2, 12n), address: NOBODY, sender: NOBODY, amountMicros: 2n * USDC }, null, null, 4);
      new SqliteIndexerStore(db).saveProgress(`deposits:${"ee".repeat(20)}`, { lastBlock: 12n, lastBlockHash: "0x12" }, 5);

      // Two paid calls: one in settled batch 1, one not batched yet.
      const settled = holdOk(ledger, buyer, seller, buildCharge({ priceMicros: USDC }));
      const unsettled = holdOk(ledger, buyer, seller, buildCharge({ priceMicros: 2n * USDC }));
      ledger.capture(settled);
      ledger.capture(unsettled);
      const [settledHold] = batches.unbatchedPage([-1n, ""], 10).filter((h) => h.id === settled);
      ledger.commit.run(() => {
        batches.insertPending({
          number: 1,
          receiptsRoot: `0x${"ab".repeat(32)}`,
          callCount: 1,
          totalDebitsMicros: settledHold.amount,
          platformFeeMicros: settledHold.fee_amount,
          recordedAtBlock: 13n,
          createdAtMs: 6,
        });
        ledger.assignHoldToBatch(settled, 1);
      });
      batches.markSettled(1, null, 7);

      // A voucher of 1 USDC, issued with a deadline at 1,000 s.
      ledger.commit.run(() => {
        const entryId = ledger.withdrawByVoucher(buyer, USDC, { address: BUYER, nonce: 9n });
        vouchers.insertIssued({ address: BUYER, nonce: 9n, accountId: buyer, amountMicros: USDC, deadlineSec: 1_000n, entryId });
      });

      // An exit of 3 USDC, frozen in full, completed at block 30 and paid in full.
      const request = log(3, 20n);
      ledger.commit.run(() => {
        exits.insertPending({ ...request, address: BUYER, accountId: buyer, requestedMicros: 3n * USDC, readyAtSec: 50n }, 3n * USDC, 8);
        ledger.noteExitShortfall();
        ledger.topUpExitFreezes(buyer);
      });
      expect(exits.frozen(request.txHash, request.logIndex)).to.equal(3n * USDC);
      exits.close(
        exits.pendingAt(BUYER)!,
        { status: "completed", keptMicros: 3n * USDC, paidMicros: 3n * USDC, uncoveredMicros: 0n },
        log(4, 30n),
        9,
      );

      expect(store.batches()).to.deep.equal([
        {
          number: 1n,
          status: "settled",
          receipts_root: `0x${"ab".repeat(32)}`,
          call_count: 1n,
          total_debits: settledHold.amount,
          platform_fee: settledHold.fee_amount,
        },
      ]);
      expect(store.batchSums(1n)).to.deep.equal({ calls: 1n, debits: settledHold.amount, fees: settledHold.fee_amount });
      expect(store.batchSums(2n)).to.deep.equal({ calls: 0n, debits: 0n, fees: 0n });
      expect(store.settledPerAccount(1)).to.deep.equal([
        { account_id: buyer, seller_account_id: seller, debits: settledHold.amount, credits: settledHold.seller_amount },
      ]);
      expect(store.settledPerAccount(0)).to.deep.equal([]);
      expect(store.deposits(11n)).to.deep.equal([{ account_id: buyer, address: BUYER, amount: 10n * USDC }]);
      expect(store.deposits(10n)).to.deep.equal([]);
      expect(store.waitingDeposits(12n)).to.deep.equal([{ address: NOBODY, amount: 2n * USDC }]);
      expect(store.waitingDeposits(11n)).to.deep.equal([]);
      expect(store.indexedThrough(`deposits:${"ee".repeat(20)}`)).to.equal(12n);
      expect(store.indexedThrough("deposits:0xother")).to.equal(undefined);
      expect(store.outstandingVouchers(500n)).to.deep.equal([{ address: BUYER, nonce: 9n, amount: USDC }]);
      expect(store.voucherWithdrawals()).to.deep.equal([{ account_id: buyer, amount: USDC }]);
      expect(store.completedExits(30n)).to.deep.equal([{ address: BUYER, account_id: buyer, paid: 3n * USDC, taken: 3n * USDC }]);
      expect(store.completedExits(29n)).to.deep.equal([]);
      expect(store.linkedAddresses()).to.deep.equal([
        // By address: 0x5e… before 0xb1….
        { address: SELLER, account_id: seller },
        { address: BUYER, account_id: buyer },
      ]);

      const unsettledHold = batches.unbatchedPage([-1n, ""], 10).find((h) => h.id === unsettled)!;
      expect(store.sellerShares(seller)).to.deep.equal({ settled: settledHold.seller_amount, pending: unsettledHold.seller_amount });
      expect(store.sellerShares(buyer)).to.deep.equal({ settled: 0n, pending: 0n });

      // Redeemed before its deadline: still owed by the escrow at a block before that deadline, not after.
      vouchers.settle(BUYER, 9n, "redeemed");
      expect(store.outstandingVouchers(1_000n)).to.have.length(1);
      expect(store.outstandingVouchers(1_001n)).to.deep.equal([]);
    } finally {
      db.close();
    }
  });
});
