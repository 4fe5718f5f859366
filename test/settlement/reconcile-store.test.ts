import { expect } from "chai";
import type { Database, Sql } from "../../server/db/sql";
import { computeCharge } from "../../server/ledger/fees";
import { Ledger } from "../../server/ledger/ledger";
import { AddressesStore, type StoredAddress } from "../../server/settlement/addresses-store";
import { BatchesStore } from "../../server/settlement/batches-store";
import { ExitsStore } from "../../server/settlement/exits-store";
import { IndexerStore } from "../../server/settlement/indexer-store";
import { ReconcileStore } from "../../server/settlement/reconcile-store";
import { describeEachEngine } from "../helpers/engines";

const USDC = 1_000_000n;
const BUYER = `0x${"b1".repeat(20)}` as StoredAddress;
const SELLER = `0x${"5e".repeat(20)}` as StoredAddress;
const NOBODY = `0x${"00".repeat(19)}01` as StoredAddress;

const tx = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;
const log = (n: number, blockNumber: bigint) => ({ txHash: tx(n), logIndex: n, blockNumber, blockHash: `0x${"cc".repeat(32)}` });

type HoldAmounts = { amount: bigint; fee_amount: bigint; seller_amount: bigint };

describeEachEngine("ReconcileStore: the ledger's settled view, read across the books", (engine) => {
  let db: Database;
  beforeEach(async () => {
    db = await engine.open();
  });

  it("reads batches, settled debits and credits, deposits, vouchers, exits and links as the books hold them", async () => {
    const ledger = await Ledger.open(db);
    const store = new ReconcileStore(db);
    const addresses = new AddressesStore(db);
    const exits = new ExitsStore(db);
    expect(await store.hasSettlementSchema()).to.equal(true);

    const buyer = (await ledger.ensureAccount({ id: "user:buyer", kind: "user", name: "Buyer" })).id;
    const seller = (await ledger.ensureAccount({ id: "seller:acme", kind: "seller", name: "Acme" })).id;
    await addresses.link(BUYER, buyer, 1);
    await addresses.link(SELLER, seller, 2);
    // 10 USDC deposited at block 11 to the buyer; 2 USDC waiting at block 12 for an address nobody linked.
    const deposit = { ...log(1, 11n), address: BUYER, sender: BUYER, amountMicros: 10n * USDC };
    await db.transaction(async (tx) =>
      addresses.recordDeposit(deposit, buyer, await ledger.creditChainDeposit(buyer, 10n * USDC, deposit, "", tx), 3, tx),
    );
    await addresses.recordDeposit({ ...log(2, 12n), address: NOBODY, sender: NOBODY, amountMicros: 2n * USDC }, null, null, 4);
    await new IndexerStore(db).saveProgress(`deposits:${"ee".repeat(20)}`, { lastBlock: 12n, lastBlockHash: "0x12" }, 5);

    // Two paid calls: one in settled batch 1, one not batched yet.
    const pay = async (priceMicros: bigint, tx?: Sql) => {
      const charge = computeCharge(priceMicros, "included", 1000n);
      const held = await ledger.hold({ accountId: buyer, sellerAccountId: seller, skillId: "skill:echo", charge }, tx);
      if (!held.ok) throw new Error(`the hold was refused: ${held.reason}`);
      expect((await ledger.capture(held.hold.id, tx)).ok).to.equal(true);
      return (await (tx ?? db).one<HoldAmounts>("SELECT amount, fee_amount, seller_amount FROM holds WHERE id = ?", [held.hold.id]))!;
    };
    const settledHold = await db.transaction(async (tx) => {
      const hold = await pay(USDC, tx);
      // Written as the settler writes a batch (server/settlement/batches.ts), in the SQL its store runs.
      await tx.run(
        `INSERT INTO settlement_batches (number, status, receipts_root, call_count, total_debits, platform_fee, recorded_at_block, created_at)
         VALUES (1, 'pending', ?, 1, ?, ?, 13, 6)`,
        [`0x${"ab".repeat(32)}`, hold.amount, hold.fee_amount],
      );
      const id = await tx.value<string>("SELECT id FROM holds WHERE status = 'captured' AND batch_number IS NULL");
      await ledger.assignHoldToBatch(id!, 1, tx);
      return hold;
    });
    const pairs = [{ account_id: buyer, seller_account_id: seller }];
    // Pending: its calls are not in the settled totals yet, and count as the seller's pending share.
    expect(await store.settledTotals()).to.deep.equal([]);
    expect(await store.sellerShares(seller)).to.deep.equal({ settled: 0n, pending: settledHold.seller_amount });
    expect(await new BatchesStore(db).markSettled(1, null, 7)).to.equal(true);
    // Marked once: a second mark adds nothing.
    expect(await new BatchesStore(db).markSettled(1, null, 8)).to.equal(false);
    const unsettledHold = await pay(2n * USDC);

    // A voucher of 1 USDC, issued with a deadline at 1,000 s (as server/settlement/vouchers.ts records one).
    await db.transaction(async (tx) => {
      const entryId = await ledger.withdrawByVoucher(buyer, USDC, { address: BUYER, nonce: 9n }, "", tx);
      await tx.run(
        `INSERT INTO vouchers (address, nonce, account_id, amount, deadline, status, entry_id, created_at)
         VALUES (?, 9, ?, ?, 1000, 'issued', ?, 0)`,
        [BUYER, buyer, USDC, entryId],
      );
    });

    // An exit of 3 USDC, frozen in full, completed at block 30 and paid in full.
    const request = log(3, 20n);
    await db.transaction(async (tx) => {
      await exits.insertPending(
        { ...request, address: BUYER, accountId: buyer, requestedMicros: 3n * USDC, readyAtSec: 50n },
        3n * USDC,
        8,
        tx,
      );
      ledger.noteExitShortfall();
      await ledger.topUpExitFreezes(buyer, tx);
    });
    expect(await exits.frozen(request.txHash, request.logIndex)).to.equal(3n * USDC);
    await exits.close(
      (await exits.pendingAt(BUYER))!,
      { status: "completed", keptMicros: 3n * USDC, paidMicros: 3n * USDC, uncoveredMicros: 0n },
      log(4, 30n),
      9,
    );

    expect(await store.batches()).to.deep.equal([
      {
        number: 1n,
        status: "settled",
        receipts_root: `0x${"ab".repeat(32)}`,
        call_count: 1n,
        total_debits: settledHold.amount,
        platform_fee: settledHold.fee_amount,
      },
    ]);
    expect(await store.batchSums(1n)).to.deep.equal({ calls: 1n, debits: settledHold.amount, fees: settledHold.fee_amount });
    expect(await store.batchSums(2n)).to.deep.equal({ calls: 0n, debits: 0n, fees: 0n });
    expect(await store.settledPerAccount(1)).to.deep.equal([
      { account_id: buyer, seller_account_id: seller, debits: settledHold.amount, credits: settledHold.seller_amount },
    ]);
    expect(await store.settledPerAccount(0)).to.deep.equal([]);
    const batch1 = [{ ...pairs[0], calls: 1n, debits: settledHold.amount, credits: settledHold.seller_amount }];
    expect(await store.settledTotals()).to.deep.equal(batch1);
    expect(await store.settledPairSums()).to.deep.equal(batch1);
    expect(await store.batchPairSums(1)).to.deep.equal(batch1);
    expect(await store.batchPairSums(2)).to.deep.equal([]);
    expect(await store.deposits(11n)).to.deep.equal([{ account_id: buyer, address: BUYER, amount: 10n * USDC }]);
    expect(await store.deposits(10n)).to.deep.equal([]);
    expect(await store.waitingDeposits(12n)).to.deep.equal([{ address: NOBODY, amount: 2n * USDC }]);
    expect(await store.waitingDeposits(11n)).to.deep.equal([]);
    expect(await store.indexedThrough(`deposits:${"ee".repeat(20)}`)).to.equal(12n);
    expect(await store.indexedThrough("deposits:0xother")).to.equal(undefined);
    expect(await store.outstandingVouchers(500n)).to.deep.equal([{ address: BUYER, nonce: 9n, amount: USDC }]);
    expect(await store.voucherWithdrawals()).to.deep.equal([{ account_id: buyer, amount: USDC }]);
    expect(await store.completedExits(30n)).to.deep.equal([{ address: BUYER, account_id: buyer, paid: 3n * USDC, taken: 3n * USDC }]);
    expect(await store.completedExits(29n)).to.deep.equal([]);
    expect(await store.linkedAddresses()).to.deep.equal([
      // By address: 0x5e… before 0xb1….
      { address: SELLER, account_id: seller },
      { address: BUYER, account_id: buyer },
    ]);

    expect(await store.sellerShares(seller)).to.deep.equal({ settled: settledHold.seller_amount, pending: unsettledHold.seller_amount });
    expect(await store.sellerShares(buyer)).to.deep.equal({ settled: 0n, pending: 0n });

    // Redeemed before its deadline: still owed by the escrow at a block before that deadline, not after.
    await db.run("UPDATE vouchers SET status = 'redeemed' WHERE address = ? AND nonce = 9 AND status = 'issued'", [BUYER]);
    expect(await store.outstandingVouchers(1_000n)).to.have.length(1);
    expect(await store.outstandingVouchers(1_001n)).to.deep.equal([]);
  });

  it("reads in one snapshot: a write committed between two of its reads is not seen", async () => {
    const ledger = await Ledger.open(db);
    const store = new ReconcileStore(db);
    const addresses = new AddressesStore(db);
    const buyer = (await ledger.ensureAccount({ id: "user:buyer", kind: "user", name: "Buyer" })).id;
    const seller = (await ledger.ensureAccount({ id: "seller:acme", kind: "seller", name: "Acme" })).id;
    await addresses.link(BUYER, buyer, 1);
    // The snapshot reads once, waits while another writer writes, and reads again.
    let entered!: () => void;
    const inSnapshot = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const written = new Promise<void>((resolve) => (release = resolve));
    const snapshot = store.snapshot(async (sql) => {
      const before = await store.linkedAddresses(sql);
      entered();
      await written;
      const after = await store.linkedAddresses(sql);
      return { before, after };
    });
    await inSnapshot;
    // Another writer, outside the snapshot (one asked from inside it would be refused on SQLite, where it would
    // wait for the snapshot for ever): on SQLite it waits for the snapshot's turn; on PostgreSQL it commits at once.
    const write = addresses.link(SELLER, seller, 2);
    if (engine.name === "postgres") await write;
    release();
    const seen = await snapshot;
    await write;
    expect(seen.before).to.have.length(1);
    expect(seen.after).to.deep.equal(seen.before);
    expect(await store.linkedAddresses()).to.have.length(2);
  });
});
