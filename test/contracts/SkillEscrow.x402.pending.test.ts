import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import { keccak256, toHex, zeroHash, type Hex } from "viem";
import type { WalletClient } from "@nomicfoundation/hardhat-viem/types";
import { buildBatch } from "./helpers/batch";
import { expectRevert } from "./helpers/errors";
import { expectEvents } from "./helpers/events";
import { SETTLER_ROLE, USDC, earningsOf, escrowBalance, tokenBalance, type Contract } from "./helpers/fixtures";
import { buildX402Payment, type X402Payment, type X402Pending } from "./helpers/x402";
import { x402Fixture, type X402Fixture } from "./helpers/x402-fixture";

/** The three ways a pending payment ends, as the escrow's functions of the same names. */
const ENDINGS = ["completeX402", "refundX402", "reclaimX402"] as const;
type Ending = (typeof ENDINGS)[number];

/** Alice's 0.25 USDC payment to seller A, collected under a call id derived from `label`. */
async function collected(fx: X402Fixture, label: string, overrides: Partial<X402Payment> = {}) {
  const payment = buildX402Payment({ from: fx.alice.account.address, seller: fx.sellerA.account.address, ...overrides }, label);
  const { pending } = await fx.collect(fx.alice, payment);
  return { payment, callId: payment.callId, pending };
}

/** Ends `callId`'s payment the `ending` way: completeX402 and refundX402 as the settler, reclaimX402 as `caller`. */
async function end(fx: X402Fixture, ending: Ending, callId: Hex, pending: X402Pending, caller: WalletClient = fx.outsider) {
  const contract: Contract = ending === "reclaimX402" ? await fx.escrowAs(caller) : fx.asSettler;
  return contract.write[ending]([callId, pending]);
}

