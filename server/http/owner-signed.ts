import { type Hex, isHex } from "viem";
import { objectBody } from "./body";
import { ApiError } from "./errors";

/**
 * What the three owner-signed flows (a SIWE wallet's sweep, claim and withdrawal) share at the
 * HTTP edge: the body of their submit. The flows themselves, and their refusals, share
 * server/wallets/sponsored-operations.ts.
 */

/** `{ user_op_hash, signature }` of a submit: the 32-byte hash prepare returned and a 65-byte signature. */
export function readOwnerSignature(body: unknown): { hash: Hex; signature: Hex } {
  const { user_op_hash: hash, signature } = objectBody(body);
  if (typeof hash !== "string" || !isHex(hash, { strict: true }) || hash.length !== 66) {
    throw new ApiError("invalid_request", "user_op_hash must be the 32-byte hex hash prepare returned.");
  }
  if (typeof signature !== "string" || !isHex(signature, { strict: true }) || signature.length !== 2 + 2 * 65) {
    throw new ApiError("invalid_request", "signature must be a 65-byte hex signature.");
  }
  return { hash: hash.toLowerCase() as Hex, signature: signature as Hex };
}
