import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { AssertionError, expect } from "chai";
import { decodeRevert, expectRevert } from "./helpers/errors";
import { USDC, deployEscrowFixture } from "./helpers/fixtures";

/** The helpers decide whether other tests pass, so they get tests of their own: each must be able to fail. */
describe("test helpers", () => {
  describe("expectRevert", () => {
    it("passes on the right error name and arguments", async () => {
      const { alice, escrowAs } = await loadFixture(deployEscrowFixture);
      await expectRevert((await escrowAs(alice)).write.deposit([1n]), "EscrowDepositBelowMinimum", [1n, USDC]);
    });

    it("fails on a wrong error name", async () => {
      const { alice, escrowAs } = await loadFixture(deployEscrowFixture);
      const check = expectRevert((await escrowAs(alice)).write.deposit([1n]), "EscrowZeroAmount", [1n, USDC]);
      await expectFailure(check, /error name/);
    });

    it("fails on wrong arguments", async () => {
      const { alice, escrowAs } = await loadFixture(deployEscrowFixture);
      const check = expectRevert((await escrowAs(alice)).write.deposit([1n]), "EscrowDepositBelowMinimum", [2n, USDC]);
      await expectFailure(check, /arguments of EscrowDepositBelowMinimum/);
    });

    it("fails when the call succeeds", async () => {
      const { alice, escrowAs } = await loadFixture(deployEscrowFixture);
      const check = expectRevert((await escrowAs(alice)).write.deposit([USDC]), "EscrowDepositBelowMinimum");
      await expectFailure(check, /call succeeded/);
    });

    it("fails when the error comes from another contract whose ABI was not given", async () => {
      const { outsider, escrowAs } = await loadFixture(deployEscrowFixture);
      const check = expectRevert((await escrowAs(outsider)).write.deposit([USDC]), "ERC20InsufficientAllowance");
      await expectFailure(check, /matches no error/);
    });

    it("refuses to decode an error that is not a contract revert", () => {
      expect(() => decodeRevert(new Error("socket hang up"))).to.throw(AssertionError, /viem contract error/);
    });
  });
});

async function expectFailure(check: Promise<void>, message: RegExp): Promise<void> {
  try {
    await check;
  } catch (error) {
    expect(error).to.be.instanceOf(AssertionError);
    expect((error as Error).message).to.match(message);
    return;
  }
  throw new AssertionError("expected the helper to fail");
}