describe("SkillEscrow completeX402(callId, pending)", () => {
  it("credits the seller value - fee and the treasury the fee, moves no tokens, clears the payment and emits X402Settled", async () => {
    const fx = await loadFixture(x402Fixture);
    const { usdc, escrow, asSettler, alice, sellerA, treasury, expectConserved } = fx;
    const { callId, pending } = await collected(fx, "completed");
    const aliceWallet = await tokenBalance(usdc, alice.account.address);

    const hash = await asSettler.write.completeX402([callId, pending]);

    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(225_000n);
    expect(await earningsOf(escrow, treasury.account.address)).to.equal(25_000n);
    expect(await tokenBalance(usdc, escrow.address), "the value stays in the escrow, now as earnings").to.equal(250_000n);
    expect(await tokenBalance(usdc, alice.account.address)).to.equal(aliceWallet);
    expect(await escrowBalance(escrow, alice.account.address), "x402 never touches an escrowed balance").to.equal(0n);
    expect(await escrow.read.x402Pending([callId])).to.equal(zeroHash);
    await expectEvents(hash, escrow, "X402Settled", [
      {
        callId,
        payer: alice.account.address,
        seller: sellerA.account.address,
        amount: 250_000n,
        platformFee: 25_000n,
        treasury: treasury.account.address,
      },
    ]);
    await expectEvents(hash, escrow, "X402Refunded", []);
    await expectConserved({ pendingMicros: 0n });
  });

  it("pays x402 revenue out through the same claim() as batch revenue, leaving the escrow holding only balances", async () => {
    const fx = await loadFixture(x402Fixture);
    const { usdc, escrow, asSettler, escrowAs, alice, bob, sellerA, treasury, expectConserved } = fx;
    await (await escrowAs(alice)).write.deposit([10n * USDC]);
    await asSettler.write.settle([
      buildBatch({
        number: 1n,
        debits: [{ account: alice.account.address, amount: USDC }],
        credits: [{ seller: sellerA.account.address, amount: 900_000n }],
        platformFee: 100_000n,
      }),
    ]);
    const payment = buildX402Payment({ from: bob.account.address, seller: sellerA.account.address, value: 2n * USDC });
    const { pending } = await fx.collect(bob, payment);
    await asSettler.write.completeX402([payment.callId, pending]);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(900_000n + 1_800_000n);

    const sellerWallet = await tokenBalance(usdc, sellerA.account.address);
    const hash = await (await escrowAs(sellerA)).write.claim();
    await expectEvents(hash, escrow, "Claimed", [
      { seller: sellerA.account.address, recipient: sellerA.account.address, amount: 2_700_000n },
    ]);
    expect(await tokenBalance(usdc, sellerA.account.address)).to.equal(sellerWallet + 2_700_000n);
    await (await escrowAs(treasury)).write.claim();
    expect(await tokenBalance(usdc, treasury.account.address)).to.equal(100_000n + 200_000n);
    expect(await tokenBalance(usdc, escrow.address)).to.equal(await escrowBalance(escrow, alice.account.address));
    await expectConserved({ pendingMicros: 0n });
  });

  it("credits everything to the seller with a zero fee, and everything to the treasury with a fee of the whole value", async () => {
    const fx = await loadFixture(x402Fixture);
    const { escrow, asSettler, alice, sellerA, sellerB, treasury, expectConserved } = fx;
    const noFee = await collected(fx, "no fee", { platformFee: 0n });
    const allFee = await collected(fx, "all fee", { seller: sellerB.account.address, platformFee: 250_000n });
    await asSettler.write.completeX402([noFee.callId, noFee.pending]);
    const hash = await asSettler.write.completeX402([allFee.callId, allFee.pending]);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(250_000n);
    expect(await earningsOf(escrow, sellerB.account.address)).to.equal(0n);
    expect(await earningsOf(escrow, treasury.account.address)).to.equal(250_000n);
    await expectEvents(hash, escrow, "X402Settled", [
      {
        callId: allFee.callId,
        payer: alice.account.address,
        seller: sellerB.account.address,
        amount: 250_000n,
        platformFee: 250_000n,
        treasury: treasury.account.address,
      },
    ]);
    await expectConserved({ pendingMicros: 0n });
  });

  it("credits the fee to the treasury current at completion, not the one current at collection", async () => {
    const fx = await loadFixture(x402Fixture);
    const { escrow, asSettler, alice, sellerA, treasury, outsider, expectConserved } = fx;
    const { callId, pending } = await collected(fx, "treasury moved");
    await escrow.write.setTreasury([outsider.account.address]);
    const hash = await asSettler.write.completeX402([callId, pending]);
    expect(await earningsOf(escrow, outsider.account.address)).to.equal(25_000n);
    expect(await earningsOf(escrow, treasury.account.address)).to.equal(0n);
    await expectEvents(hash, escrow, "X402Settled", [
      {
        callId,
        payer: alice.account.address,
        seller: sellerA.account.address,
        amount: 250_000n,
        platformFee: 25_000n,
        treasury: outsider.account.address,
      },
    ]);
    await expectConserved({ pendingMicros: 0n });
  });

  it("can still complete after reclaimableAt, for as long as the payer has not reclaimed", async () => {
    const fx = await loadFixture(x402Fixture);
    const { escrow, asSettler, sellerA, expectConserved } = fx;
    const { callId, pending } = await collected(fx, "late");
    await time.increaseTo(pending.reclaimableAt + 3600n);
    await asSettler.write.completeX402([callId, pending]);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(225_000n);
    await expectRevert(end(fx, "reclaimX402", callId, pending), "EscrowX402PaymentNotPending", [callId]);
    await expectConserved({ pendingMicros: 0n });
  });
});

