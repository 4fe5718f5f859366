import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { ExactEvmScheme } from "@x402/evm";
import { expect } from "chai";
import hre from "hardhat";
import { getAddress, zeroAddress, type Abi, type Address, type Hex } from "viem";
import { buildBatch, feeOf } from "./helpers/batch";
import { expectRevert } from "./helpers/errors";
import { expectEvents } from "./helpers/events";
import { SETTLER_ROLE, USDC, deployEscrowFixture, earningsOf, escrowBalance, tokenBalance, type Contract } from "./helpers/fixtures";
import { splitSignature, signCancelAuthorization } from "./helpers/signatures";
import { buildX402Payment, signX402Payment, type X402Payment } from "./helpers/x402";

/** The escrow fixture with the settler's handle and a signer of x402 payments to this escrow. */
async function x402Fixture() {
  const fixture = await deployEscrowFixture();
  const { usdc, escrow, chainId } = fixture;
  const sign = (signer: Parameters<typeof signX402Payment>[0], payment: X402Payment, forged?: Parameters<typeof signX402Payment>[5]) =>
    signX402Payment(signer, usdc.address, chainId, escrow.address, payment, forged);
  return { ...fixture, asSettler: await fixture.escrowAs(fixture.settler), sign };
}

/** What the escrow holds against what it owes: the invariant every test here ends by checking. */
async function holdingsAndDebts(usdc: Contract, escrow: Contract, accounts: Address[], earners: Address[]) {
  const holdings = await tokenBalance(usdc, escrow.address);
  let owed = 0n;
  for (const account of accounts) owed += await escrowBalance(escrow, account);
  for (const earner of earners) owed += await earningsOf(escrow, earner);
  return { holdings, owed };
}

