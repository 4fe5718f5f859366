import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import { zeroAddress } from "viem";
import { buildBatch } from "./helpers/batch";
import { expectRevert } from "./helpers/errors";
import { expectEvents } from "./helpers/events";
import { USDC, deployEscrowFixture, earningsOf, tokenBalance } from "./helpers/fixtures";

/** One settled batch: Alice paid 10 USDC, seller A earned 9, the treasury 1. */
async function settledFixture() {
  const fixture = await deployEscrowFixture();
  const { alice, sellerA, settler, escrowAs } = fixture;
  await (await escrowAs(alice)).write.deposit([50n * USDC]);
  await (
    await escrowAs(settler)
  ).write.settle([
    buildBatch({
      number: 1n,
      debits: [{ account: alice.account.address, amount: 10n * USDC }],
      credits: [{ seller: sellerA.account.address, amount: 9n * USDC }],
      platformFee: USDC,
    }),
  ]);
  return fixture;
}

describe("SkillEscrow claims", () => {
  describe("claim()", () => {
    it("pays the seller all settled earnings, zeroes them and emits Claimed", async () => {
      const { escrow, usdc, sellerA, escrowAs, publicClient } = await loadFixture(settledFixture);
      const asSeller = await escrowAs(sellerA);
      const { result } = await publicClient.simulateContract({
        account: sellerA.account,
        address: escrow.address,
        abi: escrow.abi,
        functionName: "claim",
      });
      expect(result).to.equal(9n * USDC);
      const hash = await asSeller.write.claim();
      await expectEvents(hash, escrow, "Claimed", [
        { seller: sellerA.account.address, recipient: sellerA.account.address, amount: 9n * USDC },
      ]);
      expect(await tokenBalance(usdc, sellerA.account.address)).to.equal(9n * USDC);
      expect(await earningsOf(escrow, sellerA.account.address)).to.equal(0n);
    });

    it("lets the treasury claim the platform fee", async () => {
      const { usdc, treasury, escrowAs } = await loadFixture(settledFixture);
      await (await escrowAs(treasury)).write.claim();
      expect(await tokenBalance(usdc, treasury.account.address)).to.equal(USDC);
    });

    it("cannot pay the same earnings twice: the second claim fails with EscrowNothingToClaim(seller)", async () => {
      const { sellerA, escrowAs } = await loadFixture(settledFixture);
      const asSeller = await escrowAs(sellerA);
      await asSeller.write.claim();
      await expectRevert(asSeller.write.claim(), "EscrowNothingToClaim", [sellerA.account.address]);
    });

    it("rejects an account that never earned with EscrowNothingToClaim(account)", async () => {
      const { alice, escrowAs } = await loadFixture(settledFixture);
      await expectRevert((await escrowAs(alice)).write.claim(), "EscrowNothingToClaim", [alice.account.address]);
    });

    it("works while deposits are paused", async () => {
      const { escrow, usdc, sellerA, escrowAs } = await loadFixture(settledFixture);
      await escrow.write.pauseDeposits();
      await (await escrowAs(sellerA)).write.claim();
      expect(await tokenBalance(usdc, sellerA.account.address)).to.equal(9n * USDC);
    });
  });

  describe("claimTo(recipient)", () => {
    it("pays the caller's earnings to the recipient", async () => {
      const { escrow, usdc, sellerA, outsider, escrowAs } = await loadFixture(settledFixture);
      const hash = await (await escrowAs(sellerA)).write.claimTo([outsider.account.address]);
      await expectEvents(hash, escrow, "Claimed", [
        { seller: sellerA.account.address, recipient: outsider.account.address, amount: 9n * USDC },
      ]);
      expect(await tokenBalance(usdc, outsider.account.address)).to.equal(9n * USDC);
      expect(await tokenBalance(usdc, sellerA.account.address)).to.equal(0n);
      expect(await earningsOf(escrow, sellerA.account.address)).to.equal(0n);
    });

    it("rejects the zero address with EscrowInvalidAccount(0)", async () => {
      const { sellerA, escrowAs } = await loadFixture(settledFixture);
      await expectRevert((await escrowAs(sellerA)).write.claimTo([zeroAddress]), "EscrowInvalidAccount", [zeroAddress]);
    });

    it("rejects a caller without earnings with EscrowNothingToClaim(caller)", async () => {
      const { sellerB, outsider, escrowAs } = await loadFixture(settledFixture);
      await expectRevert((await escrowAs(sellerB)).write.claimTo([outsider.account.address]), "EscrowNothingToClaim", [
        sellerB.account.address,
      ]);
    });
  });
});
