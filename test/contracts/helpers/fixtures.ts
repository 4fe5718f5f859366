import hre from "hardhat";
import { keccak256, maxUint256, toHex, type Address, type Hex } from "viem";
import type { GetContractReturnType, WalletClient } from "@nomicfoundation/hardhat-viem/types";

/** 1 USDC in base units (6 decimals). */
export const USDC = 1_000_000n;
export const SETTLER_ROLE = keccak256(toHex("SETTLER_ROLE"));
export const VOUCHER_SIGNER_ROLE = keccak256(toHex("VOUCHER_SIGNER_ROLE"));
export const DEFAULT_ADMIN_ROLE: Hex = `0x${"00".repeat(32)}`;
export const DAY_SEC = 24n * 60n * 60n;

export type Contract = GetContractReturnType;

/** Users start with this much test USDC and an unlimited allowance for the escrow. */
export const STARTING_WALLET_USDC = 10_000n * USDC;

/** Returns `contract` bound to `wallet` as the sender of its writes. */
export async function connect(contract: Contract, contractName: string, wallet: WalletClient): Promise<Contract> {
  return hre.viem.getContractAt(contractName, contract.address, { client: { wallet } });
}

/**
 * A fresh escrow over a fresh TestUSDC, roles granted, four funded users with allowances.
 * Use through `loadFixture` so each test starts from the same snapshot.
 */
export async function deployEscrowFixture() {
  const wallets = await hre.viem.getWalletClients();
  const [admin, settler, voucherSigner, treasury, alice, bob, carol, dave, sellerA, sellerB, sellerC, outsider] = wallets;
  const publicClient = await hre.viem.getPublicClient();
  const chainId = await publicClient.getChainId();

  const usdc = await hre.viem.deployContract("TestUSDC", [admin.account.address]);
  const escrow = await hre.viem.deployContract("SkillEscrow", [usdc.address, admin.account.address, treasury.account.address]);
  await escrow.write.grantRole([SETTLER_ROLE, settler.account.address]);
  await escrow.write.grantRole([VOUCHER_SIGNER_ROLE, voucherSigner.account.address]);

  const users = [alice, bob, carol, dave];
  for (const user of users) {
    await usdc.write.mint([user.account.address, STARTING_WALLET_USDC]);
    const userUsdc = await connect(usdc, "TestUSDC", user);
    await userUsdc.write.approve([escrow.address, maxUint256]);
  }

  const escrowAs = async (wallet: WalletClient) => connect(escrow, "SkillEscrow", wallet);
  const usdcAs = async (wallet: WalletClient) => connect(usdc, "TestUSDC", wallet);

  return {
    publicClient,
    chainId,
    usdc,
    escrow,
    admin,
    settler,
    voucherSigner,
    treasury,
    alice,
    bob,
    carol,
    dave,
    sellerA,
    sellerB,
    sellerC,
    outsider,
    users,
    sellers: [sellerA, sellerB, sellerC],
    escrowAs,
    usdcAs,
  };
}

export type EscrowFixture = Awaited<ReturnType<typeof deployEscrowFixture>>;

/** Typed reads over the loosely typed contract objects (artifact types are not part of the type check). */
export async function escrowBalance(escrow: Contract, account: Address): Promise<bigint> {
  return (await escrow.read.balances([account])) as bigint;
}

export async function earningsOf(escrow: Contract, seller: Address): Promise<bigint> {
  return (await escrow.read.earnings([seller])) as bigint;
}

export async function tokenBalance(token: Contract, account: Address): Promise<bigint> {
  return (await token.read.balanceOf([account])) as bigint;
}

export async function pendingExit(escrow: Contract, account: Address): Promise<{ amount: bigint; readyAtSec: bigint }> {
  const [amount, readyAtSec] = (await escrow.read.pendingExit([account])) as readonly [bigint, bigint];
  return { amount, readyAtSec };
}
