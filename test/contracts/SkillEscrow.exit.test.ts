import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import { buildBatch } from "./helpers/batch";
import { expectRevert } from "./helpers/errors";
import { expectEvents } from "./helpers/events";
import { DAY_SEC, STARTING_WALLET_USDC, USDC, deployEscrowFixture, escrowBalance, pendingExit, tokenBalance } from "./helpers/fixtures";

/** Alice holds 100 USDC in the escrow. */
async function exitFixture() {
  const fixture = await deployEscrowFixture();
  const asAlice = await fixture.escrowAs(fixture.alice);
  await asAlice.write.deposit([100n * USDC]);
  const asSettler = await fixture.escrowAs(fixture.settler);
  const debitAlice = (number: bigint, amount: bigint) =>
    asSettler.write.settle([
      buildBatch({
        number,
        debits: [{ account: fixture.alice.account.address, amount }],
        credits: [{ seller: fixture.sellerA.account.address, amount }],
      }),
    ]);
  return { ...fixture, asAlice, debitAlice };
}

describe("SkillEscrow timed exit", () => {
  describe("requestExit(amount)", () => {
    it("records the request, payable after the 24 h delay, and emits ExitRequested", async () => {
      const { escrow, alice, asAlice } = await loadFixture(exitFixture);
      expect(await escrow.read.exitDelay()).to.equal(DAY_SEC);
      const at = (await time.latest()) + 10;
      await time.setNextBlockTimestamp(at);
      const hash = await asAlice.write.requestExit([40n * USDC]);
      const readyAtSec = BigInt(at) + DAY_SEC;
      await expectEvents(hash, escrow, "ExitRequested", [{ account: alice.account.address, amount: 40n * USDC, readyAt: readyAtSec }]);
      expect(await pendingExit(escrow, alice.account.address)).to.deep.equal({ amount: 40n * USDC, readyAtSec });
      // Requesting does not move money: the amount stays settleable until completeExit.
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(100n * USDC);
    });

    it("replaces a pending request and restarts the delay", async () => {
      const { escrow, alice, asAlice } = await loadFixture(exitFixture);
      await asAlice.write.requestExit([40n * USDC]);
      await time.increase(DAY_SEC / 2n);
      await asAlice.write.requestExit([60n * USDC]);
      const exit = await pendingExit(escrow, alice.account.address);
      expect(exit).to.deep.equal({ amount: 60n * USDC, readyAtSec: BigInt(await time.latest()) + DAY_SEC });
    });

    it("rejects zero with EscrowZeroAmount and more than the balance with EscrowInsufficientBalance", async () => {
      const { alice, asAlice } = await loadFixture(exitFixture);
      await expectRevert(asAlice.write.requestExit([0n]), "EscrowZeroAmount");
      await expectRevert(asAlice.write.requestExit([100n * USDC + 1n]), "EscrowInsufficientBalance", [
        alice.account.address,
        100n * USDC,
        100n * USDC + 1n,
      ]);
    });
  });

  describe("completeExit()", () => {
    it("pays the requested amount once the delay has passed and emits ExitCompleted", async () => {
      const { escrow, usdc, alice, asAlice } = await loadFixture(exitFixture);
      await asAlice.write.requestExit([40n * USDC]);
      const { readyAtSec } = await pendingExit(escrow, alice.account.address);
      await time.setNextBlockTimestamp(readyAtSec);
      const hash = await asAlice.write.completeExit();
      await expectEvents(hash, escrow, "ExitCompleted", [
        { account: alice.account.address, requested: 40n * USDC, paid: 40n * USDC, balance: 60n * USDC },
      ]);
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(60n * USDC);
      expect(await tokenBalance(usdc, alice.account.address)).to.equal(STARTING_WALLET_USDC - 60n * USDC);
      expect(await pendingExit(escrow, alice.account.address)).to.deep.equal({ amount: 0n, readyAtSec: 0n });
    });

    it("rejects an early completion with EscrowExitNotReady(account, readyAt, timestamp)", async () => {
      const { escrow, alice, asAlice } = await loadFixture(exitFixture);
      await asAlice.write.requestExit([40n * USDC]);
      const { readyAtSec } = await pendingExit(escrow, alice.account.address);
      await time.setNextBlockTimestamp(readyAtSec - 1n);
      await expectRevert(asAlice.write.completeExit(), "EscrowExitNotReady", [alice.account.address, readyAtSec, readyAtSec - 1n]);
    });

    it("rejects a completion without request, and a second completion, with EscrowNoPendingExit(account)", async () => {
      const { alice, asAlice } = await loadFixture(exitFixture);
      await expectRevert(asAlice.write.completeExit(), "EscrowNoPendingExit", [alice.account.address]);
      await asAlice.write.requestExit([40n * USDC]);
      await time.increase(DAY_SEC);
      await asAlice.write.completeExit();
      await expectRevert(asAlice.write.completeExit(), "EscrowNoPendingExit", [alice.account.address]);
    });

    it("pays only what remains when the settler debits the account during the delay", async () => {
      const { escrow, usdc, alice, asAlice, debitAlice } = await loadFixture(exitFixture);
      await asAlice.write.requestExit([100n * USDC]);
      await time.increase(DAY_SEC / 2n);
      await debitAlice(1n, 30n * USDC);
      await time.increase(DAY_SEC / 2n);
      const hash = await asAlice.write.completeExit();
      await expectEvents(hash, escrow, "ExitCompleted", [
        { account: alice.account.address, requested: 100n * USDC, paid: 70n * USDC, balance: 0n },
      ]);
      expect(await tokenBalance(usdc, alice.account.address)).to.equal(STARTING_WALLET_USDC - 30n * USDC);
    });

    it("pays the full request of a partial exit when enough is left after the debits", async () => {
      const { escrow, alice, asAlice, debitAlice } = await loadFixture(exitFixture);
      await asAlice.write.requestExit([40n * USDC]);
      await debitAlice(1n, 30n * USDC);
      await time.increase(DAY_SEC);
      await asAlice.write.completeExit();
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(30n * USDC);
    });

    it("clears the request and pays nothing when the debits took everything", async () => {
      const { escrow, usdc, alice, asAlice, debitAlice } = await loadFixture(exitFixture);
      await asAlice.write.requestExit([100n * USDC]);
      await debitAlice(1n, 100n * USDC);
      await time.increase(DAY_SEC);
      const hash = await asAlice.write.completeExit();
      await expectEvents(hash, escrow, "ExitCompleted", [
        { account: alice.account.address, requested: 100n * USDC, paid: 0n, balance: 0n },
      ]);
      expect(await tokenBalance(usdc, alice.account.address)).to.equal(STARTING_WALLET_USDC - 100n * USDC);
      expect(await pendingExit(escrow, alice.account.address)).to.deep.equal({ amount: 0n, readyAtSec: 0n });
    });

    it("keeps a pending request's time when the admin lengthens the delay", async () => {
      const { escrow, alice, asAlice } = await loadFixture(exitFixture);
      await asAlice.write.requestExit([10n * USDC]);
      await escrow.write.setExitDelay([7n * DAY_SEC]);
      await time.increase(DAY_SEC);
      await asAlice.write.completeExit();
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(90n * USDC);
    });

    it("works while deposits are paused", async () => {
      const { escrow, alice, asAlice } = await loadFixture(exitFixture);
      await asAlice.write.requestExit([10n * USDC]);
      await escrow.write.pauseDeposits();
      await time.increase(DAY_SEC);
      await asAlice.write.completeExit();
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(90n * USDC);
    });
  });

  describe("cancelExit()", () => {
    it("drops the pending request and emits ExitCancelled", async () => {
      const { escrow, alice, asAlice } = await loadFixture(exitFixture);
      await asAlice.write.requestExit([40n * USDC]);
      const hash = await asAlice.write.cancelExit();
      await expectEvents(hash, escrow, "ExitCancelled", [{ account: alice.account.address, amount: 40n * USDC }]);
      await time.increase(DAY_SEC);
      await expectRevert(asAlice.write.completeExit(), "EscrowNoPendingExit", [alice.account.address]);
    });

    it("rejects a cancellation without request with EscrowNoPendingExit(account)", async () => {
      const { alice, asAlice } = await loadFixture(exitFixture);
      await expectRevert(asAlice.write.cancelExit(), "EscrowNoPendingExit", [alice.account.address]);
    });
  });

  describe("when the gateway disappears", () => {
    it("returns every unspent unit to each user and every earned unit to each seller without the gateway", async () => {
      const { escrow, usdc, admin, settler, voucherSigner, alice, bob, sellerA, sellerB, treasury, escrowAs } =
        await loadFixture(exitFixture);
      const asBob = await escrowAs(bob);
      await asBob.write.deposit([37_123_457n]);
      // The gateway's last act: settle some spending.
      await (
        await escrowAs(settler)
      ).write.settle([
        buildBatch({
          number: 1n,
          debits: [
            { account: alice.account.address, amount: 1_234_567n },
            { account: bob.account.address, amount: 3n },
          ],
          credits: [
            { seller: sellerA.account.address, amount: 1_111_111n },
            { seller: sellerB.account.address, amount: 2n },
          ],
          platformFee: 123_457n,
        }),
      ]);
      // Then it is gone: its roles are revoked and nothing it could sign is accepted any more.
      await escrow.write.revokeRole([await escrow.read.SETTLER_ROLE(), settler.account.address]);
      await escrow.write.revokeRole([await escrow.read.VOUCHER_SIGNER_ROLE(), voucherSigner.account.address]);
      await escrow.write.renounceRole([await escrow.read.DEFAULT_ADMIN_ROLE(), admin.account.address]);

      const users = [
        { wallet: alice, depositedMicros: 100n * USDC, spentMicros: 1_234_567n },
        { wallet: bob, depositedMicros: 37_123_457n, spentMicros: 3n },
      ];
      for (const { wallet, depositedMicros, spentMicros } of users) {
        const balance = await escrowBalance(escrow, wallet.account.address);
        expect(balance).to.equal(depositedMicros - spentMicros);
        await (await escrowAs(wallet)).write.requestExit([balance]);
      }
      await time.increase(DAY_SEC);
      for (const { wallet, spentMicros } of users) {
        await (await escrowAs(wallet)).write.completeExit();
        // Back to the starting wallet minus exactly what was spent: every unspent unit came back.
        expect(await tokenBalance(usdc, wallet.account.address)).to.equal(STARTING_WALLET_USDC - spentMicros);
        expect(await escrowBalance(escrow, wallet.account.address)).to.equal(0n);
      }
      for (const seller of [sellerA, sellerB, treasury]) await (await escrowAs(seller)).write.claim();
      expect(await tokenBalance(usdc, sellerA.account.address)).to.equal(1_111_111n);
      expect(await tokenBalance(usdc, sellerB.account.address)).to.equal(2n);
      expect(await tokenBalance(usdc, treasury.account.address)).to.equal(123_457n);
      // Nothing is stranded: the escrow is empty.
      expect(await tokenBalance(usdc, escrow.address)).to.equal(0n);
    });
  });
});
