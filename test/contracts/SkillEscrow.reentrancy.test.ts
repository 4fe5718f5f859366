import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import hre from "hardhat";
import { decodeFunctionResult, encodeFunctionData, zeroHash, type Abi, type Hex } from "viem";
import { buildBatch } from "./helpers/batch";
import { expectRevert } from "./helpers/errors";
import { DAY_SEC, SETTLER_ROLE, USDC, earningsOf, escrowBalance, pendingExit } from "./helpers/fixtures";
import { buildX402Payment, hashX402Pending, pendingOf } from "./helpers/x402";

/**
 * An escrow over ReentrantToken, an attacker token that calls back into the escrow from inside its own
 * transfers. The token contract is also the attacker's account: it holds seller earnings, an escrowed
 * balance with a ripe exit, and (to show that only the guard stops it) the settler role. Alice pays it x402
 * payments, collected with `collectDisarmed` while the hook is off.
 */
async function attackFixture() {
  const [admin, settler, alice] = await hre.viem.getWalletClients();
  const token = await hre.viem.deployContract("ReentrantToken");
  const escrow = await hre.viem.deployContract("SkillEscrow", [token.address, admin.account.address, admin.account.address]);
  const asAlice = await hre.viem.getContractAt("SkillEscrow", escrow.address, { client: { wallet: alice } });
  const asSettler = await hre.viem.getContractAt("SkillEscrow", escrow.address, { client: { wallet: settler } });
  const tokenAsAlice = await hre.viem.getContractAt("ReentrantToken", token.address, { client: { wallet: alice } });
  await escrow.write.grantRole([SETTLER_ROLE, settler.account.address]);
  await escrow.write.grantRole([SETTLER_ROLE, token.address]);

  await token.write.mint([alice.account.address, 1_000n * USDC]);
  await tokenAsAlice.write.approve([escrow.address, 1_000n * USDC]);
  await asAlice.write.deposit([100n * USDC]);
  await asAlice.write.depositFor([token.address, 50n * USDC]);
  // Alice's calls earned the attacker (as a seller) 10 USDC.
  await asSettler.write.settle([
    buildBatch({
      number: 1n,
      debits: [{ account: alice.account.address, amount: 10n * USDC }],
      credits: [{ seller: token.address, amount: 10n * USDC }],
    }),
  ]);
  const escrowCall = (functionName: string, args: readonly unknown[] = []): Hex =>
    encodeFunctionData({ abi: escrow.abi as Abi, functionName, args });
  await token.write.execute([escrow.address, escrowCall("requestExit", [50n * USDC])]);
  await time.increase(DAY_SEC);

  const nextBatch = buildBatch({
    number: 2n,
    debits: [{ account: alice.account.address, amount: 90n * USDC }],
    credits: [{ seller: token.address, amount: 90n * USDC }],
  });
  // x402 payments of alice's to the attacker as a seller; the attacker token checks no signature.
  const publicClient = await hre.viem.getPublicClient();
  const pay = (label: string) => buildX402Payment({ from: alice.account.address, seller: token.address, value: USDC }, label);
  const collectDisarmed = async (label: string) => {
    const payment = pay(label);
    const hash = await asSettler.write.collectX402([payment, NO_SIGNATURE]);
    const { blockNumber } = await publicClient.waitForTransactionReceipt({ hash });
    const { timestamp } = await publicClient.getBlock({ blockNumber });
    return { callId: payment.callId, pending: pendingOf(payment, timestamp) };
  };
  return { token, escrow, escrowCall, nextBatch, alice, asSettler, pay, collectDisarmed };
}

/** ReentrantToken's transferWithAuthorization checks nothing, so x402 payments over it need no signature. */
const NO_SIGNATURE: Hex = "0x";

