import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import hre from "hardhat";
import { zeroHash, type Abi } from "viem";
import { expectRevert } from "./helpers/errors";
import { SETTLER_ROLE, USDC, earningsOf, tokenBalance } from "./helpers/fixtures";
import { buildX402Payment, pendingOf, signX402Payment, type X402Payment } from "./helpers/x402";
import { expectEscrowConserved, x402Fixture } from "./helpers/x402-fixture";

/** collectX402 where the token, or someone at the token, does not behave as the escrow asks. */
describe("SkillEscrow collectX402 and the token", () => {
  describe("when someone submits the authorization to the token first", () => {
    it("strands the money in the escrow, owed to no one; the collection reverts and nothing is pending or redirectable", async () => {
      const { usdc, escrow, asSettler, usdcAs, sign, alice, sellerA, outsider, expectConserved } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address });
      const signature = await sign(alice, payment);
      const { from, value, validAfter, validBefore, nonce } = payment;
      const asOutsider = await usdcAs(outsider);

      // The front-runner cannot send it anywhere but the escrow: `to` is signed.
      await expectRevert(
        asOutsider.write.transferWithAuthorization([from, outsider.account.address, value, validAfter, validBefore, nonce, signature]),
        "ERC3009InvalidSignature",
      );
      await asOutsider.write.transferWithAuthorization([from, escrow.address, value, validAfter, validBefore, nonce, signature]);
      expect(await tokenBalance(usdc, escrow.address)).to.equal(250_000n);

      await expectRevert(
        asSettler.write.collectX402([payment, signature]),
        "ERC3009UsedAuthorization",
        [alice.account.address, nonce],
        [usdc.abi],
      );
      expect(await escrow.read.x402Pending([payment.callId])).to.equal(zeroHash);
      // Nothing pending, nothing earned: the whole payment sits in the escrow beyond what it owes.
      await expectConserved({ pendingMicros: 0n, strandedMicros: 250_000n });
    });
  });

  describe("over a token that does not deliver exactly the value", () => {
    async function skewedFixture() {
      const wallets = await hre.viem.getWalletClients();
      const [admin, settler, treasury, alice, sellerA] = wallets;
      const publicClient = await hre.viem.getPublicClient();
      const chainId = await publicClient.getChainId();
      const token = await hre.viem.deployContract("SkewedTransferUSDC", [admin.account.address]);
      const escrow = await hre.viem.deployContract("SkillEscrow", [token.address, admin.account.address, treasury.account.address]);
      await escrow.write.grantRole([SETTLER_ROLE, settler.account.address]);
      await token.write.mint([alice.account.address, 100n * USDC]);
      const asSettler = await hre.viem.getContractAt("SkillEscrow", escrow.address, { client: { wallet: settler } });
      const payment = (label: string) =>
        buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, value: USDC }, label);
      const collect = async (sent: X402Payment) =>
        asSettler.write.collectX402([sent, await signX402Payment(alice, token.address, chainId, escrow.address, sent)]);
      const expectConserved = (pendingMicros: bigint) =>
        expectEscrowConserved(
          token,
          escrow,
          wallets.map((w) => w.account.address),
          { pendingMicros },
        );
      return { token, escrow, asSettler, payment, collect, expectConserved, publicClient, sellerA };
    }

    it("collects and completes normally while the token delivers the value (control)", async () => {
      const { token, escrow, asSettler, payment, collect, expectConserved, publicClient, sellerA } = await loadFixture(skewedFixture);
      const control = payment("control");
      const receipt = await publicClient.waitForTransactionReceipt({ hash: await collect(control) });
      const { timestamp } = await publicClient.getBlock({ blockNumber: receipt.blockNumber });
      expect(await tokenBalance(token, escrow.address)).to.equal(USDC);
      await expectConserved(USDC);
      await asSettler.write.completeX402([control.callId, pendingOf(control, timestamp)]);
      expect(await earningsOf(escrow, sellerA.account.address)).to.equal(900_000n);
      await expectConserved(0n);
    });

    it("rejects a delivery short or long of the value with EscrowTransferShortfall(expected, received), holding nothing pending", async () => {
      const { token, escrow, payment, collect, expectConserved } = await loadFixture(skewedFixture);
      for (const [skew, received] of [
        [-1n, USDC - 1n], // fee-on-transfer: one unit short
        [-USDC, 0n], // the whole value skimmed: the balance does not rise
        [1n, USDC + 1n], // a bonus: more than signed would leave USDC owed to no one
      ]) {
        await token.write.setSkew([skew]);
        const skewed = payment(`skew ${skew}`);
        await expectRevert(collect(skewed), "EscrowTransferShortfall", [USDC, received], [token.abi as Abi]);
        expect(await escrow.read.x402Pending([skewed.callId])).to.equal(zeroHash);
      }
      expect(await tokenBalance(token, escrow.address)).to.equal(0n);
      await expectConserved(0n);
    });
  });
});
