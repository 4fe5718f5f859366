import type { Hex } from "viem";
import { ownerSignatureBody } from "./contract/claim";
import { parseRequest } from "./contract/common";

/**
 * What the three owner-signed flows (a SIWE wallet's sweep, claim and withdrawal) share at the
 * HTTP edge: the body of their submit. The flows themselves, and their refusals, share
 * server/wallets/sponsored-operations.ts.
 */

/** `{ user_op_hash, signature }` of a submit: the 32-byte hash prepare returned and a 65-byte signature. */
export function readOwnerSignature(body: unknown): { hash: Hex; signature: Hex } {
  const { user_op_hash: hash, signature } = parseRequest(ownerSignatureBody, body ?? {});
  return { hash: hash.toLowerCase() as Hex, signature: signature as Hex };
}
