import { encodeAbiParameters, keccak256, toHex, type Address, type Hex } from "viem";
import type { WalletClient } from "@nomicfoundation/hardhat-viem/types";
import { feeOf } from "./batch";
import { DAY_SEC } from "./fixtures";
import { signAuthorization } from "./signatures";

/** The Solidity `SkillEscrow.X402Payment` struct as viem encodes it (what the gateway passes to collectX402). */
export type X402Payment = {
  from: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
  seller: Address;
  platformFee: bigint;
  callId: Hex;
};

/**
 * The Solidity `SkillEscrow.X402Pending` struct: a collected payment as X402Collected emits it, and as
 * completeX402, refundX402 and reclaimX402 are given it back.
 */
export type X402Pending = {
  payer: Address;
  seller: Address;
  value: bigint;
  platformFee: bigint;
  reclaimableAt: bigint;
};

/** SkillEscrow.X402_RECLAIM_DELAY: how long after its collection a pending payment becomes reclaimable. */
export const X402_RECLAIM_DELAY_SEC = DAY_SEC;

/** 2100-01-01: an expiry no test reaches unless it moves the clock there on purpose. */
export const FAR_FUTURE_SEC = 4_102_444_800n;

/**
 * A payment of 0.25 USDC from `from` to `seller` with the standard 10% fee and x402's `validAfter` of 0. The
 * nonce and the call id are derived from `label`, so every label is a distinct authorization.
 */
export function buildX402Payment(
  overrides: Partial<X402Payment> & Pick<X402Payment, "from" | "seller">,
  label: string = "x402 payment",
): X402Payment {
  const value = overrides.value ?? 250_000n;
  return {
    value,
    validAfter: 0n,
    validBefore: FAR_FUTURE_SEC,
    nonce: keccak256(toHex(`nonce of ${label}`)),
    platformFee: feeOf(value),
    callId: keccak256(toHex(`call id of ${label}`)),
    ...overrides,
  };
}

/** The pending payment collectX402 records for `payment` when mined in a block of time `collectedAtSec`. */
export function pendingOf(payment: X402Payment, collectedAtSec: bigint): X402Pending {
  return {
    payer: payment.from,
    seller: payment.seller,
    value: payment.value,
    platformFee: payment.platformFee,
    reclaimableAt: collectedAtSec + X402_RECLAIM_DELAY_SEC,
  };
}

/**
 * The commitment SkillEscrow stores in `x402Pending(callId)` for `pending`, computed here independently of the
 * contract's hashX402Pending so the tests check the contract against the documented encoding.
 */
export function hashX402Pending(pending: X402Pending): Hex {
  return keccak256(
    encodeAbiParameters(
      [{ type: "address" }, { type: "address" }, { type: "uint256" }, { type: "uint256" }, { type: "uint256" }],
      [pending.payer, pending.seller, pending.value, pending.platformFee, pending.reclaimableAt],
    ),
  );
}

/**
 * The payer's signature of `payment`'s authorization as x402's `exact` client makes it: EIP-712
 * `TransferWithAuthorization` over the token's domain, with `to` the payment's `payTo` (the escrow). `sign`
 * overrides what is signed, to forge mismatches in tests (another `to`, another value, the other primary type).
 */
export async function signX402Payment(
  signer: WalletClient,
  token: Address,
  chainId: number,
  to: Address,
  payment: X402Payment,
  sign: {
    to?: Address;
    value?: bigint;
    primaryType?: "TransferWithAuthorization" | "ReceiveWithAuthorization";
  } = {},
): Promise<Hex> {
  const { from, value, validAfter, validBefore, nonce } = payment;
  return signAuthorization(signer, token, chainId, sign.primaryType ?? "TransferWithAuthorization", {
    from,
    to: sign.to ?? to,
    value: sign.value ?? value,
    validAfter,
    validBefore,
    nonce,
  });
}