describe("SkillEscrow reentrancy", () => {
  it("runs the attacker's hook inside the payout, after the books were updated (control)", async () => {
    const { token, escrow, escrowCall } = await loadFixture(attackFixture);
    await token.write.arm([escrow.address, escrowCall("earnings", [token.address])]);
    await token.write.execute([escrow.address, escrowCall("claim")]);
    expect(await token.read.hookCalls()).to.equal(1n);
    // What the hook read mid-transfer: the earnings were already zero (checks-effects-interactions).
    const seen = decodeFunctionResult({
      abi: escrow.abi as Abi,
      functionName: "earnings",
      data: (await token.read.lastReturnData()) as Hex,
    });
    expect(seen).to.equal(0n);
    expect(await token.read.balanceOf([token.address])).to.equal(10n * USDC);
  });

  it("stops claim re-entering claim with ReentrancyGuardReentrantCall", async () => {
    const { token, escrow, escrowCall } = await loadFixture(attackFixture);
    await token.write.arm([escrow.address, escrowCall("claim")]);
    await expectRevert(token.write.execute([escrow.address, escrowCall("claim")]), "ReentrancyGuardReentrantCall", [], [escrow.abi]);
    expect(await earningsOf(escrow, token.address)).to.equal(10n * USDC);
  });

  it("stops claim re-entering settle, even for a holder of SETTLER_ROLE", async () => {
    const { token, escrow, escrowCall, nextBatch, alice } = await loadFixture(attackFixture);
    await token.write.arm([escrow.address, escrowCall("settle", [nextBatch])]);
    await expectRevert(token.write.execute([escrow.address, escrowCall("claim")]), "ReentrancyGuardReentrantCall", [], [escrow.abi]);
    expect(await escrow.read.lastBatchNumber()).to.equal(1n);
    expect(await escrowBalance(escrow, alice.account.address)).to.equal(90n * USDC);
  });

  it("stops completeExit re-entering completeExit with ReentrancyGuardReentrantCall", async () => {
    const { token, escrow, escrowCall } = await loadFixture(attackFixture);
    await token.write.arm([escrow.address, escrowCall("completeExit")]);
    await expectRevert(token.write.execute([escrow.address, escrowCall("completeExit")]), "ReentrancyGuardReentrantCall", [], [escrow.abi]);
    expect(await escrowBalance(escrow, token.address)).to.equal(50n * USDC);
    expect((await pendingExit(escrow, token.address)).amount).to.equal(50n * USDC);
  });

  it("stops completeExit re-entering claim and settle with ReentrancyGuardReentrantCall", async () => {
    const { token, escrow, escrowCall, nextBatch } = await loadFixture(attackFixture);
    for (const reentry of [escrowCall("claim"), escrowCall("settle", [nextBatch])]) {
      await token.write.arm([escrow.address, reentry]);
      await expectRevert(
        token.write.execute([escrow.address, escrowCall("completeExit")]),
        "ReentrancyGuardReentrantCall",
        [],
        [escrow.abi],
      );
    }
  });

  it("stops collectX402's token pull re-entering claim, settle, collectX402, completeX402 and refundX402", async () => {
    const { token, escrow, escrowCall, nextBatch, asSettler, collectDisarmed, pay } = await loadFixture(attackFixture);
    // A payment already pending, which completeX402 or refundX402 would end if the guard let them in.
    const standing = await collectDisarmed("standing");
    const payment = pay("outer");
    const reentries = {
      claim: escrowCall("claim"),
      settle: escrowCall("settle", [nextBatch]),
      collectX402: escrowCall("collectX402", [pay("nested"), NO_SIGNATURE]),
      completeX402: escrowCall("completeX402", [standing.callId, standing.pending]),
      refundX402: escrowCall("refundX402", [standing.callId, standing.pending]),
    };
    for (const [name, reentry] of Object.entries(reentries)) {
      await token.write.arm([escrow.address, reentry]);
      await expectRevert(asSettler.write.collectX402([payment, NO_SIGNATURE]), "ReentrancyGuardReentrantCall", [], [escrow.abi]).catch(
        (error: Error) => {
          throw new Error(`re-entering ${name}: ${error.message}`);
        },
      );
    }
    expect(await earningsOf(escrow, token.address)).to.equal(10n * USDC);
    expect(await escrow.read.x402Pending([standing.callId])).to.equal(hashX402Pending(standing.pending));
    expect(await escrow.read.x402PendingTotal()).to.equal(USDC);
    // Disarmed, the same payment is collected: the guard, not the payment, stopped it.
    await token.write.disarm();
    await asSettler.write.collectX402([payment, NO_SIGNATURE]);
    expect(await escrow.read.x402PendingTotal()).to.equal(2n * USDC);
  });

  it("runs the hook inside refundX402's payout, after the payment was cleared (control)", async () => {
    const { token, escrow, escrowCall, asSettler, collectDisarmed } = await loadFixture(attackFixture);
    const { callId, pending } = await collectDisarmed("refunded");
    await token.write.arm([escrow.address, escrowCall("x402Pending", [callId])]);
    await asSettler.write.refundX402([callId, pending]);
    expect(await token.read.hookCalls()).to.equal(1n);
    // What the hook read mid-transfer: the commitment was already gone (checks-effects-interactions).
    const seen = decodeFunctionResult({
      abi: escrow.abi as Abi,
      functionName: "x402Pending",
      data: (await token.read.lastReturnData()) as Hex,
    });
    expect(seen).to.equal(zeroHash);
  });

  it("stops the payouts of refundX402 and reclaimX402 re-entering claim, settle and every x402 function", async () => {
    const { token, escrow, escrowCall, nextBatch, alice, asSettler, collectDisarmed, pay } = await loadFixture(attackFixture);
    const asAlice = await hre.viem.getContractAt("SkillEscrow", escrow.address, { client: { wallet: alice } });
    const victim = await collectDisarmed("victim");
    // Another pending payment, ripe for reclaiming, that each re-entry would end if the guard let it in.
    const other = await collectDisarmed("other");
    await time.increaseTo(other.pending.reclaimableAt);
    const reentries = {
      claim: escrowCall("claim"),
      settle: escrowCall("settle", [nextBatch]),
      collectX402: escrowCall("collectX402", [pay("nested"), NO_SIGNATURE]),
      completeX402: escrowCall("completeX402", [other.callId, other.pending]),
      refundX402: escrowCall("refundX402", [other.callId, other.pending]),
      reclaimX402: escrowCall("reclaimX402", [other.callId, other.pending]),
    };
    const payouts = {
      refundX402: () => asSettler.write.refundX402([victim.callId, victim.pending]),
      reclaimX402: () => asAlice.write.reclaimX402([victim.callId, victim.pending]),
    };
    for (const [payoutName, payout] of Object.entries(payouts)) {
      for (const [name, reentry] of Object.entries(reentries)) {
        await token.write.arm([escrow.address, reentry]);
        await expectRevert(payout(), "ReentrancyGuardReentrantCall", [], [escrow.abi]).catch((error: Error) => {
          throw new Error(`${payoutName} re-entering ${name}: ${error.message}`);
        });
      }
    }
    expect(await earningsOf(escrow, token.address)).to.equal(10n * USDC);
    expect(await escrow.read.x402PendingTotal()).to.equal(2n * USDC);
    // Disarmed, both payouts go through.
    await token.write.disarm();
    await payouts.refundX402();
    await asAlice.write.reclaimX402([other.callId, other.pending]);
    expect(await escrow.read.x402PendingTotal()).to.equal(0n);
  });

  it("stops a deposit's token pull re-entering requestExit and cancelExit with ReentrancyGuardReentrantCall", async () => {
    const { token, escrow, escrowCall, alice } = await loadFixture(attackFixture);
    const asAlice = await hre.viem.getContractAt("SkillEscrow", escrow.address, { client: { wallet: alice } });
    for (const reentry of [escrowCall("requestExit", [USDC]), escrowCall("cancelExit")]) {
      await token.write.arm([escrow.address, reentry]);
      await expectRevert(asAlice.write.deposit([USDC]), "ReentrancyGuardReentrantCall", [], [escrow.abi]);
    }
  });
});
