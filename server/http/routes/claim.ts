import express, { type Router } from "express";
import { jsonBody } from "../json-body";
import type { Address, Hex } from "viem";
import type { z } from "zod";
import type { Sessions } from "../../identity/sessions";
import type { WalletService } from "../../wallets/wallet-service";
import { microsToUsd } from "../../ledger/money";
import { dataEnvelopeOf } from "../envelope";
import { preparedViewOf, readOwnerSignature, userOperationViewOf } from "../owner-signed";
import { ApiError, refuse } from "../errors";
import { requireSession } from "../session-cookies";
import { claimBody, claimedView, claimPreparedView } from "../contract/claim";
import { parseRequest } from "../contract/common";

/**
 * A seller's claim of its settled earnings, sent on-chain from its embedded wallet (server/wallets/wallet-claims.ts):
 *   POST /v1/seller/claim { to? }                           a wallet whose owner key the gateway holds (e-mail, OAuth
 *        sign-in): the sponsored claim is sent and mined → { amount, amount_base_units, user_op_hash, tx_hash, to }
 *   POST /v1/seller/claim/prepare { to? }                   a wallet its SIWE address owns: the sponsored claim is
 *        built and kept here → { user_op_hash, amount, amount_base_units, expires_at, to, ... }; the owner
 *        personal_signs user_op_hash (32 raw bytes)
 *   POST /v1/seller/claim/submit { user_op_hash, signature } → sent with that signature and mined
 *        → { amount, amount_base_units, tx_hash, user_op_hash, to }
 * `amount` is what the escrow paid (its Claimed event), or for prepare what it owes now. `to` (an address, EIP-55
 * or lowercase, never zero) sends the USDC there (`claimTo`); without it the wallet itself is paid (`claim()`), and
 * a server-owned wallet's USDC is then swept back into the escrow as the account's deposit: the earnings become
 * spendable balance. A seller whose payout address is not its embedded wallet gets 409 payout_address_not_wallet:
 * that address must send `claim()` to the escrow itself. Nothing claimable: 409 nothing_to_claim, and no gas spent.
 * No wallet: 404 no_wallet. The refusals are the service's (ClaimRefusal), answered as they are.
 * All need a session and its CSRF token; without the ERC-4337 stack, 503 chain_not_configured.
 */
export function claimRoutes(deps: {
  sessions: Sessions;
  wallets?: WalletService;
  log: (message: string, error?: unknown) => void;
}): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);
  const json = jsonBody(4_096);
  const claims = () => {
    if (!deps.wallets) throw new ApiError("chain_not_configured", "Embedded wallets are not enabled on this gateway.");
    return deps.wallets.claims;
  };

  router.post("/v1/seller/claim", session, json, async (req, res) => {
    const wallets = claims();
    const to = readTo(req.body);
    const result = await wallets.claimForServerWallet(req.session!.accountId, { to });
    if (!result.ok) refuse(result);
    res.json(dataEnvelopeOf(claimedView, claimed(result)));
  });

  router.post("/v1/seller/claim/prepare", session, json, async (req, res) => {
    const wallets = claims();
    const to = readTo(req.body);
    const result = await wallets.prepareOwnerClaim(req.session!.accountId, { to });
    if (!result.ok) refuse(result);
    const { prepared } = result;
    res.set("cache-control", "no-store");
    res.status(201).json(
      dataEnvelopeOf(claimPreparedView, {
        ...preparedViewOf(prepared),
        amount: microsToUsd(prepared.details.claimableMicros),
        amount_base_units: prepared.details.claimableMicros.toString(),
        to: prepared.details.to,
        user_operation: userOperationViewOf(prepared.userOperation),
      }),
    );
  });

  router.post("/v1/seller/claim/submit", session, json, async (req, res) => {
    const wallets = claims();
    const { hash, signature } = readOwnerSignature(req.body);
    const result = await wallets.submitOwnerClaim(req.session!.accountId, hash, signature);
    if (!result.ok) refuse(result);
    res.json(dataEnvelopeOf(claimedView, claimed(result)));
  });

  return router;
}

/** The optional `to`: where the claimed USDC goes instead of the wallet. */
function readTo(body: unknown): Address | undefined {
  return (parseRequest(claimBody, body ?? {}).to ?? undefined) as Address | undefined;
}

/** A claim sent and mined, as both ways of claiming answer it. */
function claimed(result: { amountMicros: bigint; userOpHash: Hex; transactionHash: Hex; to: Address }): z.input<typeof claimedView> {
  return {
    amount: microsToUsd(result.amountMicros),
    amount_base_units: result.amountMicros.toString(),
    user_op_hash: result.userOpHash,
    tx_hash: result.transactionHash,
    to: result.to,
  };
}
