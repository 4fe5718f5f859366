import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import hre from "hardhat";
import { decodeFunctionResult, encodeFunctionData, type Abi, type Hex } from "viem";
import { buildBatch } from "./helpers/batch";
import { expectRevert } from "./helpers/errors";
import { DAY_SEC, SETTLER_ROLE, USDC, earningsOf, escrowBalance, pendingExit } from "./helpers/fixtures";
import { buildX402Payment } from "./helpers/x402";

/**
 * An escrow over ReentrantToken, an attacker token that calls back into the escrow from inside its own
 * transfers. The token contract is also the attacker's account: it holds seller earnings, an escrowed
 * balance with a ripe exit, and (to show that only the guard stops it) the settler role.
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
  return { token, escrow, escrowCall, nextBatch, alice, asSettler };
}

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

  it("stops settleX402's token pull re-entering claim, settle and settleX402 with ReentrancyGuardReentrantCall", async () => {
    const { token, escrow, escrowCall, nextBatch, alice, asSettler } = await loadFixture(attackFixture);
    const payment = buildX402Payment({ from: alice.account.address, seller: token.address, value: USDC });
    const signature = "0x"; // the attacker token checks no signature
    const nested = buildX402Payment({ from: alice.account.address, seller: token.address, value: USDC }, "nested");
    for (const reentry of [escrowCall("claim"), escrowCall("settle", [nextBatch]), escrowCall("settleX402", [nested, signature])]) {
      await token.write.arm([escrow.address, reentry]);
      await expectRevert(asSettler.write.settleX402([payment, signature]), "ReentrancyGuardReentrantCall", [], [escrow.abi]);
    }
    expect(await earningsOf(escrow, token.address)).to.equal(10n * USDC);
    // Disarmed, the same payment settles: the guard, not the payment, stopped it.
    await token.write.disarm();
    await asSettler.write.settleX402([payment, signature]);
    expect(await earningsOf(escrow, token.address)).to.equal(10n * USDC + 900_000n);
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