describe("SkillEscrow refundX402(callId, pending)", () => {
  it("sends the whole value back to the payer, credits no one, clears the payment and emits X402Refunded(reclaimed false)", async () => {
    const fx = await loadFixture(x402Fixture);
    const { usdc, escrow, asSettler, alice, sellerA, treasury, expectConserved } = fx;
    const walletBefore = await tokenBalance(usdc, alice.account.address);
    const { callId, pending } = await collected(fx, "refunded");
    expect(await tokenBalance(usdc, alice.account.address)).to.equal(walletBefore - 250_000n);

    const hash = await asSettler.write.refundX402([callId, pending]);

    expect(await tokenBalance(usdc, alice.account.address)).to.equal(walletBefore);
    expect(await tokenBalance(usdc, escrow.address)).to.equal(0n);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(0n);
    expect(await earningsOf(escrow, treasury.account.address)).to.equal(0n);
    expect(await escrow.read.x402Pending([callId])).to.equal(zeroHash);
    await expectEvents(hash, escrow, "X402Refunded", [{ callId, payer: alice.account.address, amount: 250_000n, reclaimed: false }]);
    await expectEvents(hash, escrow, "X402Settled", []);
    await expectConserved({ pendingMicros: 0n });
  });

  it("refunds one pending payment and leaves the others pending", async () => {
    const fx = await loadFixture(x402Fixture);
    const { escrow, asSettler, expectConserved } = fx;
    const kept = await collected(fx, "kept", { value: 400_000n });
    const refunded = await collected(fx, "refunded");
    await asSettler.write.refundX402([refunded.callId, refunded.pending]);
    expect(await escrow.read.x402Pending([kept.callId])).to.not.equal(zeroHash);
    await expectConserved({ pendingMicros: 400_000n });
  });
});

describe("SkillEscrow reclaimX402(callId, pending)", () => {
  it("lets anyone reclaim from reclaimableAt on, always paying the payer, and emits X402Refunded(reclaimed true)", async () => {
    const fx = await loadFixture(x402Fixture);
    const { usdc, escrow, alice, outsider, expectConserved } = fx;
    const { callId, pending } = await collected(fx, "reclaimed by a relayer");
    const [aliceWallet, outsiderWallet] = [
      await tokenBalance(usdc, alice.account.address),
      await tokenBalance(usdc, outsider.account.address),
    ];

    await time.setNextBlockTimestamp(pending.reclaimableAt);
    const hash = await end(fx, "reclaimX402", callId, pending, outsider);

    expect(await tokenBalance(usdc, alice.account.address)).to.equal(aliceWallet + 250_000n);
    expect(await tokenBalance(usdc, outsider.account.address), "the relayer gets nothing").to.equal(outsiderWallet);
    expect(await escrow.read.x402Pending([callId])).to.equal(zeroHash);
    await expectEvents(hash, escrow, "X402Refunded", [{ callId, payer: alice.account.address, amount: 250_000n, reclaimed: true }]);
    await expectConserved({ pendingMicros: 0n });
  });

  it("lets the payer reclaim its own payment", async () => {
    const fx = await loadFixture(x402Fixture);
    const { usdc, alice, expectConserved } = fx;
    const walletBefore = await tokenBalance(usdc, alice.account.address);
    const { callId, pending } = await collected(fx, "reclaimed by the payer");
    await time.increaseTo(pending.reclaimableAt);
    await end(fx, "reclaimX402", callId, pending, alice);
    expect(await tokenBalance(usdc, alice.account.address)).to.equal(walletBefore);
    await expectConserved({ pendingMicros: 0n });
  });

  it("rejects a reclaim before reclaimableAt with EscrowX402NotReclaimable(callId, reclaimableAt, now), to the last second", async () => {
    const fx = await loadFixture(x402Fixture);
    const { alice, expectConserved } = fx;
    const { callId, pending } = await collected(fx, "too early");
    for (const atSec of [BigInt(await time.latest()) + 1n, pending.reclaimableAt - 1n]) {
      await time.setNextBlockTimestamp(atSec);
      await expectRevert(end(fx, "reclaimX402", callId, pending, alice), "EscrowX402NotReclaimable", [
        callId,
        pending.reclaimableAt,
        atSec,
      ]);
    }
    await expectConserved({ pendingMicros: 250_000n });
  });
});

