import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import hre from "hardhat";
import { getAddress, keccak256, maxUint256, toHex, type Hex } from "viem";
import { decodeRevert, expectRevert } from "./helpers/errors";
import { expectEvents } from "./helpers/events";
import { USDC, tokenBalance } from "./helpers/fixtures";
import { signAuthorization, signCancelAuthorization, signPermit, splitSignature, type TransferAuthorization } from "./helpers/signatures";

async function tokenFixture() {
  const [owner, alice, bob, relayer] = await hre.viem.getWalletClients();
  const publicClient = await hre.viem.getPublicClient();
  const chainId = await publicClient.getChainId();
  const usdc = await hre.viem.deployContract("TestUSDC", [owner.account.address]);
  await usdc.write.mint([alice.account.address, 100n * USDC]);
  const as = async (wallet: typeof owner) => hre.viem.getContractAt("TestUSDC", usdc.address, { client: { wallet } });
  const now = BigInt(await time.latest());
  const authorization = (overrides: Partial<TransferAuthorization> = {}): TransferAuthorization => ({
    from: alice.account.address,
    to: bob.account.address,
    value: 10n * USDC,
    validAfter: 0n,
    validBefore: now + 3600n,
    nonce: keccak256(toHex("nonce-1")),
    ...overrides,
  });
  return { usdc, owner, alice, bob, relayer, chainId, as, authorization, now };
}

