import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { ExactEvmScheme } from "@x402/evm";
import { expect } from "chai";
import hre from "hardhat";
import { getAddress, keccak256, toHex, zeroAddress, type Address, type Hex } from "viem";
import { feeOf } from "./helpers/batch";
import { expectRevert } from "./helpers/errors";
import { expectEvents } from "./helpers/events";
import { SETTLER_ROLE, USDC, earningsOf, tokenBalance } from "./helpers/fixtures";
import { splitSignature, signCancelAuthorization } from "./helpers/signatures";
import { X402_RECLAIM_DELAY_SEC, buildX402Payment, hashX402Pending, pendingOf, type X402Payment } from "./helpers/x402";
import { x402Fixture } from "./helpers/x402-fixture";

describe("SkillEscrow collectX402(payment, signature)", () => {
  it("pulls the payer's USDC into the escrow pending under the call id, credits no one yet, and emits X402Collected", async () => {
    const { usdc, escrow, asSettler, settler, sign, alice, sellerA, treasury, expectConserved } = await loadFixture(x402Fixture);
    const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, value: 250_000n });
    const signature = await sign(alice, payment);
    const walletBefore = await tokenBalance(usdc, alice.account.address);
    const collectedAtSec = BigInt(await time.latest()) + 10n;
    const expectedPending = pendingOf(payment, collectedAtSec);

    await time.setNextBlockTimestamp(collectedAtSec);
    const { result: returned } = await asSettler.simulate.collectX402([payment, signature], {
      account: settler.account.address,
      blockTag: "pending",
    });
    expect(returned, "returns reclaimableAt").to.equal(collectedAtSec + X402_RECLAIM_DELAY_SEC);
    await time.setNextBlockTimestamp(collectedAtSec);
    const hash = await asSettler.write.collectX402([payment, signature]);

    expect(await escrow.read.X402_RECLAIM_DELAY()).to.equal(X402_RECLAIM_DELAY_SEC);
    expect(await tokenBalance(usdc, alice.account.address)).to.equal(walletBefore - 250_000n);
    expect(await tokenBalance(usdc, escrow.address)).to.equal(250_000n);
    expect(await earningsOf(escrow, sellerA.account.address), "nothing is earned before the call succeeds").to.equal(0n);
    expect(await earningsOf(escrow, treasury.account.address)).to.equal(0n);
    expect(await usdc.read.authorizationState([alice.account.address, payment.nonce])).to.equal(true);
    expect(await escrow.read.x402Pending([payment.callId]), "the one-slot commitment").to.equal(hashX402Pending(expectedPending));
    expect(await escrow.read.hashX402Pending([expectedPending]), "the contract hashes as documented").to.equal(
      hashX402Pending(expectedPending),
    );
    await expectEvents(hash, escrow, "X402Collected", [
      {
        callId: payment.callId,
        payer: alice.account.address,
        seller: sellerA.account.address,
        amount: 250_000n,
        platformFee: 25_000n,
        reclaimableAt: collectedAtSec + X402_RECLAIM_DELAY_SEC,
      },
    ]);
    await expectEvents(hash, escrow, "X402Settled", []);
    await expectConserved({ pendingMicros: 250_000n });
  });

  it("holds several payments pending at once, of one payer to one seller, each under its own call id", async () => {
    const { escrow, collect, alice, sellerA, expectConserved } = await loadFixture(x402Fixture);
    const first = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, value: 100_000n }, "first");
    const second = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, value: 300_000n }, "second");
    const { pending: firstPending } = await collect(alice, first);
    const { pending: secondPending } = await collect(alice, second);
    expect(await escrow.read.x402Pending([first.callId])).to.equal(hashX402Pending(firstPending));
    expect(await escrow.read.x402Pending([second.callId])).to.equal(hashX402Pending(secondPending));
    await expectConserved({ pendingMicros: 400_000n });
  });

  it("collects the authorization the real @x402/evm exact client signs for payTo = the escrow", async () => {
    const { usdc, escrow, asSettler, collectSigned, chainId, alice, sellerA, expectConserved } = await loadFixture(x402Fixture);
    const client = new ExactEvmScheme({
      address: alice.account.address,
      signTypedData: (typedData) =>
        alice.signTypedData({ account: alice.account, ...typedData } as Parameters<typeof alice.signTypedData>[0]),
    });
    const requirements = {
      scheme: "exact",
      network: `eip155:${chainId}` as const,
      asset: usdc.address,
      amount: "123456",
      payTo: escrow.address,
      maxTimeoutSeconds: 300,
      extra: { name: "USD Coin", version: "2" },
    };
    // The client dates its authorization by the wall clock; the token checks it against the chain's clock, which
    // earlier tests may have moved. Give the client the chain's time so the window is the one a live client gets.
    const chainNowSec = await time.latest();
    const realNow = Date.now;
    Date.now = () => chainNowSec * 1000;
    let created: Awaited<ReturnType<ExactEvmScheme["createPaymentPayload"]>>;
    try {
      created = await client.createPaymentPayload(2, requirements);
    } finally {
      Date.now = realNow;
    }
    const { authorization, signature } = created.payload as {
      authorization: { from: Address; to: Address; value: string; validAfter: string; validBefore: string; nonce: Hex };
      signature: Hex;
    };
    expect(getAddress(authorization.to), "the client signs for payTo").to.equal(getAddress(escrow.address));
    expect(authorization.validAfter, "x402 clients sign validAfter 0").to.equal("0");
    const value = BigInt(authorization.value);
    const payment = buildX402Payment({
      from: authorization.from,
      seller: sellerA.account.address,
      value,
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
      nonce: authorization.nonce,
    });

    const { pending } = await collectSigned(payment, signature);
    expect(await tokenBalance(usdc, escrow.address)).to.equal(123_456n);
    await expectConserved({ pendingMicros: 123_456n });
    await asSettler.write.completeX402([payment.callId, pending]);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(123_456n - feeOf(123_456n));
    await expectConserved({ pendingMicros: 0n });
  });

  it("accepts an ERC-1271 smart-wallet payer, and refunds to the wallet", async () => {
    const { usdc, asSettler, collect, alice, sellerA, expectConserved } = await loadFixture(x402Fixture);
    const wallet = await hre.viem.deployContract("OwnedSignatureWallet", [alice.account.address]);
    await usdc.write.mint([wallet.address, 5n * USDC]);
    const payment = buildX402Payment({ from: wallet.address, seller: sellerA.account.address, value: USDC });
    // The wallet's owner signs the token's EIP-712 digest; the token asks the wallet (ERC-1271) whether it is valid.
    const { pending } = await collect(alice, payment);
    expect(await tokenBalance(usdc, wallet.address)).to.equal(4n * USDC);
    expect(pending.payer).to.equal(wallet.address);
    await expectConserved({ pendingMicros: USDC });

    await asSettler.write.refundX402([payment.callId, pending]);
    expect(await tokenBalance(usdc, wallet.address)).to.equal(5n * USDC);
    await expectConserved({ pendingMicros: 0n });
  });

  it("keeps collecting, completing and refunding while deposits are paused", async () => {
    const { escrow, asSettler, collect, alice, sellerA, expectConserved } = await loadFixture(x402Fixture);
    await escrow.write.pauseDeposits();
    const completed = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address }, "completed");
    const refunded = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address }, "refunded");
    await asSettler.write.completeX402([completed.callId, (await collect(alice, completed)).pending]);
    await asSettler.write.refundX402([refunded.callId, (await collect(alice, refunded)).pending]);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(225_000n);
    await expectConserved({ pendingMicros: 0n });
  });

  it("accepts a call id again once its payment is no longer pending (keeping call ids unique is the gateway's job)", async () => {
    const { escrow, asSettler, collect, alice, sellerA, expectConserved } = await loadFixture(x402Fixture);
    const first = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address }, "first");
    await asSettler.write.completeX402([first.callId, (await collect(alice, first)).pending]);
    const again = { ...buildX402Payment({ from: alice.account.address, seller: sellerA.account.address }, "again"), callId: first.callId };
    const { pending } = await collect(alice, again);
    expect(await escrow.read.x402Pending([first.callId])).to.equal(hashX402Pending(pending));
    await expectConserved({ pendingMicros: 250_000n });
  });

  describe("rejections", () => {
    it("rejects callers without SETTLER_ROLE with AccessControlUnauthorizedAccount(caller, role), even the payer", async () => {
      const { escrowAs, sign, alice, sellerA, outsider, expectConserved } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address });
      const signature = await sign(alice, payment);
      for (const caller of [outsider, alice, sellerA]) {
        await expectRevert((await escrowAs(caller)).write.collectX402([payment, signature]), "AccessControlUnauthorizedAccount", [
          caller.account.address,
          SETTLER_ROLE,
        ]);
      }
      await expectConserved({ pendingMicros: 0n });
    });

    it("cannot collect one authorization twice, not even after a refund: the replay reverts with ERC3009UsedAuthorization", async () => {
      const { usdc, escrow, asSettler, sign, collect, alice, sellerA, sellerB, expectConserved } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address });
      const signature = await sign(alice, payment);
      const { pending } = await collect(alice, payment);
      // Replayed under a new call id (as is, the call id's pending payment answers first; see the order below), or
      // re-addressed to another seller: the token's nonce is spent either way.
      const replays = [
        { ...payment, callId: payment.nonce },
        { ...payment, seller: sellerB.account.address, callId: keccak256(toHex("re-addressed")) },
      ];
      const expectReplaysRefused = async () => {
        for (const replay of replays) {
          await expectRevert(
            asSettler.write.collectX402([replay, signature]),
            "ERC3009UsedAuthorization",
            [alice.account.address, payment.nonce],
            [usdc.abi],
          );
        }
      };
      await expectReplaysRefused();
      expect(await tokenBalance(usdc, escrow.address)).to.equal(250_000n);
      await expectConserved({ pendingMicros: 250_000n });

      // A refund gives the money back, not the authorization: it stays spent.
      await asSettler.write.refundX402([payment.callId, pending]);
      await expectReplaysRefused();
      expect(await tokenBalance(usdc, escrow.address)).to.equal(0n);
      await expectConserved({ pendingMicros: 0n });
    });

    it("rejects a payment that is not what the payer signed with the token's ERC3009InvalidSignature", async () => {
      const { usdc, asSettler, sign, alice, bob, sellerA, expectConserved } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address });
      const forgeries: [string, Hex, X402Payment][] = [
        ["signed by someone else than `from`", await sign(bob, payment), payment],
        ["a larger value than signed", await sign(alice, payment), { ...payment, value: payment.value + 1n }],
        ["a smaller value than signed", await sign(alice, payment), { ...payment, value: payment.value - 1n, platformFee: 0n }],
        ["signed to pay the seller, not the escrow", await sign(alice, payment, { to: sellerA.account.address }), payment],
        ["a later expiry than signed", await sign(alice, payment), { ...payment, validBefore: payment.validBefore + 1n }],
        // Why the escrow uses transferWithAuthorization: x402 clients never sign this type.
        ["a ReceiveWithAuthorization signature", await sign(alice, payment, { primaryType: "ReceiveWithAuthorization" }), payment],
      ];
      for (const [what, signature, sent] of forgeries) {
        await expectRevert(asSettler.write.collectX402([sent, signature]), "ERC3009InvalidSignature", [], [usdc.abi]).catch(
          (error: Error) => {
            throw new Error(`${what}: ${error.message}`);
          },
        );
      }
      await expectConserved({ pendingMicros: 0n });
    });

    it("rejects an authorization outside its validity window with ERC3009InvalidAuthorizationTime(validAfter, validBefore)", async () => {
      const { usdc, asSettler, sign, alice, sellerA, expectConserved } = await loadFixture(x402Fixture);
      // Each window relative to the block time of the transaction that tries it (a reverted one still mines a block).
      const windows = [
        { label: "expired", validAfter: () => 0n, validBefore: (t: bigint) => t - 1n },
        { label: "expiring this very second (validBefore is exclusive)", validAfter: () => 0n, validBefore: (t: bigint) => t },
        { label: "not yet valid", validAfter: (t: bigint) => t + 60n, validBefore: (t: bigint) => t + 3600n },
        {
          label: "valid from this very second (validAfter is exclusive)",
          validAfter: (t: bigint) => t,
          validBefore: (t: bigint) => t + 3600n,
        },
      ];
      for (const { label, validAfter, validBefore } of windows) {
        const txTimeSec = BigInt(await time.latest()) + 100n;
        const window = { validAfter: validAfter(txTimeSec), validBefore: validBefore(txTimeSec) };
        const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, ...window }, label);
        const signature = await sign(alice, payment);
        await time.setNextBlockTimestamp(txTimeSec);
        await expectRevert(
          asSettler.write.collectX402([payment, signature]),
          "ERC3009InvalidAuthorizationTime",
          [window.validAfter, window.validBefore],
          [usdc.abi],
        );
      }
      // The control: one second inside the window on both sides is collected.
      const txTimeSec = BigInt(await time.latest()) + 100n;
      const inside = buildX402Payment(
        { from: alice.account.address, seller: sellerA.account.address, validAfter: txTimeSec - 1n, validBefore: txTimeSec + 1n },
        "inside",
      );
      const signature = await sign(alice, inside);
      await time.setNextBlockTimestamp(txTimeSec);
      await asSettler.write.collectX402([inside, signature]);
      await expectConserved({ pendingMicros: 250_000n });
    });

    it("rejects an authorization the payer cancelled before collection with ERC3009UsedAuthorization", async () => {
      const { usdc, asSettler, sign, chainId, alice, sellerA, expectConserved } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address });
      const signature = await sign(alice, payment);
      const cancel = splitSignature(await signCancelAuthorization(alice, usdc.address, chainId, payment.nonce));
      await usdc.write.cancelAuthorization([alice.account.address, payment.nonce, cancel.v, cancel.r, cancel.s]);
      await expectRevert(
        asSettler.write.collectX402([payment, signature]),
        "ERC3009UsedAuthorization",
        [alice.account.address, payment.nonce],
        [usdc.abi],
      );
      await expectConserved({ pendingMicros: 0n });
    });

    it("rejects a payer who no longer holds the value with the token's ERC20InsufficientBalance(from, balance, needed)", async () => {
      const { usdc, asSettler, sign, alice, sellerA, expectConserved } = await loadFixture(x402Fixture);
      const wallet = await hre.viem.deployContract("OwnedSignatureWallet", [alice.account.address]);
      await usdc.write.mint([wallet.address, 100_000n]);
      const payment = buildX402Payment({ from: wallet.address, seller: sellerA.account.address, value: 100_001n });
      await expectRevert(
        asSettler.write.collectX402([payment, await sign(alice, payment)]),
        "ERC20InsufficientBalance",
        [wallet.address, 100_000n, 100_001n],
        [usdc.abi],
      );
      await expectConserved({ pendingMicros: 0n });
    });

    it("rejects a fee above the value with EscrowFeeExceedsAmount(platformFee, amount)", async () => {
      const { asSettler, sign, alice, sellerA } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, platformFee: 250_001n });
      await expectRevert(asSettler.write.collectX402([payment, await sign(alice, payment)]), "EscrowFeeExceedsAmount", [
        250_001n,
        250_000n,
      ]);
    });

    it("rejects a zero value with EscrowZeroAmount", async () => {
      const { asSettler, sign, alice, sellerA } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, value: 0n });
      await expectRevert(asSettler.write.collectX402([payment, await sign(alice, payment)]), "EscrowZeroAmount");
    });

    it("rejects the zero address and the escrow itself as the seller with EscrowInvalidAccount(seller)", async () => {
      const { escrow, asSettler, sign, alice } = await loadFixture(x402Fixture);
      for (const seller of [zeroAddress, escrow.address] as Address[]) {
        const payment = buildX402Payment({ from: alice.account.address, seller });
        await expectRevert(asSettler.write.collectX402([payment, await sign(alice, payment)]), "EscrowInvalidAccount", [seller]);
      }
    });

    it("rejects a call id that already has a pending payment with EscrowX402PaymentExists(callId), pulling nothing", async () => {
      const { usdc, escrow, asSettler, sign, collect, alice, bob, sellerA, sellerB, expectConserved } = await loadFixture(x402Fixture);
      const first = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address }, "first");
      const { pending } = await collect(alice, first);
      const bobBefore = await tokenBalance(usdc, bob.account.address);
      // Another payer's fresh authorization, another seller, another value: the call id alone decides.
      const second = {
        ...buildX402Payment({ from: bob.account.address, seller: sellerB.account.address, value: 400_000n }, "second"),
        callId: first.callId,
      };
      await expectRevert(asSettler.write.collectX402([second, await sign(bob, second)]), "EscrowX402PaymentExists", [first.callId]);
      expect(await tokenBalance(usdc, bob.account.address), "the second payer keeps its money").to.equal(bobBefore);
      expect(await usdc.read.authorizationState([bob.account.address, second.nonce]), "and its authorization").to.equal(false);
      expect(await escrow.read.x402Pending([first.callId]), "the first payment stays as collected").to.equal(hashX402Pending(pending));
      await expectConserved({ pendingMicros: 250_000n });
    });

    it("checks in the documented order: zero value, seller, fee, pending call id, then the token", async () => {
      const { usdc, escrow, asSettler, sign, collect, alice, sellerA } = await loadFixture(x402Fixture);
      const taken = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address }, "taken");
      await collect(alice, taken);
      const base = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address }, "ordered");
      // Each row breaks its own check and every check after it; the first broken check must answer.
      const spent = { nonce: taken.nonce };
      const pendingCallId = { callId: taken.callId };
      const rows: [string, X402Payment, string, readonly unknown[]][] = [
        ["zero value", { ...base, ...spent, ...pendingCallId, value: 0n, seller: zeroAddress, platformFee: 1n }, "EscrowZeroAmount", []],
        [
          "seller",
          { ...base, ...spent, ...pendingCallId, seller: escrow.address, platformFee: base.value + 1n },
          "EscrowInvalidAccount",
          [escrow.address],
        ],
        [
          "fee",
          { ...base, ...spent, ...pendingCallId, platformFee: base.value + 1n },
          "EscrowFeeExceedsAmount",
          [base.value + 1n, base.value],
        ],
        ["pending call id", { ...base, ...spent, ...pendingCallId }, "EscrowX402PaymentExists", [taken.callId]],
        ["the token", { ...base, ...spent }, "ERC3009UsedAuthorization", [alice.account.address, taken.nonce]],
      ];
      for (const [check, payment, errorName, args] of rows) {
        await expectRevert(asSettler.write.collectX402([payment, await sign(alice, payment)]), errorName, args, [usdc.abi]).catch(
          (error: Error) => {
            throw new Error(`${check}: ${error.message}`);
          },
        );
      }
    });
  });
});
