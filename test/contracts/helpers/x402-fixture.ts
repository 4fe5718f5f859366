import { expect } from "chai";
import hre from "hardhat";
import type { Address, Hash, Hex } from "viem";
import type { WalletClient } from "@nomicfoundation/hardhat-viem/types";
import { deployEscrowFixture, earningsOf, escrowBalance, tokenBalance, type Contract } from "./fixtures";
import { pendingOf, signX402Payment, type X402Payment, type X402Pending } from "./x402";

/**
 * The escrow fixture with what the x402 tests share: the settler's handle, a signer of x402 payments to this
 * escrow, `collect` and `collectSigned` (collect as the settler, and get back the pending payment the escrow
 * recorded) and
 * `expectConserved` (the money invariant). Use through `loadFixture`.
 */
export async function x402Fixture() {
  const fixture = await deployEscrowFixture();
  const { usdc, escrow, chainId, publicClient } = fixture;
  const asSettler = await fixture.escrowAs(fixture.settler);
  const sign = (signer: WalletClient, payment: X402Payment, forged?: Parameters<typeof signX402Payment>[5]) =>
    signX402Payment(signer, usdc.address, chainId, escrow.address, payment, forged);

  /** The settler collects `payment` with `signature`; returns the transaction and the pending payment it recorded. */
  const collectSigned = async (payment: X402Payment, signature: Hex): Promise<{ hash: Hash; pending: X402Pending }> => {
    const hash = await asSettler.write.collectX402([payment, signature]);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    const block = await publicClient.getBlock({ blockNumber: receipt.blockNumber });
    return { hash, pending: pendingOf(payment, block.timestamp) };
  };
  /** `payer` signs `payment` and the settler collects it, as {@link collectSigned}. */
  const collect = async (payer: WalletClient, payment: X402Payment) => collectSigned(payment, await sign(payer, payment));

  const everyone = (await hre.viem.getWalletClients()).map((wallet) => wallet.account.address);
  const expectConserved = async (expected: Conserved) => expectEscrowConserved(usdc, escrow, everyone, expected);

  return { ...fixture, asSettler, sign, collect, collectSigned, expectConserved };
}

export type X402Fixture = Awaited<ReturnType<typeof x402Fixture>>;

/** What a test expects the escrow to hold beside balances and earnings. */
export type Conserved = {
  /** The sum of the values of the payments still pending: what x402PendingTotal must read. */
  pendingMicros: bigint;
  /** USDC that reached the escrow outside its functions (owed to no one); zero unless a test put some there. */
  strandedMicros?: bigint;
};

/**
 * The escrow's invariant, with which every x402 test ends: its USDC equals the sum of all balances, all earnings
 * and x402PendingTotal (plus what was stranded there on purpose), and x402PendingTotal is what the test expects.
 * `holders` must list everyone who may hold a balance or earnings.
 */
export async function expectEscrowConserved(token: Contract, escrow: Contract, holders: Address[], expected: Conserved): Promise<void> {
  const holdings = await tokenBalance(token, escrow.address);
  let owed = 0n;
  for (const holder of holders) owed += (await escrowBalance(escrow, holder)) + (await earningsOf(escrow, holder));
  const pendingTotal = (await escrow.read.x402PendingTotal()) as bigint;
  expect(pendingTotal, "x402PendingTotal").to.equal(expected.pendingMicros);
  expect(holdings, "escrow USDC = balances + earnings + x402PendingTotal (+ stranded)").to.equal(
    owed + pendingTotal + (expected.strandedMicros ?? 0n),
  );
}