describe("SkillEscrow settleX402(payment, signature)", () => {
  it("pulls the payer's USDC into the escrow, credits the seller and the treasury exactly, and emits X402Settled", async () => {
    const { usdc, escrow, asSettler, sign, alice, sellerA, treasury, users, sellers } = await loadFixture(x402Fixture);
    const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, value: 250_000n });
    const signature = await sign(alice, payment);
    const walletBefore = await tokenBalance(usdc, alice.account.address);

    const hash = await asSettler.write.settleX402([payment, signature]);

    expect(await tokenBalance(usdc, alice.account.address)).to.equal(walletBefore - 250_000n);
    expect(await tokenBalance(usdc, escrow.address)).to.equal(250_000n);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(225_000n);
    expect(await earningsOf(escrow, treasury.account.address)).to.equal(25_000n);
    expect(await escrowBalance(escrow, alice.account.address), "x402 never touches an escrowed balance").to.equal(0n);
    expect(await usdc.read.authorizationState([alice.account.address, payment.nonce])).to.equal(true);
    await expectEvents(hash, escrow, "X402Settled", [
      {
        callId: payment.callId,
        payer: alice.account.address,
        seller: sellerA.account.address,
        amount: 250_000n,
        platformFee: 25_000n,
        treasury: treasury.account.address,
      },
    ]);
    const earners = [...sellers, treasury].map((w) => w.account.address);
    const { holdings, owed } = await holdingsAndDebts(
      usdc,
      escrow,
      users.map((w) => w.account.address),
      earners,
    );
    expect(holdings, "escrow USDC = balances + earnings").to.equal(owed);
  });

  it("pays x402 revenue out through the same claim() as batch revenue, leaving the escrow holding only balances", async () => {
    const { usdc, escrow, asSettler, escrowAs, sign, alice, bob, sellerA, treasury } = await loadFixture(x402Fixture);
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
    await asSettler.write.settleX402([payment, await sign(bob, payment)]);
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
  });

  it("settles the authorization the real @x402/evm exact client signs for payTo = the escrow", async () => {
    const { usdc, escrow, asSettler, chainId, alice, sellerA } = await loadFixture(x402Fixture);
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

    await asSettler.write.settleX402([payment, signature]);
    expect(await tokenBalance(usdc, escrow.address)).to.equal(123_456n);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(123_456n - feeOf(123_456n));
  });

  it("accepts an ERC-1271 smart-wallet payer", async () => {
    const { usdc, escrow, asSettler, sign, alice, sellerA, treasury } = await loadFixture(x402Fixture);
    const wallet = await hre.viem.deployContract("OwnedSignatureWallet", [alice.account.address]);
    await usdc.write.mint([wallet.address, 5n * USDC]);
    const payment = buildX402Payment({ from: wallet.address, seller: sellerA.account.address, value: USDC });
    // The wallet's owner signs the token's EIP-712 digest; the token asks the wallet (ERC-1271) whether it is valid.
    await asSettler.write.settleX402([payment, await sign(alice, payment)]);
    expect(await tokenBalance(usdc, wallet.address)).to.equal(4n * USDC);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(900_000n);
    expect(await earningsOf(escrow, treasury.account.address)).to.equal(100_000n);
  });

  it("keeps settling while deposits are paused", async () => {
    const { escrow, asSettler, sign, alice, sellerA } = await loadFixture(x402Fixture);
    await escrow.write.pauseDeposits();
    const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address });
    await asSettler.write.settleX402([payment, await sign(alice, payment)]);
    expect(await earningsOf(escrow, sellerA.account.address)).to.equal(225_000n);
  });

  it("credits everything to the seller with a zero fee, and everything to the treasury with a fee of the whole value", async () => {
    const { escrow, asSettler, sign, alice, sellerA, sellerB, treasury } = await loadFixture(x402Fixture);
    const noFee = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, platformFee: 0n }, "no fee");
    const allFee = buildX402Payment(
      { from: alice.account.address, seller: sellerB.account.address, platformFee: 250_000n, value: 250_000n },
      "all fee",
    );
    await asSettler.write.settleX402([noFee, await sign(alice, noFee)]);
    const hash = await asSettler.write.settleX402([allFee, await sign(alice, allFee)]);
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
  });

  it("credits the fee to the treasury current at settlement", async () => {
    const { escrow, asSettler, sign, alice, sellerA, outsider } = await loadFixture(x402Fixture);
    await escrow.write.setTreasury([outsider.account.address]);
    const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address });
    await asSettler.write.settleX402([payment, await sign(alice, payment)]);
    expect(await earningsOf(escrow, outsider.account.address)).to.equal(25_000n);
  });

  describe("rejections", () => {
    it("rejects callers without SETTLER_ROLE with AccessControlUnauthorizedAccount(caller, role), even the payer", async () => {
      const { escrowAs, sign, alice, sellerA, outsider } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address });
      const signature = await sign(alice, payment);
      for (const caller of [outsider, alice, sellerA]) {
        await expectRevert((await escrowAs(caller)).write.settleX402([payment, signature]), "AccessControlUnauthorizedAccount", [
          caller.account.address,
          SETTLER_ROLE,
        ]);
      }
    });

    it("cannot settle one authorization twice: the replay reverts with the token's ERC3009UsedAuthorization", async () => {
      const { usdc, escrow, asSettler, sign, alice, sellerA, sellerB } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address });
      const signature = await sign(alice, payment);
      await asSettler.write.settleX402([payment, signature]);
      // Replayed as is, or re-addressed to another seller under a new call id: the token's nonce is spent either way.
      for (const replay of [payment, { ...payment, seller: sellerB.account.address, callId: payment.nonce }]) {
        await expectRevert(
          asSettler.write.settleX402([replay, signature]),
          "ERC3009UsedAuthorization",
          [alice.account.address, payment.nonce],
          [usdc.abi],
        );
      }
      expect(await tokenBalance(usdc, escrow.address)).to.equal(250_000n);
      expect(await earningsOf(escrow, sellerA.account.address)).to.equal(225_000n);
      expect(await earningsOf(escrow, sellerB.account.address)).to.equal(0n);
    });

    it("rejects a payment that is not what the payer signed with the token's ERC3009InvalidSignature", async () => {
      const { usdc, asSettler, sign, alice, bob, sellerA } = await loadFixture(x402Fixture);
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
        await expectRevert(asSettler.write.settleX402([sent, signature]), "ERC3009InvalidSignature", [], [usdc.abi]).catch(
          (error: Error) => {
            throw new Error(`${what}: ${error.message}`);
          },
        );
      }
    });

    it("rejects an authorization outside its validity window with ERC3009InvalidAuthorizationTime(validAfter, validBefore)", async () => {
      const { usdc, asSettler, sign, alice, sellerA } = await loadFixture(x402Fixture);
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
          asSettler.write.settleX402([payment, signature]),
          "ERC3009InvalidAuthorizationTime",
          [window.validAfter, window.validBefore],
          [usdc.abi],
        );
      }
      // The control: one second inside the window on both sides settles.
      const txTimeSec = BigInt(await time.latest()) + 100n;
      const inside = buildX402Payment(
        { from: alice.account.address, seller: sellerA.account.address, validAfter: txTimeSec - 1n, validBefore: txTimeSec + 1n },
        "inside",
      );
      const signature = await sign(alice, inside);
      await time.setNextBlockTimestamp(txTimeSec);
      await asSettler.write.settleX402([inside, signature]);
    });

    it("rejects an authorization the payer cancelled before settlement with ERC3009UsedAuthorization", async () => {
      const { usdc, asSettler, sign, chainId, alice, sellerA } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address });
      const signature = await sign(alice, payment);
      const cancel = splitSignature(await signCancelAuthorization(alice, usdc.address, chainId, payment.nonce));
      await usdc.write.cancelAuthorization([alice.account.address, payment.nonce, cancel.v, cancel.r, cancel.s]);
      await expectRevert(
        asSettler.write.settleX402([payment, signature]),
        "ERC3009UsedAuthorization",
        [alice.account.address, payment.nonce],
        [usdc.abi],
      );
    });

    it("rejects a payer who no longer holds the value with the token's ERC20InsufficientBalance(from, balance, needed)", async () => {
      const { usdc, asSettler, sign, alice, sellerA } = await loadFixture(x402Fixture);
      const wallet = await hre.viem.deployContract("OwnedSignatureWallet", [alice.account.address]);
      await usdc.write.mint([wallet.address, 100_000n]);
      const payment = buildX402Payment({ from: wallet.address, seller: sellerA.account.address, value: 100_001n });
      await expectRevert(
        asSettler.write.settleX402([payment, await sign(alice, payment)]),
        "ERC20InsufficientBalance",
        [wallet.address, 100_000n, 100_001n],
        [usdc.abi],
      );
    });

    it("rejects a fee above the value with EscrowFeeExceedsAmount(platformFee, amount)", async () => {
      const { asSettler, sign, alice, sellerA } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, platformFee: 250_001n });
      await expectRevert(asSettler.write.settleX402([payment, await sign(alice, payment)]), "EscrowFeeExceedsAmount", [250_001n, 250_000n]);
    });

    it("rejects a zero value with EscrowZeroAmount", async () => {
      const { asSettler, sign, alice, sellerA } = await loadFixture(x402Fixture);
      const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, value: 0n });
      await expectRevert(asSettler.write.settleX402([payment, await sign(alice, payment)]), "EscrowZeroAmount");
    });

    it("rejects the zero address and the escrow itself as the seller with EscrowInvalidAccount(seller)", async () => {
      const { escrow, asSettler, sign, alice } = await loadFixture(x402Fixture);
      for (const seller of [zeroAddress, escrow.address] as Address[]) {
        const payment = buildX402Payment({ from: alice.account.address, seller });
        await expectRevert(asSettler.write.settleX402([payment, await sign(alice, payment)]), "EscrowInvalidAccount", [seller]);
      }
    });
  });

  describe("when someone submits the authorization to the token first", () => {
    it("strands the money in the escrow uncredited; the settlement reverts and credits nothing, and no one can redirect it", async () => {
      const { usdc, escrow, asSettler, usdcAs, sign, alice, sellerA, treasury, outsider, users, sellers } = await loadFixture(x402Fixture);
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
        asSettler.write.settleX402([payment, signature]),
        "ERC3009UsedAuthorization",
        [alice.account.address, nonce],
        [usdc.abi],
      );
      expect(await earningsOf(escrow, sellerA.account.address)).to.equal(0n);
      expect(await earningsOf(escrow, treasury.account.address)).to.equal(0n);
      const earners = [...sellers, treasury].map((w) => w.account.address);
      const { holdings, owed } = await holdingsAndDebts(
        usdc,
        escrow,
        users.map((w) => w.account.address),
        earners,
      );
      expect(owed, "nothing is owed for the stranded payment").to.equal(0n);
      expect(holdings - owed, "stranded in the escrow").to.equal(250_000n);
    });
  });

  describe("over a token that does not deliver exactly the value", () => {
    async function skewedFixture() {
      const [admin, settler, treasury, alice, sellerA] = await hre.viem.getWalletClients();
      const publicClient = await hre.viem.getPublicClient();
      const chainId = await publicClient.getChainId();
      const token = await hre.viem.deployContract("SkewedTransferUSDC", [admin.account.address]);
      const escrow = await hre.viem.deployContract("SkillEscrow", [token.address, admin.account.address, treasury.account.address]);
      await escrow.write.grantRole([SETTLER_ROLE, settler.account.address]);
      await token.write.mint([alice.account.address, 100n * USDC]);
      const asSettler = await hre.viem.getContractAt("SkillEscrow", escrow.address, { client: { wallet: settler } });
      const pay = async (label: string) => {
        const payment = buildX402Payment({ from: alice.account.address, seller: sellerA.account.address, value: USDC }, label);
        const signature = await signX402Payment(alice, token.address, chainId, escrow.address, payment);
        return asSettler.write.settleX402([payment, signature]);
      };
      return { token, escrow, pay, alice, sellerA, treasury };
    }

    it("settles normally while the token delivers the value (control)", async () => {
      const { token, escrow, pay, sellerA } = await loadFixture(skewedFixture);
      await pay("control");
      expect(await tokenBalance(token, escrow.address)).to.equal(USDC);
      expect(await earningsOf(escrow, sellerA.account.address)).to.equal(900_000n);
    });

    it("rejects a delivery short or long of the value with EscrowTransferShortfall(expected, received), crediting nothing", async () => {
      const { token, escrow, pay, sellerA, treasury } = await loadFixture(skewedFixture);
      for (const [skew, received] of [
        [-1n, USDC - 1n], // fee-on-transfer: one unit short
        [-USDC, 0n], // the whole value skimmed: the balance does not rise
        [1n, USDC + 1n], // a bonus: more than signed would leave USDC owed to no one
      ]) {
        await token.write.setSkew([skew]);
        await expectRevert(pay(`skew ${skew}`), "EscrowTransferShortfall", [USDC, received], [token.abi as Abi]);
      }
      expect(await tokenBalance(token, escrow.address)).to.equal(0n);
      expect(await earningsOf(escrow, sellerA.account.address)).to.equal(0n);
      expect(await earningsOf(escrow, treasury.account.address)).to.equal(0n);
    });
  });
});