describe("TestUSDC", () => {
  it("looks like USDC on Base: name, symbol, 6 decimals, EIP-712 domain USD Coin / 2", async () => {
    const { usdc, chainId } = await loadFixture(tokenFixture);
    expect(await usdc.read.name()).to.equal("USD Coin");
    expect(await usdc.read.symbol()).to.equal("USDC");
    expect(await usdc.read.decimals()).to.equal(6);
    const [, name, version, domainChainId] = (await usdc.read.eip712Domain()) as readonly unknown[];
    expect([name, version, domainChainId]).to.deep.equal(["USD Coin", "2", BigInt(chainId)]);
  });

  describe("mint(to, amount)", () => {
    it("lets the owner mint", async () => {
      const { usdc, bob } = await loadFixture(tokenFixture);
      await usdc.write.mint([bob.account.address, 5n]);
      expect(await tokenBalance(usdc, bob.account.address)).to.equal(5n);
    });

    it("rejects anyone else with OwnableUnauthorizedAccount(caller)", async () => {
      const { alice, as } = await loadFixture(tokenFixture);
      await expectRevert((await as(alice)).write.mint([alice.account.address, 1n]), "OwnableUnauthorizedAccount", [alice.account.address]);
    });
  });

  describe("permit (EIP-2612)", () => {
    it("sets the allowance from the owner's signature and bumps the nonce", async () => {
      const { usdc, alice, bob, relayer, chainId, as, now } = await loadFixture(tokenFixture);
      const deadline = now + 600n;
      const { v, r, s } = await signPermit(alice, usdc.address, chainId, {
        spender: bob.account.address,
        value: maxUint256,
        nonce: 0n,
        deadline,
      });
      await (await as(relayer)).write.permit([alice.account.address, bob.account.address, maxUint256, deadline, v, r, s]);
      expect(await usdc.read.allowance([alice.account.address, bob.account.address])).to.equal(maxUint256);
      expect(await usdc.read.nonces([alice.account.address])).to.equal(1n);
    });

    it("rejects an expired permit with ERC2612ExpiredSignature(deadline)", async () => {
      const { usdc, alice, bob, chainId, now } = await loadFixture(tokenFixture);
      const deadline = now - 1n;
      const { v, r, s } = await signPermit(alice, usdc.address, chainId, {
        spender: bob.account.address,
        value: 1n,
        nonce: 0n,
        deadline,
      });
      await expectRevert(
        usdc.write.permit([alice.account.address, bob.account.address, 1n, deadline, v, r, s]),
        "ERC2612ExpiredSignature",
        [deadline],
      );
    });

    it("rejects another signer with ERC2612InvalidSigner(signer, owner)", async () => {
      const { usdc, alice, bob, chainId, now } = await loadFixture(tokenFixture);
      const deadline = now + 600n;
      const { v, r, s } = await signPermit(bob, usdc.address, chainId, {
        owner: alice.account.address,
        spender: bob.account.address,
        value: 1n,
        nonce: 0n,
        deadline,
      });
      // Bob's signature over a permit that names Alice as owner recovers to Bob.
      const error = await usdc.write.permit([alice.account.address, bob.account.address, 1n, deadline, v, r, s]).then(
        () => expect.fail("permit with a foreign signature succeeded"),
        (e: unknown) => e,
      );
      const decoded = decodeRevert(error);
      expect(decoded.errorName).to.equal("ERC2612InvalidSigner");
      expect(decoded.args.map((a) => getAddress(a as string))).to.deep.equal([
        getAddress(bob.account.address),
        getAddress(alice.account.address),
      ]);
    });
  });

  describe("transferWithAuthorization (EIP-3009)", () => {
    it("moves the funds on the payer's signature, submitted by anyone, and marks the nonce used", async () => {
      const { usdc, alice, bob, relayer, chainId, as, authorization } = await loadFixture(tokenFixture);
      const auth = authorization();
      const { v, r, s } = splitSignature(await signAuthorization(alice, usdc.address, chainId, "TransferWithAuthorization", auth));
      const hash = await (
        await as(relayer)
      ).write.transferWithAuthorization([auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, v, r, s]);
      await expectEvents(hash, usdc, "AuthorizationUsed", [{ authorizer: alice.account.address, nonce: auth.nonce }]);
      expect(await tokenBalance(usdc, bob.account.address)).to.equal(10n * USDC);
      expect(await tokenBalance(usdc, alice.account.address)).to.equal(90n * USDC);
      expect(await usdc.read.authorizationState([alice.account.address, auth.nonce])).to.equal(true);
    });

    it("accepts the bytes-signature overload", async () => {
      const { usdc, alice, bob, chainId, authorization } = await loadFixture(tokenFixture);
      const auth = authorization();
      const signature = await signAuthorization(alice, usdc.address, chainId, "TransferWithAuthorization", auth);
      await usdc.write.transferWithAuthorization([
        auth.from,
        auth.to,
        auth.value,
        auth.validAfter,
        auth.validBefore,
        auth.nonce,
        signature,
      ]);
      expect(await tokenBalance(usdc, bob.account.address)).to.equal(10n * USDC);
    });

    it("rejects a replay with ERC3009UsedAuthorization(from, nonce)", async () => {
      const { usdc, alice, chainId, authorization } = await loadFixture(tokenFixture);
      const auth = authorization();
      const signature = await signAuthorization(alice, usdc.address, chainId, "TransferWithAuthorization", auth);
      const args = [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, signature] as const;
      await usdc.write.transferWithAuthorization([...args]);
      await expectRevert(usdc.write.transferWithAuthorization([...args]), "ERC3009UsedAuthorization", [alice.account.address, auth.nonce]);
    });

    it("rejects a signature by someone other than `from` with ERC3009InvalidSignature", async () => {
      const { usdc, bob, chainId, authorization } = await loadFixture(tokenFixture);
      const auth = authorization();
      const { v, r, s } = splitSignature(await signAuthorization(bob, usdc.address, chainId, "TransferWithAuthorization", auth));
      await expectRevert(
        usdc.write.transferWithAuthorization([auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, v, r, s]),
        "ERC3009InvalidSignature",
      );
    });

    it("rejects use outside the validity window with ERC3009InvalidAuthorizationTime(validAfter, validBefore)", async () => {
      const { usdc, alice, chainId, authorization, now } = await loadFixture(tokenFixture);
      for (const window of [
        { validAfter: now + 1000n, validBefore: now + 2000n },
        { validAfter: 0n, validBefore: now },
      ]) {
        const auth = authorization(window);
        const signature = await signAuthorization(alice, usdc.address, chainId, "TransferWithAuthorization", auth);
        await expectRevert(
          usdc.write.transferWithAuthorization([auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, signature]),
          "ERC3009InvalidAuthorizationTime",
          [window.validAfter, window.validBefore],
        );
      }
    });
  });

  describe("receiveWithAuthorization (EIP-3009)", () => {
    it("lets the payee pull the funds", async () => {
      const { usdc, alice, bob, chainId, as, authorization } = await loadFixture(tokenFixture);
      const auth = authorization();
      const { v, r, s } = splitSignature(await signAuthorization(alice, usdc.address, chainId, "ReceiveWithAuthorization", auth));
      const args = [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, v, r, s] as const;
      await (await as(bob)).write.receiveWithAuthorization([...args]);
      expect(await tokenBalance(usdc, bob.account.address)).to.equal(10n * USDC);
    });

    it("rejects any caller but the payee with ERC20InvalidReceiver(to)", async () => {
      const { usdc, alice, bob, relayer, chainId, as, authorization } = await loadFixture(tokenFixture);
      const auth = authorization();
      const { v, r, s } = splitSignature(await signAuthorization(alice, usdc.address, chainId, "ReceiveWithAuthorization", auth));
      const args = [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, v, r, s] as const;
      await expectRevert((await as(relayer)).write.receiveWithAuthorization([...args]), "ERC20InvalidReceiver", [bob.account.address]);
    });
  });

  describe("cancelAuthorization (EIP-3009)", () => {
    it("burns the nonce so the authorization can no longer be used", async () => {
      const { usdc, alice, chainId, authorization } = await loadFixture(tokenFixture);
      const auth = authorization();
      const cancel = splitSignature(await signCancelAuthorization(alice, usdc.address, chainId, auth.nonce));
      const hash = await usdc.write.cancelAuthorization([alice.account.address, auth.nonce, cancel.v, cancel.r, cancel.s]);
      await expectEvents(hash, usdc, "AuthorizationCanceled", [{ authorizer: alice.account.address, nonce: auth.nonce }]);
      const signature: Hex = await signAuthorization(alice, usdc.address, chainId, "TransferWithAuthorization", auth);
      await expectRevert(
        usdc.write.transferWithAuthorization([auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, signature]),
        "ERC3009UsedAuthorization",
        [alice.account.address, auth.nonce],
      );
    });
  });
});
