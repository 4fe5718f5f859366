import type { PaymentPayload, PaymentRequired, PaymentRequirements } from "@x402/core/types";
import { decodePaymentSignatureHeader } from "@x402/core/http";
import { type Address, type Hex, getAddress, isAddress } from "viem";
import { z } from "zod";
import type { Eip3009Authorization } from "./escrow-settlement";

/**
 * The x402 protocol, version 2, as this gateway speaks it (x402-foundation/x402: specs/x402-specification-v2.md and
 * the `exact` EVM scheme): what a paid call asks for, and the payment a client sends back. The header encodings
 * are the protocol package's own (@x402/core/http); everything a client sends is checked here before it is used.
 */
export const X402_VERSION = 2;

/** The token and escrow a payment goes to: the escrow's USDC, its EIP-712 domain, and the chain (CAIP-2). */
export interface X402Asset {
  chainId: number;
  usdc: Address;
  escrow: Address;
  /** The token's EIP-712 domain name and version ("USD Coin", "2" for USDC), which clients sign over. */
  tokenName: string;
  tokenVersion: string;
}

export function networkOf(asset: X402Asset): `eip155:${number}` {
  return `eip155:${asset.chainId}`;
}

/**
 * What one call of a skill costs, as x402 `exact` requirements: `amount` base units of the escrow's USDC, paid to
 * the escrow (which credits the seller and the treasury when it settles), valid for `maxTimeoutSeconds`.
 */
export function requirementsFor(asset: X402Asset, amountMicros: bigint, maxTimeoutSeconds: number): PaymentRequirements {
  return {
    scheme: "exact",
    network: networkOf(asset),
    asset: asset.usdc,
    amount: amountMicros.toString(),
    payTo: asset.escrow,
    maxTimeoutSeconds,
    extra: { name: asset.tokenName, version: asset.tokenVersion },
  };
}

export function paymentRequired(resource: PaymentRequired["resource"], accepts: PaymentRequirements, error?: string): PaymentRequired {
  return error === undefined
    ? { x402Version: X402_VERSION, resource, accepts: [accepts] }
    : { x402Version: X402_VERSION, error, resource, accepts: [accepts] };
}

const uint = z.string().regex(/^(0|[1-9][0-9]{0,77})$/, "a decimal integer");
const address = z.string().refine((value) => isAddress(value, { strict: false }), "an address");
const hex = z.string().regex(/^0x([0-9a-fA-F]{2})*$/, "hex bytes");

const requirementsShape = z.object({
  scheme: z.string().max(64),
  network: z.string().max(64),
  asset: z.string().max(128),
  amount: uint,
  payTo: z.string().max(128),
  maxTimeoutSeconds: z.number().int().nonnegative(),
  extra: z.record(z.string(), z.unknown()).optional(),
});

/** A v2 payment payload carrying an EIP-3009 authorization (the `exact` scheme's default transfer method). */
const eip3009PayloadShape = z.object({
  x402Version: z.literal(X402_VERSION),
  accepted: requirementsShape,
  payload: z.object({
    signature: hex.max(2 + 2 * 4096),
    authorization: z.object({
      from: address,
      to: address,
      value: uint,
      validAfter: uint,
      validBefore: uint,
      nonce: z.string().regex(/^0x[0-9a-fA-F]{64}$/, "32 bytes of hex"),
    }),
  }),
});

/** A payment the gateway can take: the payload as sent (for the protocol's verifier) and its authorization, parsed. */
export interface ParsedPayment {
  payload: PaymentPayload;
  authorization: Eip3009Authorization;
}

/** Why a PAYMENT-SIGNATURE header was refused before any check against the chain. */
export class MalformedPayment extends Error {
  override name = "MalformedPayment";
}

/**
 * The PAYMENT-SIGNATURE header, decoded and checked for shape: base64 of a v2 payload whose `payload` is an
 * EIP-3009 authorization. Anything else (another version, a Permit2 payload, a field of the wrong type) is refused.
 */
export function parsePaymentHeader(header: string): ParsedPayment {
  if (header.length > 16_384) throw new MalformedPayment("The PAYMENT-SIGNATURE header is too long.");
  let decoded: unknown;
  try {
    decoded = decodePaymentSignatureHeader(header.trim());
  } catch {
    throw new MalformedPayment("The PAYMENT-SIGNATURE header is not base64-encoded JSON.");
  }
  const parsed = eip3009PayloadShape.safeParse(decoded);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new MalformedPayment(
      `The PAYMENT-SIGNATURE header is not an x402 v2 exact payment with an EIP-3009 authorization (${issue.path.join(".") || "payload"}: ${issue.message}).`,
    );
  }
  const { authorization, signature } = parsed.data.payload;
  return {
    payload: decoded as PaymentPayload,
    authorization: {
      from: getAddress(authorization.from),
      to: getAddress(authorization.to),
      value: BigInt(authorization.value),
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
      nonce: authorization.nonce.toLowerCase() as Hex,
      signature: signature as Hex,
    },
  };
}

/** Whether the requirements a payment says it accepted are the ones this call asks for (amount, asset, recipient...). */
export function acceptedMatches(accepted: PaymentPayload["accepted"], wanted: PaymentRequirements): string | undefined {
  if (accepted.scheme !== wanted.scheme) return `scheme "${accepted.scheme}" is not "${wanted.scheme}"`;
  if (accepted.network !== wanted.network) return `network "${accepted.network}" is not "${wanted.network}"`;
  if (accepted.asset.toLowerCase() !== wanted.asset.toLowerCase())
    return `asset ${accepted.asset} is not the escrow's USDC ${wanted.asset}`;
  if (accepted.payTo.toLowerCase() !== wanted.payTo.toLowerCase()) return `payTo ${accepted.payTo} is not the escrow ${wanted.payTo}`;
  if (accepted.amount !== wanted.amount) return `amount ${accepted.amount} is not the price ${wanted.amount}`;
  return undefined;
}
