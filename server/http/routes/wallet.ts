import express, { type Router } from "express";
import { jsonBody } from "../json-body";
import type { Sessions } from "../../identity/sessions";
import type { WalletService } from "../../wallets/wallet-service";
import { dataEnvelopeOf } from "../envelope";
import { microsToUsd } from "../../ledger/money";
import { sweepPreparedView, sweptView } from "../contract/wallet";
import { preparedViewOf, readOwnerSignature, userOperationViewOf } from "../owner-signed";
import { ApiError, refuse } from "../errors";
import { requireSession } from "../session-cookies";

/**
 * A SIWE user's top-up from its embedded wallet, whose owner is the user's own address (the gateway holds no
 * key for it), in two steps:
 *   POST /v1/wallet/sweep/prepare                          → the sponsored UserOperation (approve + depositFor of the
 *        wallet's whole USDC balance), kept here, and `user_op_hash`, which the owner signs with personal_sign
 *   POST /v1/wallet/sweep/submit { user_op_hash, signature } → sent to the bundler with that signature and mined;
 *        the deposit indexer credits the balance from the escrow's event
 * Both need a session and its CSRF token. The operation sent is always the one prepared here, never a client's.
 */
export function walletRoutes(deps: {
  sessions: Sessions;
  wallets?: WalletService;
  log: (message: string, error?: unknown) => void;
}): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);
  const json = jsonBody(4_096);
  const wallets = (): WalletService => {
    if (!deps.wallets) throw new ApiError("chain_not_configured", "Embedded wallets are not enabled on this gateway.");
    return deps.wallets;
  };

  router.post("/v1/wallet/sweep/prepare", session, async (req, res) => {
    const result = await wallets().prepareOwnerSweep(req.session!.accountId);
    if (!result.ok) refuse(result);
    const { prepared } = result;
    res.set("cache-control", "no-store");
    res.status(201).json(
      dataEnvelopeOf(sweepPreparedView, {
        ...preparedViewOf(prepared),
        amount: microsToUsd(prepared.amountMicros),
        user_operation: userOperationViewOf(prepared.userOperation),
      }),
    );
  });

  router.post("/v1/wallet/sweep/submit", session, json, async (req, res) => {
    const { hash, signature } = readOwnerSignature(req.body);
    const result = await wallets().submitOwnerSweep(req.session!.accountId, hash, signature);
    if (!result.ok) refuse(result);
    res.json(
      dataEnvelopeOf(sweptView, {
        transaction_hash: result.transactionHash,
        user_op_hash: result.userOpHash,
        amount: microsToUsd(result.amountMicros),
      }),
    );
  });

  return router;
}
