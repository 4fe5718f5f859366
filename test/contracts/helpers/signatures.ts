import { parseSignature, type Address, type Hex } from "viem";
import type { WalletClient } from "@nomicfoundation/hardhat-viem/types";

export type Voucher = { account: Address; amount: bigint; nonce: bigint; deadline: bigint };

/** EIP-712 signature of a SkillEscrow voucher by `signer`. */
export async function signVoucher(signer: WalletClient, escrow: Address, chainId: number, voucher: Voucher): Promise<Hex> {
  return signer.signTypedData({
    account: signer.account,
    domain: { name: "SkillEscrow", version: "1", chainId, verifyingContract: escrow },
    types: {
      Voucher: [
        { name: "account", type: "address" },
        { name: "amount", type: "uint256" },
        { name: "nonce", type: "uint256" },
        { name: "deadline", type: "uint256" },
      ],
    },
    primaryType: "Voucher",
    message: voucher,
  });
}

/** The USDC domain on Base, which TestUSDC reproduces. */
function usdcDomain(token: Address, chainId: number) {
  return { name: "USD Coin", version: "2", chainId, verifyingContract: token } as const;
}

/**
 * EIP-2612 permit signed by `signer`, split into v, r, s. The permit's owner is the signer unless `permit.owner`
 * names someone else (to forge a signature in tests).
 */
export async function signPermit(
  signer: WalletClient,
  token: Address,
  chainId: number,
  permit: { owner?: Address; spender: Address; value: bigint; nonce: bigint; deadline: bigint },
): Promise<{ v: number; r: Hex; s: Hex }> {
  const { owner = signer.account.address, ...rest } = permit;
  const signature = await signer.signTypedData({
    account: signer.account,
    domain: usdcDomain(token, chainId),
    types: {
      Permit: [
        { name: "owner", type: "address" },
        { name: "spender", type: "address" },
        { name: "value", type: "uint256" },
        { name: "nonce", type: "uint256" },
        { name: "deadline", type: "uint256" },
      ],
    },
    primaryType: "Permit",
    message: { owner, ...rest },
  });
  return splitSignature(signature);
}

export type TransferAuthorization = {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
};

/** EIP-3009 signature for TransferWithAuthorization or ReceiveWithAuthorization (what x402's `exact` scheme signs). */
export async function signAuthorization(
  from: WalletClient,
  token: Address,
  chainId: number,
  primaryType: "TransferWithAuthorization" | "ReceiveWithAuthorization",
  authorization: TransferAuthorization,
): Promise<Hex> {
  const fields = [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ] as const;
  return from.signTypedData({
    account: from.account,
    domain: usdcDomain(token, chainId),
    types: primaryType === "TransferWithAuthorization" ? { TransferWithAuthorization: fields } : { ReceiveWithAuthorization: fields },
    primaryType,
    message: authorization,
  });
}

/** EIP-3009 CancelAuthorization signature. */
export async function signCancelAuthorization(authorizer: WalletClient, token: Address, chainId: number, nonce: Hex): Promise<Hex> {
  return authorizer.signTypedData({
    account: authorizer.account,
    domain: usdcDomain(token, chainId),
    types: {
      CancelAuthorization: [
        { name: "authorizer", type: "address" },
        { name: "nonce", type: "bytes32" },
      ],
    },
    primaryType: "CancelAuthorization",
    message: { authorizer: authorizer.account.address, nonce },
  });
}

/** Splits a 65-byte signature for the (v, r, s) overloads. */
export function splitSignature(signature: Hex): { v: number; r: Hex; s: Hex } {
  const { v, r, s, yParity } = parseSignature(signature);
  return { v: v !== undefined ? Number(v) : yParity + 27, r, s };
}
