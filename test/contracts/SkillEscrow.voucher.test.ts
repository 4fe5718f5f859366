import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import { hashTypedData, recoverTypedDataAddress, zeroAddress, type Hex } from "viem";
import { expectRevert } from "./helpers/errors";
import { expectEvents } from "./helpers/events";
import { STARTING_WALLET_USDC, USDC, VOUCHER_SIGNER_ROLE, deployEscrowFixture, escrowBalance, tokenBalance } from "./helpers/fixtures";
import { signVoucher, type Voucher } from "./helpers/signatures";

const VOUCHER_TYPES = {
  Voucher: [
    { name: "account", type: "address" },
    { name: "amount", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
} as const;

/** Alice holds 100 USDC in the escrow; `voucher()` builds one for her that is valid for an hour. */
async function voucherFixture() {
  const fixture = await deployEscrowFixture();
  await (await fixture.escrowAs(fixture.alice)).write.deposit([100n * USDC]);
  const now = (await fixture.publicClient.getBlock()).timestamp;
  const voucher = (overrides: Partial<Voucher> = {}): Voucher => ({
    account: fixture.alice.account.address,
    amount: 30n * USDC,
    nonce: 1n,
    deadline: now + 3600n,
    ...overrides,
  });
  const sign = (v: Voucher, signer = fixture.voucherSigner) => signVoucher(signer, fixture.escrow.address, fixture.chainId, v);
  return { ...fixture, voucher, sign };
}

describe("SkillEscrow withdrawWithVoucher(voucher, signature)", () => {
  it("pays the account at once, consumes the nonce and emits VoucherRedeemed", async () => {
    const { escrow, usdc, alice, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
    const v = voucher();
    const hash = await (await escrowAs(alice)).write.withdrawWithVoucher([v, await sign(v)]);
    await expectEvents(hash, escrow, "VoucherRedeemed", [
      { account: alice.account.address, nonce: 1n, amount: 30n * USDC, balance: 70n * USDC },
    ]);
    expect(await escrowBalance(escrow, alice.account.address)).to.equal(70n * USDC);
    expect(await tokenBalance(usdc, alice.account.address)).to.equal(STARTING_WALLET_USDC - 70n * USDC);
    expect(await escrow.read.voucherNonceUsed([alice.account.address, 1n])).to.equal(true);
  });

  it("pays the account, not the submitter, when a relayer submits the voucher", async () => {
    const { escrow, usdc, alice, outsider, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
    const v = voucher();
    await (await escrowAs(outsider)).write.withdrawWithVoucher([v, await sign(v)]);
    expect(await tokenBalance(usdc, outsider.account.address)).to.equal(0n);
    expect(await tokenBalance(usdc, alice.account.address)).to.equal(STARTING_WALLET_USDC - 70n * USDC);
    expect(await escrowBalance(escrow, alice.account.address)).to.equal(70n * USDC);
  });

  it("accepts a voucher in the block of its deadline", async () => {
    const { escrow, alice, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
    const v = voucher();
    await time.setNextBlockTimestamp(v.deadline);
    await (await escrowAs(alice)).write.withdrawWithVoucher([v, await sign(v)]);
    expect(await escrowBalance(escrow, alice.account.address)).to.equal(70n * USDC);
  });

  it("works while deposits are paused", async () => {
    const { escrow, alice, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
    await escrow.write.pauseDeposits();
    const v = voucher();
    await (await escrowAs(alice)).write.withdrawWithVoucher([v, await sign(v)]);
    expect(await escrowBalance(escrow, alice.account.address)).to.equal(70n * USDC);
  });

  it("signs the digest hashVoucher reports (the EIP-712 domain is SkillEscrow / 1 / this chain)", async () => {
    const { escrow, chainId, voucher } = await loadFixture(voucherFixture);
    const v = voucher();
    const expected = hashTypedData({
      domain: { name: "SkillEscrow", version: "1", chainId, verifyingContract: escrow.address },
      types: VOUCHER_TYPES,
      primaryType: "Voucher",
      message: v,
    });
    expect(await escrow.read.hashVoucher([v])).to.equal(expected);
  });

  describe("rejections", () => {
    it("cannot be used twice: EscrowVoucherNonceUsed(account, nonce)", async () => {
      const { alice, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
      const v = voucher({ amount: 10n * USDC });
      const signature = await sign(v);
      const asAlice = await escrowAs(alice);
      await asAlice.write.withdrawWithVoucher([v, signature]);
      await expectRevert(asAlice.write.withdrawWithVoucher([v, signature]), "EscrowVoucherNonceUsed", [alice.account.address, 1n]);
      // Another voucher with the same nonce is just as dead.
      const other = voucher({ amount: 5n * USDC });
      await expectRevert(asAlice.write.withdrawWithVoucher([other, await sign(other)]), "EscrowVoucherNonceUsed", [
        alice.account.address,
        1n,
      ]);
    });

    it("rejects a voucher after its deadline with EscrowVoucherExpired(deadline, timestamp)", async () => {
      const { alice, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
      const v = voucher();
      const signature = await sign(v);
      await time.setNextBlockTimestamp(v.deadline + 1n);
      await expectRevert((await escrowAs(alice)).write.withdrawWithVoucher([v, signature]), "EscrowVoucherExpired", [
        v.deadline,
        v.deadline + 1n,
      ]);
    });

    it("rejects a voucher signed without VOUCHER_SIGNER_ROLE with EscrowInvalidVoucherSigner(signer)", async () => {
      const { alice, settler, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
      const v = voucher();
      await expectRevert((await escrowAs(alice)).write.withdrawWithVoucher([v, await sign(v, settler)]), "EscrowInvalidVoucherSigner", [
        settler.account.address,
      ]);
      // The account cannot sign its own way out either.
      await expectRevert((await escrowAs(alice)).write.withdrawWithVoucher([v, await sign(v, alice)]), "EscrowInvalidVoucherSigner", [
        alice.account.address,
      ]);
    });

    it("stops accepting a signer's vouchers once its role is revoked", async () => {
      const { escrow, alice, voucherSigner, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
      const v = voucher();
      const signature = await sign(v);
      await escrow.write.revokeRole([VOUCHER_SIGNER_ROLE, voucherSigner.account.address]);
      await expectRevert((await escrowAs(alice)).write.withdrawWithVoucher([v, signature]), "EscrowInvalidVoucherSigner", [
        voucherSigner.account.address,
      ]);
    });

    it("rejects a voucher whose amount was raised after signing (the signature recovers another address)", async () => {
      const { escrow, chainId, alice, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
      const signed = voucher();
      const signature = await sign(signed);
      const tampered = { ...signed, amount: 100n * USDC };
      const recovered = await recoverTypedDataAddress({
        domain: { name: "SkillEscrow", version: "1", chainId, verifyingContract: escrow.address },
        types: VOUCHER_TYPES,
        primaryType: "Voucher",
        message: tampered,
        signature,
      });
      await expectRevert((await escrowAs(alice)).write.withdrawWithVoucher([tampered, signature]), "EscrowInvalidVoucherSigner", [
        recovered,
      ]);
    });

    it("rejects a malformed signature with EscrowInvalidVoucherSigner(0)", async () => {
      const { alice, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
      const v = voucher();
      const truncated = (await sign(v)).slice(0, 2 + 64 * 2) as Hex;
      await expectRevert((await escrowAs(alice)).write.withdrawWithVoucher([v, truncated]), "EscrowInvalidVoucherSigner", [zeroAddress]);
    });

    it("rejects a zero amount with EscrowZeroAmount", async () => {
      const { alice, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
      const v = voucher({ amount: 0n });
      await expectRevert((await escrowAs(alice)).write.withdrawWithVoucher([v, await sign(v)]), "EscrowZeroAmount");
    });

    it("never pays more than the balance: EscrowInsufficientBalance, and the nonce stays usable", async () => {
      const { escrow, alice, voucher, sign, escrowAs } = await loadFixture(voucherFixture);
      const v = voucher({ amount: 100n * USDC + 1n });
      const signature = await sign(v);
      const asAlice = await escrowAs(alice);
      await expectRevert(asAlice.write.withdrawWithVoucher([v, signature]), "EscrowInsufficientBalance", [
        alice.account.address,
        100n * USDC,
        100n * USDC + 1n,
      ]);
      expect(await escrow.read.voucherNonceUsed([alice.account.address, 1n])).to.equal(false);
      await asAlice.write.deposit([USDC]);
      await asAlice.write.withdrawWithVoucher([v, signature]);
      expect(await escrowBalance(escrow, alice.account.address)).to.equal(USDC - 1n);
    });
  });
});