describe("SkillEscrow pending x402 payments", () => {
  it("cannot end a payment twice, whichever ways: EscrowX402PaymentNotPending(callId)", async () => {
    const fx = await loadFixture(x402Fixture);
    const payments = [];
    for (const first of ENDINGS) {
      for (const second of ENDINGS) payments.push({ first, second, ...(await collected(fx, `${first} then ${second}`)) });
    }
    await time.increaseTo(payments[payments.length - 1].pending.reclaimableAt);
    for (const { first, second, callId, pending } of payments) {
      await end(fx, first, callId, pending);
      await expectRevert(end(fx, second, callId, pending), "EscrowX402PaymentNotPending", [callId]).catch((error: Error) => {
        throw new Error(`${first} then ${second}: ${error.message}`);
      });
    }
    const refundedOrReclaimed = payments.filter(({ first }) => first !== "completeX402").length;
    expect(await tokenBalance(fx.usdc, fx.escrow.address), "only the completed payments stayed, as earnings").to.equal(
      BigInt(payments.length - refundedOrReclaimed) * 250_000n,
    );
    await fx.expectConserved({ pendingMicros: 0n });
  });

  it("rejects fields other than those collected, and a call id never collected, with EscrowX402PaymentNotPending(callId)", async () => {
    const fx = await loadFixture(x402Fixture);
    const { bob, sellerB, expectConserved } = fx;
    const { callId, pending } = await collected(fx, "tampered");
    await time.increaseTo(pending.reclaimableAt);
    const tampered: [string, Hex, X402Pending][] = [
      ["another payer (a refund to someone else)", callId, { ...pending, payer: bob.account.address }],
      ["another seller (a credit to someone else)", callId, { ...pending, seller: sellerB.account.address }],
      ["a larger value", callId, { ...pending, value: pending.value + 1n }],
      ["a smaller value", callId, { ...pending, value: pending.value - 1n }],
      ["another fee", callId, { ...pending, platformFee: 0n }],
      ["an earlier reclaimableAt", callId, { ...pending, reclaimableAt: pending.reclaimableAt - 1n }],
      ["a call id never collected", keccak256(toHex("never collected")), pending],
    ];
    for (const ending of ENDINGS) {
      for (const [what, sentCallId, sent] of tampered) {
        await expectRevert(end(fx, ending, sentCallId, sent), "EscrowX402PaymentNotPending", [sentCallId]).catch((error: Error) => {
          throw new Error(`${ending} with ${what}: ${error.message}`);
        });
      }
    }
    await expectConserved({ pendingMicros: 250_000n });
    // The control: the fields as collected still end it.
    await end(fx, "completeX402", callId, pending);
    await expectConserved({ pendingMicros: 0n });
  });

  it("rejects completeX402 and refundX402 from callers without SETTLER_ROLE with AccessControlUnauthorizedAccount(caller, role)", async () => {
    const fx = await loadFixture(x402Fixture);
    const { escrowAs, admin, alice, sellerA, treasury, outsider, expectConserved } = fx;
    const { callId, pending } = await collected(fx, "not the settler's");
    // Even after reclaimableAt, when anyone may reclaim: no one else may decide the call's outcome.
    await time.increaseTo(pending.reclaimableAt);
    for (const caller of [outsider, alice, sellerA, treasury, admin]) {
      for (const ending of ["completeX402", "refundX402"] as const) {
        await expectRevert((await escrowAs(caller)).write[ending]([callId, pending]), "AccessControlUnauthorizedAccount", [
          caller.account.address,
          SETTLER_ROLE,
        ]);
      }
    }
    await expectConserved({ pendingMicros: 250_000n });
  });

  it("lets the payer reclaim what the settler can no longer complete or refund once its role is revoked", async () => {
    const fx = await loadFixture(x402Fixture);
    const { usdc, escrow, settler, alice, expectConserved } = fx;
    const walletBefore = await tokenBalance(usdc, alice.account.address);
    const { callId, pending } = await collected(fx, "gateway gone");
    await escrow.write.revokeRole([SETTLER_ROLE, settler.account.address]);
    await expectRevert(end(fx, "refundX402", callId, pending), "AccessControlUnauthorizedAccount", [settler.account.address, SETTLER_ROLE]);
    await time.increaseTo(pending.reclaimableAt);
    await end(fx, "reclaimX402", callId, pending, alice);
    expect(await tokenBalance(usdc, alice.account.address)).to.equal(walletBefore);
    await expectConserved({ pendingMicros: 0n });
  });
});
