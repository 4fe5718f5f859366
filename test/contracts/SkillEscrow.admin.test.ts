import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import hre from "hardhat";
import { getAddress, zeroAddress, type Abi } from "viem";
import { expectRevert } from "./helpers/errors";
import { expectEvents } from "./helpers/events";
import { DAY_SEC, DEFAULT_ADMIN_ROLE, SETTLER_ROLE, USDC, VOUCHER_SIGNER_ROLE, deployEscrowFixture } from "./helpers/fixtures";

const HOUR_SEC = 3600n;

describe("SkillEscrow administration", () => {
  describe("constructor", () => {
    it("starts with a 1 USDC minimum, a 24 h exit delay, the treasury, the admin role and no batch", async () => {
      const { escrow, usdc, admin, treasury, chainId } = await loadFixture(deployEscrowFixture);
      expect(getAddress((await escrow.read.usdc()) as string)).to.equal(getAddress(usdc.address));
      expect(await escrow.read.minDeposit()).to.equal(USDC);
      expect(await escrow.read.exitDelay()).to.equal(DAY_SEC);
      expect(getAddress((await escrow.read.treasury()) as string)).to.equal(getAddress(treasury.account.address));
      expect(await escrow.read.hasRole([DEFAULT_ADMIN_ROLE, admin.account.address])).to.equal(true);
      expect(await escrow.read.lastBatchNumber()).to.equal(0n);
      expect(await escrow.read.SETTLER_ROLE()).to.equal(SETTLER_ROLE);
      expect(await escrow.read.VOUCHER_SIGNER_ROLE()).to.equal(VOUCHER_SIGNER_ROLE);
      const [, name, version, domainChainId, verifyingContract] = (await escrow.read.eip712Domain()) as readonly unknown[];
      expect([name, version, domainChainId, getAddress(verifyingContract as string)]).to.deep.equal([
        "SkillEscrow",
        "1",
        BigInt(chainId),
        getAddress(escrow.address),
      ]);
    });

    it("announces its initial settings with events", async () => {
      const { usdc, admin, treasury, publicClient } = await loadFixture(deployEscrowFixture);
      const { contract, deploymentTransaction } = await hre.viem.sendDeploymentTransaction("SkillEscrow", [
        usdc.address,
        admin.account.address,
        treasury.account.address,
      ]);
      await publicClient.waitForTransactionReceipt({ hash: deploymentTransaction.hash });
      await expectEvents(deploymentTransaction.hash, contract, "TreasuryChanged", [
        { previous: zeroAddress, current: treasury.account.address },
      ]);
      await expectEvents(deploymentTransaction.hash, contract, "MinDepositChanged", [{ previous: 0n, current: USDC }]);
      await expectEvents(deploymentTransaction.hash, contract, "ExitDelayChanged", [{ previous: 0n, current: DAY_SEC }]);
    });

    it("rejects a zero token, admin or treasury with EscrowInvalidAccount(0)", async () => {
      const { usdc, admin, treasury } = await loadFixture(deployEscrowFixture);
      const { abi } = await hre.artifacts.readArtifact("SkillEscrow");
      const cases = [
        [zeroAddress, admin.account.address, treasury.account.address],
        [usdc.address, zeroAddress, treasury.account.address],
        [usdc.address, admin.account.address, zeroAddress],
      ];
      for (const args of cases) {
        await expectRevert(hre.viem.deployContract("SkillEscrow", args), "EscrowInvalidAccount", [zeroAddress], [abi as Abi]);
      }
    });
  });

  describe("roles", () => {
    it("lets the admin grant and revoke the settler role, and nobody else", async () => {
      const { escrow, outsider, escrowAs } = await loadFixture(deployEscrowFixture);
      await escrow.write.grantRole([SETTLER_ROLE, outsider.account.address]);
      expect(await escrow.read.hasRole([SETTLER_ROLE, outsider.account.address])).to.equal(true);
      await escrow.write.revokeRole([SETTLER_ROLE, outsider.account.address]);
      expect(await escrow.read.hasRole([SETTLER_ROLE, outsider.account.address])).to.equal(false);
      await expectRevert(
        (await escrowAs(outsider)).write.grantRole([SETTLER_ROLE, outsider.account.address]),
        "AccessControlUnauthorizedAccount",
        [outsider.account.address, DEFAULT_ADMIN_ROLE],
      );
    });
  });

  describe("setMinDeposit(amount)", () => {
    it("changes the minimum and emits MinDepositChanged", async () => {
      const { escrow, alice, escrowAs } = await loadFixture(deployEscrowFixture);
      const hash = await escrow.write.setMinDeposit([10n * USDC]);
      await expectEvents(hash, escrow, "MinDepositChanged", [{ previous: USDC, current: 10n * USDC }]);
      await expectRevert((await escrowAs(alice)).write.deposit([5n * USDC]), "EscrowDepositBelowMinimum", [5n * USDC, 10n * USDC]);
    });

    it("rejects zero with EscrowZeroAmount and non-admins with AccessControlUnauthorizedAccount", async () => {
      const { escrow, settler, escrowAs } = await loadFixture(deployEscrowFixture);
      await expectRevert(escrow.write.setMinDeposit([0n]), "EscrowZeroAmount");
      await expectRevert((await escrowAs(settler)).write.setMinDeposit([2n * USDC]), "AccessControlUnauthorizedAccount", [
        settler.account.address,
        DEFAULT_ADMIN_ROLE,
      ]);
    });
  });

  describe("setExitDelay(delay)", () => {
    it("accepts both bounds, 1 h and 7 days, and emits ExitDelayChanged", async () => {
      const { escrow } = await loadFixture(deployEscrowFixture);
      const hash = await escrow.write.setExitDelay([HOUR_SEC]);
      await expectEvents(hash, escrow, "ExitDelayChanged", [{ previous: DAY_SEC, current: HOUR_SEC }]);
      await escrow.write.setExitDelay([7n * DAY_SEC]);
      expect(await escrow.read.exitDelay()).to.equal(7n * DAY_SEC);
    });

    it("rejects values outside the bounds with EscrowExitDelayOutOfBounds(delay, min, max)", async () => {
      const { escrow } = await loadFixture(deployEscrowFixture);
      for (const delay of [HOUR_SEC - 1n, 7n * DAY_SEC + 1n, 0n]) {
        await expectRevert(escrow.write.setExitDelay([delay]), "EscrowExitDelayOutOfBounds", [delay, HOUR_SEC, 7n * DAY_SEC]);
      }
    });

    it("rejects non-admins with AccessControlUnauthorizedAccount", async () => {
      const { alice, escrowAs } = await loadFixture(deployEscrowFixture);
      await expectRevert((await escrowAs(alice)).write.setExitDelay([HOUR_SEC]), "AccessControlUnauthorizedAccount", [
        alice.account.address,
        DEFAULT_ADMIN_ROLE,
      ]);
    });
  });

  describe("setTreasury(newTreasury)", () => {
    it("changes the fee receiver and emits TreasuryChanged", async () => {
      const { escrow, treasury, outsider } = await loadFixture(deployEscrowFixture);
      const hash = await escrow.write.setTreasury([outsider.account.address]);
      await expectEvents(hash, escrow, "TreasuryChanged", [{ previous: treasury.account.address, current: outsider.account.address }]);
      expect(getAddress((await escrow.read.treasury()) as string)).to.equal(getAddress(outsider.account.address));
    });

    it("rejects the zero address with EscrowInvalidAccount(0) and non-admins", async () => {
      const { escrow, treasury, escrowAs } = await loadFixture(deployEscrowFixture);
      await expectRevert(escrow.write.setTreasury([zeroAddress]), "EscrowInvalidAccount", [zeroAddress]);
      await expectRevert((await escrowAs(treasury)).write.setTreasury([treasury.account.address]), "AccessControlUnauthorizedAccount", [
        treasury.account.address,
        DEFAULT_ADMIN_ROLE,
      ]);
    });
  });

  describe("pauseDeposits() / unpauseDeposits()", () => {
    it("emit Paused and Unpaused with the admin as account", async () => {
      const { escrow, admin } = await loadFixture(deployEscrowFixture);
      const paused = await escrow.write.pauseDeposits();
      await expectEvents(paused, escrow, "Paused", [{ account: admin.account.address }]);
      expect(await escrow.read.paused()).to.equal(true);
      const unpaused = await escrow.write.unpauseDeposits();
      await expectEvents(unpaused, escrow, "Unpaused", [{ account: admin.account.address }]);
      expect(await escrow.read.paused()).to.equal(false);
    });

    it("reject pausing twice with EnforcedPause and unpausing when running with ExpectedPause", async () => {
      const { escrow } = await loadFixture(deployEscrowFixture);
      await expectRevert(escrow.write.unpauseDeposits(), "ExpectedPause");
      await escrow.write.pauseDeposits();
      await expectRevert(escrow.write.pauseDeposits(), "EnforcedPause");
    });

    it("reject non-admins, including the settler, with AccessControlUnauthorizedAccount", async () => {
      const { escrow, settler, escrowAs } = await loadFixture(deployEscrowFixture);
      const asSettler = await escrowAs(settler);
      await expectRevert(asSettler.write.pauseDeposits(), "AccessControlUnauthorizedAccount", [
        settler.account.address,
        DEFAULT_ADMIN_ROLE,
      ]);
      await escrow.write.pauseDeposits();
      await expectRevert(asSettler.write.unpauseDeposits(), "AccessControlUnauthorizedAccount", [
        settler.account.address,
        DEFAULT_ADMIN_ROLE,
      ]);
    });
  });
});
