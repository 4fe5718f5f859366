import type { Hex } from "viem";
import { ApiError, type ErrorCode } from "./errors";
import { ownerSignatureBody } from "./contract/claim";
import { parseRequest } from "./contract/common";

/**
 * What the three owner-signed flows (a SIWE wallet's sweep, claim and withdrawal) share at the
 * HTTP edge: the body of their submit, and what each way a submit can fail means to a person.
 * The flows themselves share server/wallets/sponsored-operations.ts.
 */

/** `{ user_op_hash, signature }` of a submit: the 32-byte hash prepare returned and a 65-byte signature. */
export function readOwnerSignature(body: unknown): { hash: Hex; signature: Hex } {
  const { user_op_hash: hash, signature } = parseRequest(ownerSignatureBody, body ?? {});
  return { hash: hash.toLowerCase() as Hex, signature: signature as Hex };
}

export type OwnerSubmitRefusal =
  { reason: "unknown" | "in_progress" | "bad_signature" } | { reason: "rejected" | "bundler_unavailable"; message: string };

/** Throws the answer to a refused submit of a prepared `what` ("sweep", "claim", "withdrawal"). */
export function refuseOwnerSubmit(
  refusal: OwnerSubmitRefusal,
  what: string,
  inProgress: ErrorCode,
  log: (message: string, error?: unknown) => void,
): never {
  switch (refusal.reason) {
    case "unknown":
      throw new ApiError("not_found", `No prepared ${what} with this hash on this account (it may have expired): prepare again.`);
    case "in_progress":
      throw new ApiError(inProgress, `This ${what} is being submitted.`);
    case "bad_signature":
      throw new ApiError("invalid_request", "signature must be a 65-byte hex signature.");
    case "rejected":
      throw new ApiError(
        "user_operation_rejected",
        `The bundler refused the ${what} (is the signature the owner's personal_sign of user_op_hash?): ${refusal.message}`,
      );
    case "bundler_unavailable":
      log(`the bundler did not answer a ${what} submission`, refusal.message);
      throw new ApiError("chain_unavailable", "The bundler is unreachable; try again.");
  }
}
