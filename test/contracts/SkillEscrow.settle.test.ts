import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import { getAddress, keccak256, toHex, zeroAddress, zeroHash } from "viem";
import { batchFromReceipts, buildBatch, buildReceipt } from "./helpers/batch";
import { expectRevert } from "./helpers/errors";
import { expectEvents } from "./helpers/events";
import { SETTLER_ROLE, USDC, deployEscrowFixture, earningsOf, escrowBalance } from "./helpers/fixtures";
import { receiptLeaf } from "../../server/chain/receipts";

/** Alice, Bob and Carol each hold 100 USDC in the escrow. */
async function fundedFixture() {
  const fixture = await deployEscrowFixture();
  for (const user of [fixture.alice, fixture.bob, fixture.carol]) {
    await (await fixture.escrowAs(user)).write.deposit([100n * USDC]);
  }
  return { ...fixture, asSettler: await fixture.escrowAs(fixture.settler) };
}

describe("SkillEscrow settle(batch)", () => {
  it("debits accounts, credits sellers and the treasury, records the root and emits one event per entry", async () => {
    const { escrow, asSettler, alice, bob, sellerA, sellerB, treasury } = await loadFixture(fundedFixture);
    const receipts = [
      buildReceipt(1, alice.account.address, sellerA.account.address, 500_000n),
      buildReceipt(2, alice.account.address, sellerB.account.address, 10_000n),
      buildReceipt(3, bob.account.address, sellerA.account.address, 1_000n),
    ];
    const { batch } = batchFromReceipts(1n, receipts);
    const hash = await asSettler.write.settle([batch]);

    expect(await escrowBalance(escrow, alice.account.address)).to.equal(100n * USDC - 510_000n);
    expect(await escrowBalance(escrow, bob.account.address)).to.equal(100n * USDC - 1_000n);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(450_000n + 900n);
    expect(await earningsOf(escrow, sellerB.account.address)).to.equal(9_000n);
    expect(await earningsOf(escrow, treasury.account.address)).to.equal(50_000n + 1_000n + 100n);
    expect(await escrow.read.lastBatchNumber()).to.equal(1n);
    expect(await escrow.read.receiptsRoots([1n])).to.equal(batch.receiptsRoot);

    await expectEvents(hash, escrow, "AccountDebited", [
      { account: alice.account.address, amount: 510_000n, balance: 100n * USDC - 510_000n },
      { account: bob.account.address, amount: 1_000n, balance: 100n * USDC - 1_000n },
    ]);
    await expectEvents(hash, escrow, "SellerCredited", [
      { seller: sellerA.account.address, amount: 450_900n },
      { seller: sellerB.account.address, amount: 9_000n },
    ]);
    await expectEvents(hash, escrow, "BatchSettled", [
      {
        batchNumber: 1n,
        receiptsRoot: batch.receiptsRoot,
        callCount: 3n,
        totalDebits: 511_000n,
        platformFee: 51_100n,
        treasury: treasury.account.address,
      },
    ]);
  });

  it("accepts the next batches in order and lets a debit take the whole balance", async () => {
    const { escrow, asSettler, alice, sellerA } = await loadFixture(fundedFixture);
    const first = buildBatch({
      number: 1n,
      debits: [{ account: alice.account.address, amount: 40n * USDC }],
      credits: [{ seller: sellerA.account.address, amount: 36n * USDC }],
      platformFee: 4n * USDC,
    });
    const second = buildBatch({
      number: 2n,
      debits: [{ account: alice.account.address, amount: 60n * USDC }],
      credits: [{ seller: sellerA.account.address, amount: 60n * USDC }],
      platformFee: 0n,
    });
    await asSettler.write.settle([first]);
    await asSettler.write.settle([second]);
    expect(await escrowBalance(escrow, alice.account.address)).to.equal(0n);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(96n * USDC);
    expect(await escrow.read.lastBatchNumber()).to.equal(2n);
    expect(await escrow.read.receiptsRoots([2n])).to.equal(second.receiptsRoot);
  });

  it("keeps settling while deposits are paused", async () => {
    const { escrow, asSettler, alice, sellerA } = await loadFixture(fundedFixture);
    await escrow.write.pauseDeposits();
    const batch = buildBatch({
      number: 1n,
      debits: [{ account: alice.account.address, amount: USDC }],
      credits: [{ seller: sellerA.account.address, amount: USDC }],
    });
    await asSettler.write.settle([batch]);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(USDC);
  });

  it("credits fees to the treasury current at settlement; the previous one keeps what it earned", async () => {
    const { escrow, asSettler, alice, sellerA, treasury, outsider } = await loadFixture(fundedFixture);
    const batch = (number: bigint) =>
      buildBatch({
        number,
        debits: [{ account: alice.account.address, amount: 10n * USDC }],
        credits: [{ seller: sellerA.account.address, amount: 9n * USDC }],
        platformFee: USDC,
      });
    await asSettler.write.settle([batch(1n)]);
    await escrow.write.setTreasury([outsider.account.address]);
    await asSettler.write.settle([batch(2n)]);
    expect(await earningsOf(escrow, treasury.account.address)).to.equal(USDC);
    expect(await earningsOf(escrow, outsider.account.address)).to.equal(USDC);
  });

  describe("receipts root", () => {
    it("proves every settled call with verifyReceipt and rejects a receipt that was not settled", async () => {
      const { escrow, asSettler, alice, bob, carol, sellerA, sellerB } = await loadFixture(fundedFixture);
      const receipts = Array.from({ length: 11 }, (_, i) =>
        buildReceipt(i, [alice, bob, carol][i % 3].account.address, [sellerA, sellerB][i % 2].account.address, 1_000n * BigInt(i + 1)),
      );
      const { batch, tree } = batchFromReceipts(1n, receipts);
      await asSettler.write.settle([batch]);

      for (const [i, r] of receipts.entries()) {
        const args = [1n, r.callId, r.account, r.seller, r.amount, r.platformFee, tree.proof(i)] as const;
        expect(await escrow.read.verifyReceipt([...args]), `receipt ${i}`).to.equal(true);
      }
      const r = receipts[4];
      const inflated = [1n, r.callId, r.account, r.seller, r.amount + 1n, r.platformFee, tree.proof(4)];
      expect(await escrow.read.verifyReceipt(inflated)).to.equal(false);
      const wrongBatch = [2n, r.callId, r.account, r.seller, r.amount, r.platformFee, tree.proof(4)];
      expect(await escrow.read.verifyReceipt(wrongBatch)).to.equal(false);
    });

    it("computes the same leaf on-chain as the off-chain tree builder", async () => {
      const { escrow, alice, sellerA } = await loadFixture(fundedFixture);
      const r = buildReceipt(7, alice.account.address, sellerA.account.address, 123_456n);
      expect(await escrow.read.receiptLeaf([r.callId, r.account, r.seller, r.amount, r.platformFee])).to.equal(receiptLeaf(r));
    });
  });

  describe("rejections", () => {
    it("rejects callers without SETTLER_ROLE with AccessControlUnauthorizedAccount(caller, role)", async () => {
      const { alice, sellerA, outsider, escrowAs } = await loadFixture(fundedFixture);
      const batch = buildBatch({
        number: 1n,
        debits: [{ account: alice.account.address, amount: USDC }],
        credits: [{ seller: sellerA.account.address, amount: USDC }],
      });
      await expectRevert((await escrowAs(outsider)).write.settle([batch]), "AccessControlUnauthorizedAccount", [
        outsider.account.address,
        SETTLER_ROLE,
      ]);
    });

    it("rejects a skipped number, a replay and batch 0 with EscrowBatchOutOfOrder(expected, got)", async () => {
      const { asSettler, alice, sellerA } = await loadFixture(fundedFixture);
      const batch = (number: bigint) =>
        buildBatch({
          number,
          debits: [{ account: alice.account.address, amount: USDC }],
          credits: [{ seller: sellerA.account.address, amount: USDC }],
        });
      await expectRevert(asSettler.write.settle([batch(0n)]), "EscrowBatchOutOfOrder", [1n, 0n]);
      await expectRevert(asSettler.write.settle([batch(2n)]), "EscrowBatchOutOfOrder", [1n, 2n]);
      await asSettler.write.settle([batch(1n)]);
      await expectRevert(asSettler.write.settle([batch(1n)]), "EscrowBatchOutOfOrder", [2n, 1n]);
      await expectRevert(asSettler.write.settle([batch(3n)]), "EscrowBatchOutOfOrder", [2n, 3n]);
    });

    it("rejects a zero receipts root with EscrowMissingReceiptsRoot(number)", async () => {
      const { asSettler, alice, sellerA } = await loadFixture(fundedFixture);
      const batch = buildBatch({
        number: 1n,
        receiptsRoot: zeroHash,
        debits: [{ account: alice.account.address, amount: USDC }],
        credits: [{ seller: sellerA.account.address, amount: USDC }],
      });
      await expectRevert(asSettler.write.settle([batch]), "EscrowMissingReceiptsRoot", [1n]);
    });

    it("rejects a batch without debits with EscrowEmptyBatch(number)", async () => {
      const { asSettler } = await loadFixture(fundedFixture);
      await expectRevert(asSettler.write.settle([buildBatch({ number: 1n })]), "EscrowEmptyBatch", [1n]);
    });

    it("rejects zero debits and zero credits with EscrowZeroAmount", async () => {
      const { asSettler, alice, bob, sellerA, sellerB } = await loadFixture(fundedFixture);
      const zeroDebit = buildBatch({
        number: 1n,
        debits: [
          { account: alice.account.address, amount: USDC },
          { account: bob.account.address, amount: 0n },
        ],
        credits: [{ seller: sellerA.account.address, amount: USDC }],
      });
      await expectRevert(asSettler.write.settle([zeroDebit]), "EscrowZeroAmount");
      const zeroCredit = buildBatch({
        number: 1n,
        debits: [{ account: alice.account.address, amount: USDC }],
        credits: [
          { seller: sellerA.account.address, amount: USDC },
          { seller: sellerB.account.address, amount: 0n },
        ],
      });
      await expectRevert(asSettler.write.settle([zeroCredit]), "EscrowZeroAmount");
    });

    it("rejects a credit to the zero address with EscrowInvalidAccount(0)", async () => {
      const { asSettler, alice } = await loadFixture(fundedFixture);
      const batch = buildBatch({
        number: 1n,
        debits: [{ account: alice.account.address, amount: USDC }],
        credits: [{ seller: zeroAddress, amount: USDC }],
      });
      await expectRevert(asSettler.write.settle([batch]), "EscrowInvalidAccount", [zeroAddress]);
    });

    it("rejects a credit to the escrow itself, which could never be claimed, with EscrowInvalidAccount(escrow)", async () => {
      const { asSettler, alice, escrow } = await loadFixture(fundedFixture);
      const batch = buildBatch({
        number: 1n,
        debits: [{ account: alice.account.address, amount: USDC }],
        credits: [{ seller: escrow.address, amount: USDC }],
      });
      await expectRevert(asSettler.write.settle([batch]), "EscrowInvalidAccount", [getAddress(escrow.address)]);
    });

    it("rejects a debit above the balance with EscrowInsufficientBalance(account, balance, needed)", async () => {
      const { asSettler, alice, dave, sellerA } = await loadFixture(fundedFixture);
      const overdraw = buildBatch({
        number: 1n,
        debits: [{ account: alice.account.address, amount: 100n * USDC + 1n }],
        credits: [{ seller: sellerA.account.address, amount: 100n * USDC + 1n }],
      });
      await expectRevert(asSettler.write.settle([overdraw]), "EscrowInsufficientBalance", [
        alice.account.address,
        100n * USDC,
        100n * USDC + 1n,
      ]);
      // Dave holds tokens in his wallet but never deposited: his escrowed balance is zero.
      const neverDeposited = buildBatch({
        number: 1n,
        debits: [{ account: dave.account.address, amount: 1n }],
        credits: [{ seller: sellerA.account.address, amount: 1n }],
      });
      await expectRevert(asSettler.write.settle([neverDeposited]), "EscrowInsufficientBalance", [dave.account.address, 0n, 1n]);
    });

    it("checks a second debit of the same account against what the first one left", async () => {
      const { escrow, asSettler, alice, sellerA } = await loadFixture(fundedFixture);
      const batch = buildBatch({
        number: 1n,
        debits: [
          { account: alice.account.address, amount: 60n * USDC },
          { account: alice.account.address, amount: 41n * USDC },
        ],
        credits: [{ seller: sellerA.account.address, amount: 101n * USDC }],
      });
      await expectRevert(asSettler.write.settle([batch]), "EscrowInsufficientBalance", [alice.account.address, 40n * USDC, 41n * USDC]);
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(100n * USDC);
    });

    it("rejects debits that do not equal credits plus fee with EscrowBatchUnbalanced(debits, credits, fee)", async () => {
      const { escrow, asSettler, alice, sellerA } = await loadFixture(fundedFixture);
      const batch = (creditMicros: bigint, feeMicros: bigint) =>
        buildBatch({
          number: 1n,
          debits: [{ account: alice.account.address, amount: 10n * USDC }],
          credits: [{ seller: sellerA.account.address, amount: creditMicros }],
          platformFee: feeMicros,
        });
      await expectRevert(asSettler.write.settle([batch(9n * USDC, USDC + 1n)]), "EscrowBatchUnbalanced", [
        10n * USDC,
        9n * USDC,
        USDC + 1n,
      ]);
      await expectRevert(asSettler.write.settle([batch(9n * USDC, USDC - 1n)]), "EscrowBatchUnbalanced", [
        10n * USDC,
        9n * USDC,
        USDC - 1n,
      ]);
      // A failed batch changes nothing and does not consume its number.
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(100n * USDC);
      expect(await escrow.read.lastBatchNumber()).to.equal(0n);
      expect(await escrow.read.receiptsRoots([1n])).to.equal(zeroHash);
    });
  });

  it("uses a distinct placeholder root per batch number in the builder (guards the other tests)", () => {
    expect(buildBatch({ number: 1n }).receiptsRoot).to.equal(keccak256(toHex("receipts of batch 1")));
    expect(buildBatch({ number: 1n }).receiptsRoot).to.not.equal(buildBatch({ number: 2n }).receiptsRoot);
  });
});
