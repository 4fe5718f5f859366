import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import { zeroAddress } from "viem";
import { expectRevert } from "./helpers/errors";
import { expectEvents } from "./helpers/events";
import { USDC, deployEscrowFixture, escrowBalance, tokenBalance, STARTING_WALLET_USDC } from "./helpers/fixtures";
import { signPermit } from "./helpers/signatures";

describe("SkillEscrow deposits", () => {
  describe("deposit(amount)", () => {
    it("moves the amount from the caller into the caller's escrowed balance and emits Deposited", async () => {
      const { escrow, usdc, alice, escrowAs } = await loadFixture(deployEscrowFixture);
      const hash = await (await escrowAs(alice)).write.deposit([5n * USDC]);
      await expectEvents(hash, escrow, "Deposited", [
        { account: alice.account.address, from: alice.account.address, amount: 5n * USDC, balance: 5n * USDC },
      ]);
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(5n * USDC);
      expect(await tokenBalance(usdc, escrow.address)).to.equal(5n * USDC);
      expect(await tokenBalance(usdc, alice.account.address)).to.equal(STARTING_WALLET_USDC - 5n * USDC);
    });

    it("adds to an existing balance", async () => {
      const { escrow, alice, escrowAs } = await loadFixture(deployEscrowFixture);
      const asAlice = await escrowAs(alice);
      await asAlice.write.deposit([2n * USDC]);
      const hash = await asAlice.write.deposit([3n * USDC]);
      await expectEvents(hash, escrow, "Deposited", [
        { account: alice.account.address, from: alice.account.address, amount: 3n * USDC, balance: 5n * USDC },
      ]);
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(5n * USDC);
    });

    it("accepts exactly the minimum deposit of 1 USDC", async () => {
      const { escrow, alice, escrowAs } = await loadFixture(deployEscrowFixture);
      expect(await escrow.read.minDeposit()).to.equal(USDC);
      await (await escrowAs(alice)).write.deposit([USDC]);
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(USDC);
    });

    it("rejects one base unit below the minimum with EscrowDepositBelowMinimum(amount, minimum)", async () => {
      const { alice, escrowAs } = await loadFixture(deployEscrowFixture);
      await expectRevert((await escrowAs(alice)).write.deposit([USDC - 1n]), "EscrowDepositBelowMinimum", [USDC - 1n, USDC]);
    });

    it("rejects a deposit without allowance with the token's ERC20InsufficientAllowance", async () => {
      const { escrow, usdc, outsider, escrowAs } = await loadFixture(deployEscrowFixture);
      await expectRevert(
        (await escrowAs(outsider)).write.deposit([USDC]),
        "ERC20InsufficientAllowance",
        [escrow.address, 0n, USDC],
        [usdc.abi],
      );
    });

    it("rejects deposits while paused with EscrowDepositsPaused, and accepts them again after unpausing", async () => {
      const { escrow, alice, escrowAs } = await loadFixture(deployEscrowFixture);
      await escrow.write.pauseDeposits();
      await expectRevert((await escrowAs(alice)).write.deposit([USDC]), "EscrowDepositsPaused");
      await escrow.write.unpauseDeposits();
      await (await escrowAs(alice)).write.deposit([USDC]);
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(USDC);
    });
  });

  describe("depositFor(account, amount)", () => {
    it("credits the named account and pulls the tokens from the caller", async () => {
      const { escrow, usdc, alice, bob, escrowAs } = await loadFixture(deployEscrowFixture);
      const hash = await (await escrowAs(alice)).write.depositFor([bob.account.address, 7n * USDC]);
      await expectEvents(hash, escrow, "Deposited", [
        { account: bob.account.address, from: alice.account.address, amount: 7n * USDC, balance: 7n * USDC },
      ]);
      expect(await escrowBalance(escrow, bob.account.address)).to.equal(7n * USDC);
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(0n);
      expect(await tokenBalance(usdc, alice.account.address)).to.equal(STARTING_WALLET_USDC - 7n * USDC);
      expect(await tokenBalance(usdc, bob.account.address)).to.equal(STARTING_WALLET_USDC);
    });

    it("rejects the zero address with EscrowInvalidAccount(0)", async () => {
      const { alice, escrowAs } = await loadFixture(deployEscrowFixture);
      await expectRevert((await escrowAs(alice)).write.depositFor([zeroAddress, USDC]), "EscrowInvalidAccount", [zeroAddress]);
    });

    it("rejects amounts below the minimum with EscrowDepositBelowMinimum", async () => {
      const { alice, bob, escrowAs } = await loadFixture(deployEscrowFixture);
      await expectRevert((await escrowAs(alice)).write.depositFor([bob.account.address, 1n]), "EscrowDepositBelowMinimum", [1n, USDC]);
    });

    it("is paused together with deposit", async () => {
      const { escrow, alice, bob, escrowAs } = await loadFixture(deployEscrowFixture);
      await escrow.write.pauseDeposits();
      await expectRevert((await escrowAs(alice)).write.depositFor([bob.account.address, USDC]), "EscrowDepositsPaused");
    });
  });

  describe("depositWithPermit(owner, amount, deadline, v, r, s)", () => {
    async function permitFixture() {
      const fixture = await deployEscrowFixture();
      // The outsider holds tokens but never approved the escrow: only a permit can move them.
      await fixture.usdc.write.mint([fixture.outsider.account.address, 50n * USDC]);
      const deadline = (await fixture.publicClient.getBlock()).timestamp + 3600n;
      return { ...fixture, deadline };
    }

    it("deposits with a permit submitted by a relayer and credits the permit's owner", async () => {
      const { escrow, usdc, chainId, outsider, settler, deadline, escrowAs } = await loadFixture(permitFixture);
      const { v, r, s } = await signPermit(outsider, usdc.address, chainId, {
        spender: escrow.address,
        value: 20n * USDC,
        nonce: 0n,
        deadline,
      });
      const hash = await (await escrowAs(settler)).write.depositWithPermit([outsider.account.address, 20n * USDC, deadline, v, r, s]);
      await expectEvents(hash, escrow, "Deposited", [
        { account: outsider.account.address, from: outsider.account.address, amount: 20n * USDC, balance: 20n * USDC },
      ]);
      expect(await escrowBalance(escrow, outsider.account.address)).to.equal(20n * USDC);
      expect(await escrowBalance(escrow, settler.account.address)).to.equal(0n);
      expect(await tokenBalance(usdc, outsider.account.address)).to.equal(30n * USDC);
    });

    it("lets the owner finish the deposit when a front-runner already used the permit", async () => {
      const { escrow, usdc, chainId, outsider, bob, deadline, escrowAs, usdcAs } = await loadFixture(permitFixture);
      const { v, r, s } = await signPermit(outsider, usdc.address, chainId, {
        spender: escrow.address,
        value: 20n * USDC,
        nonce: 0n,
        deadline,
      });
      await (await usdcAs(bob)).write.permit([outsider.account.address, escrow.address, 20n * USDC, deadline, v, r, s]);
      await (await escrowAs(outsider)).write.depositWithPermit([outsider.account.address, 20n * USDC, deadline, v, r, s]);
      expect(await escrowBalance(escrow, outsider.account.address)).to.equal(20n * USDC);
    });

    it("does not let a third party push approved tokens in without a valid permit: EscrowPermitFailed(owner, amount)", async () => {
      const { alice, bob, deadline, escrowAs } = await loadFixture(permitFixture);
      // Alice approved the escrow in the fixture; Bob replays garbage instead of her signature.
      const garbage = `0x${"11".repeat(32)}` as const;
      await expectRevert(
        (await escrowAs(bob)).write.depositWithPermit([alice.account.address, 5n * USDC, deadline, 27, garbage, garbage]),
        "EscrowPermitFailed",
        [alice.account.address, 5n * USDC],
      );
    });

    it("rejects an expired permit with EscrowPermitFailed when no allowance exists", async () => {
      const { escrow, usdc, chainId, outsider, publicClient, escrowAs } = await loadFixture(permitFixture);
      const past = (await publicClient.getBlock()).timestamp - 1n;
      const { v, r, s } = await signPermit(outsider, usdc.address, chainId, {
        spender: escrow.address,
        value: 20n * USDC,
        nonce: 0n,
        deadline: past,
      });
      await expectRevert(
        (await escrowAs(outsider)).write.depositWithPermit([outsider.account.address, 20n * USDC, past, v, r, s]),
        "EscrowPermitFailed",
        [outsider.account.address, 20n * USDC],
      );
    });

    it("checks the minimum, the account and the pause before touching the permit", async () => {
      const { escrow, usdc, chainId, outsider, deadline, escrowAs } = await loadFixture(permitFixture);
      const permit = await signPermit(outsider, usdc.address, chainId, {
        spender: escrow.address,
        value: USDC - 1n,
        nonce: 0n,
        deadline,
      });
      const asOutsider = await escrowAs(outsider);
      await expectRevert(
        asOutsider.write.depositWithPermit([outsider.account.address, USDC - 1n, deadline, permit.v, permit.r, permit.s]),
        "EscrowDepositBelowMinimum",
        [USDC - 1n, USDC],
      );
      await expectRevert(
        asOutsider.write.depositWithPermit([zeroAddress, USDC, deadline, permit.v, permit.r, permit.s]),
        "EscrowInvalidAccount",
        [zeroAddress],
      );
      await escrow.write.pauseDeposits();
      await expectRevert(
        asOutsider.write.depositWithPermit([outsider.account.address, USDC, deadline, permit.v, permit.r, permit.s]),
        "EscrowDepositsPaused",
      );
      // None of the failures consumed the permit nonce.
      expect(await usdc.read.nonces([outsider.account.address])).to.equal(0n);
    });
  });
});
