import { z } from "zod";
import { baseUnits, dataEnvelope, hex32, hexAddress, hexData, hexOfBytes, isoDate, operation, recipientAddress, usdNumber } from "./common";

/**
 * The owner-signed flows' shared parts, and a seller's claim of its settled earnings
 * (server/http/routes/claim.ts).
 */

/** `{ user_op_hash, signature }` of a submit: the 32-byte hash prepare returned, and the owner's 65-byte signature. */
export const ownerSignatureBody = z.object(
  {
    user_op_hash: hexOfBytes(32, "user_op_hash must be the 32-byte hex hash prepare returned."),
    signature: hexOfBytes(65, "signature must be a 65-byte hex signature.").meta({
      description: "personal_sign of user_op_hash (as 32 raw bytes) by the wallet's owner.",
    }),
  },
  { error: "Body must be a JSON object." },
);

/** The sponsored UserOperation a prepare built, as the owner may inspect it before signing. */
export const userOperationView = z.strictObject({
  sender: hexAddress,
  nonce: z.string(),
  factory: hexAddress.nullable(),
  call_data: hexData,
  paymaster: hexAddress.nullable(),
});

/** What every prepare of an owner-signed flow answers beside its own fields. */
export const preparedFields = {
  user_op_hash: hex32,
  expires_at: isoDate,
  wallet: hexAddress,
  owner: hexAddress,
  sign: z.string().meta({ description: "How to sign user_op_hash." }),
};

/** The fields every prepare answers about its operation (server/http/owner-signed.ts preparedView builds them). */
export const preparedView = z.strictObject(preparedFields);

/** POST /v1/seller/claim/prepare's answer. */
export const claimPreparedView = preparedView.extend({
  amount: usdNumber,
  amount_base_units: baseUnits,
  to: hexAddress,
  user_operation: userOperationView,
});

/** POST /v1/seller/claim's and /prepare's body: where the USDC goes, the wallet itself when absent. */
export const claimBody = z.object({ to: recipientAddress("to").nullable().optional() }, { error: "Body must be a JSON object." });

/** A claim sent and mined: POST /v1/seller/claim's and /submit's answer. */
export const claimedView = z.strictObject({
  amount: usdNumber,
  amount_base_units: baseUnits,
  user_op_hash: hex32,
  tx_hash: hex32,
  to: hexAddress,
});

const CLAIM_ERRORS = [
  "chain_unavailable",
  "chain_not_configured",
  "not_found",
  "no_wallet",
  "payout_address_not_wallet",
  "wrong_claim_flow",
  "claim_in_progress",
] as const;

export const claimOperations = [
  operation({
    method: "post",
    path: "/v1/seller/claim",
    tag: "Seller",
    summary: "Claim settled earnings (a wallet whose key the gateway holds)",
    auth: "session",
    body: claimBody,
    bodyOptional: true,
    responses: [{ status: 200, description: "Sent and mined.", schema: dataEnvelope(claimedView) }],
    errors: [...CLAIM_ERRORS, "nothing_to_claim"],
  }),
  operation({
    method: "post",
    path: "/v1/seller/claim/prepare",
    tag: "Seller",
    summary: "Prepare a claim for the wallet's owner to sign (SIWE)",
    auth: "session",
    body: claimBody,
    bodyOptional: true,
    responses: [
      {
        status: 201,
        description: "The sponsored claim, kept here until it expires.",
        schema: dataEnvelope(claimPreparedView),
      },
    ],
    errors: [...CLAIM_ERRORS, "nothing_to_claim", "user_operation_rejected"],
  }),
  operation({
    method: "post",
    path: "/v1/seller/claim/submit",
    tag: "Seller",
    summary: "Submit a prepared claim with the owner's signature",
    auth: "session",
    body: ownerSignatureBody,
    responses: [{ status: 200, description: "Sent and mined.", schema: dataEnvelope(claimedView) }],
    errors: [...CLAIM_ERRORS, "user_operation_rejected"],
  }),
];
