import express, { type Router } from "express";
import { isHex, type Hex } from "viem";
import type { Sessions } from "../../accounts/sessions";
import type { WalletService } from "../../accounts/wallet-service";
import { dataEnvelope } from "../envelope";
import { ApiError } from "../errors";

const usd = (micros: bigint) => Number(micros) / 1e6;

/**
 * A SIWE user's top-up from its embedded wallet, whose owner is the user's own address (the gateway holds no
 * key for it), in two steps:
 *   POST /v1/wallet/sweep/prepare                          → the sponsored UserOperation (approve + depositFor of the
 *        wallet's whole USDC balance), kept here, and `user_op_hash`, which the owner signs with personal_sign
 *   POST /v1/wallet/sweep/submit { user_op_hash, signature } → sent to the bundler with that signature and mined;
 *        the deposit indexer credits the balance from the escrow's event
 * Both need a session and its CSRF token. The operation sent is always the one prepared here, never a client's.
 */
export function walletRoutes(deps: { sessions: Sessions; wallets?: WalletService; log: (message: string, error?: unknown) => void }): Router {
  const router = express.Router();
  const session = deps.sessions.require();
  const json = express.json({ limit: 4_096, type: () => true });
  const wallets = (): WalletService => {
    if (!deps.wallets) throw new ApiError("chain_unavailable", "Embedded wallets are not enabled on this gateway.");
    return deps.wallets;
  };

  router.post("/v1/wallet/sweep/prepare", session, async (req, res) => {
    const result = await wallets().prepareOwnerSweep(req.session!.accountId);
    if (!result.ok) {
      switch (result.reason) {
        case "no_wallet":
          throw new ApiError("not_found", "This account has no embedded wallet yet.");
        case "server_owned":
          throw new ApiError("wallet_swept_automatically", "This wallet's owner key is held by the gateway: USDC sent to it is moved into the escrow automatically.");
        case "empty":
          throw new ApiError("amount_below_minimum", "The wallet holds no USDC.");
        case "below_minimum":
          throw new ApiError("amount_below_minimum", `The wallet holds ${usd(result.balanceMicros)} USDC, less than the minimum deposit.`);
      }
    }
    const { prepared } = result;
    const op = prepared.userOperation;
    res.set("cache-control", "no-store");
    res.status(201).json(
      dataEnvelope({
        user_op_hash: prepared.userOpHash,
        expires_at: new Date(prepared.expiresAtMs).toISOString(),
        amount: usd(prepared.amountMicros),
        wallet: prepared.wallet,
        owner: prepared.owner,
        sign: "personal_sign of user_op_hash as 32 raw bytes, by the owner",
        user_operation: {
          sender: op.sender,
          nonce: op.nonce.toString(),
          factory: op.factory ?? null,
          call_data: op.callData,
          paymaster: op.paymaster ?? null,
        },
      }),
    );
  });

  router.post("/v1/wallet/sweep/submit", session, json, async (req, res) => {
    const body = (req.body ?? {}) as { user_op_hash?: unknown; signature?: unknown };
    if (typeof body !== "object" || Array.isArray(body)) throw new ApiError("invalid_request", "Body must be a JSON object.");
    const { user_op_hash: hash, signature } = body;
    if (typeof hash !== "string" || !isHex(hash, { strict: true }) || hash.length !== 66) {
      throw new ApiError("invalid_request", "user_op_hash must be the 32-byte hex hash prepare returned.");
    }
    if (typeof signature !== "string" || !isHex(signature, { strict: true }) || signature.length !== 2 + 2 * 65) {
      throw new ApiError("invalid_request", "signature must be a 65-byte hex signature.");
    }
    const result = await wallets().submitOwnerSweep(req.session!.accountId, hash.toLowerCase() as Hex, signature as Hex);
    if (!result.ok) {
      switch (result.reason) {
        case "unknown":
          throw new ApiError("not_found", "No prepared sweep with this hash on this account (it may have expired): prepare again.");
        case "in_progress":
          throw new ApiError("sweep_in_progress", "This sweep is being submitted.");
        case "bad_signature":
          throw new ApiError("invalid_request", "signature must be a 65-byte hex signature.");
        case "rejected":
          throw new ApiError("user_operation_rejected", `The bundler refused the operation (is the signature the owner's personal_sign of user_op_hash?): ${result.message}`);
        case "bundler_unavailable":
          deps.log("the bundler did not answer a sweep submission", result.message);
          throw new ApiError("chain_unavailable", "The bundler is unreachable; try again.");
      }
    }
    res.json(dataEnvelope({ transaction_hash: result.transactionHash, user_op_hash: result.userOpHash, amount: usd(result.amountMicros) }));
  });

  return router;
}
