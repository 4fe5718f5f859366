import type { Hex } from "viem";
import type { UserOperation } from "viem/account-abstraction";
import type { z } from "zod";
import type { PreparedOperation } from "../wallets/sponsored-operations";
import { ownerSignatureBody, type preparedView, type userOperationView } from "./contract/claim";
import { parseRequest } from "./contract/common";

/**
 * What the three owner-signed flows (a SIWE wallet's sweep, claim and withdrawal) share at the
 * HTTP edge: the body of their submit, and the fields of their prepare's answer. The flows themselves, and their refusals, share
 * server/wallets/sponsored-operations.ts.
 */

/** `{ user_op_hash, signature }` of a submit: the 32-byte hash prepare returned and a 65-byte signature. */
export function readOwnerSignature(body: unknown): { hash: Hex; signature: Hex } {
  const { user_op_hash: hash, signature } = parseRequest(ownerSignatureBody, body ?? {});
  return { hash: hash.toLowerCase() as Hex, signature: signature as Hex };
}

/** How the owner signs what a prepare answers, said in every prepare's `sign`. */
const SIGN_HOW = "personal_sign of user_op_hash as 32 raw bytes, by the owner";

/** The fields every prepare answers about its operation (contract/claim.ts preparedView), beside its own. */
export function preparedViewOf(
  prepared: Pick<PreparedOperation, "userOpHash" | "expiresAtMs" | "wallet" | "owner">,
): z.input<typeof preparedView> {
  return {
    user_op_hash: prepared.userOpHash,
    expires_at: new Date(prepared.expiresAtMs).toISOString(),
    wallet: prepared.wallet,
    owner: prepared.owner,
    sign: SIGN_HOW,
  };
}

/** The sponsored UserOperation a prepare built, as its owner may inspect it before signing (contract/claim.ts). */
export function userOperationViewOf(op: UserOperation<"0.7">): z.input<typeof userOperationView> {
  return {
    sender: op.sender,
    nonce: op.nonce.toString(),
    factory: op.factory ?? null,
    call_data: op.callData,
    paymaster: op.paymaster ?? null,
  };
}
