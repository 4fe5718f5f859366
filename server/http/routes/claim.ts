import express, { type Router } from "express";
import { jsonBody } from "../json-body";
import type { Address } from "viem";
import type { Sessions } from "../../identity/sessions";
import type { ClaimRefusal } from "../../wallets/wallet-claims";
import type { WalletService } from "../../wallets/wallet-service";
import { microsToUsd } from "../../ledger/money";
import { dataEnvelope } from "../envelope";
import { address, objectBody } from "../body";
import { readOwnerSignature, refuseOwnerSubmit } from "../owner-signed";
import { ApiError } from "../errors";
import { requireSession } from "../session-cookies";

type Log = (message: string, error?: unknown) => void;

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
 * All need a session and its CSRF token; without the ERC-4337 stack, 503 chain_unavailable.
 */
export function claimRoutes(deps: { sessions: Sessions; wallets?: WalletService; log: Log }): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);
  const json = jsonBody(4_096);
  const claims = () => {
    if (!deps.wallets) throw new ApiError("chain_unavailable", "Embedded wallets are not enabled on this gateway.");
    return deps.wallets.claims;
  };

  router.post("/v1/seller/claim", session, json, async (req, res) => {
    const wallets = claims();
    const to = readTo(req.body);
    const result = await wallets.claimForServerWallet(req.session!.accountId, { to });
    if (!result.ok) refuse(result, "server", deps.log);
    res.json(
      dataEnvelope({
        amount: microsToUsd(result.amountMicros),
        amount_base_units: result.amountMicros.toString(),
        user_op_hash: result.userOpHash,
        tx_hash: result.transactionHash,
        to: result.to,
      }),
    );
  });

  router.post("/v1/seller/claim/prepare", session, json, async (req, res) => {
    const wallets = claims();
    const to = readTo(req.body);
    const result = await wallets.prepareOwnerClaim(req.session!.accountId, { to });
    if (!result.ok) refuse(result, "owner", deps.log);
    const { prepared } = result;
    const op = prepared.userOperation;
    res.set("cache-control", "no-store");
    res.status(201).json(
      dataEnvelope({
        user_op_hash: prepared.userOpHash,
        amount: microsToUsd(prepared.details.claimableMicros),
        amount_base_units: prepared.details.claimableMicros.toString(),
        expires_at: new Date(prepared.expiresAtMs).toISOString(),
        to: prepared.details.to,
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

  router.post("/v1/seller/claim/submit", session, json, async (req, res) => {
    const wallets = claims();
    const { hash, signature } = readOwnerSignature(req.body);
    const result = await wallets.submitOwnerClaim(req.session!.accountId, hash, signature);
    if (!result.ok) refuseOwnerSubmit(result, "claim", "claim_in_progress", deps.log);
    res.json(
      dataEnvelope({
        amount: microsToUsd(result.amountMicros),
        amount_base_units: result.amountMicros.toString(),
        tx_hash: result.transactionHash,
        user_op_hash: result.userOpHash,
        to: result.to,
      }),
    );
  });

  return router;
}

/** The optional `to`: where the claimed USDC goes instead of the wallet. */
function readTo(body: unknown): Address | undefined {
  const { to } = objectBody(body);
  return to === undefined || to === null ? undefined : address(to, "to");
}

/** The refusals both claim paths share, as the error the client sees. */
function refuse(result: ClaimRefusal, path: "server" | "owner", log: Log): never {
  switch (result.reason) {
    case "no_wallet":
      throw new ApiError("not_found", "This account has no embedded wallet yet.");
    case "payout_address_not_wallet":
      throw new ApiError(
        "payout_address_not_wallet",
        result.payoutAddress
          ? `Your earnings are paid to ${result.payoutAddress}, not to your embedded wallet: send claim() to the escrow from that address.`
          : "This account has no payout address, so it has no earnings to claim.",
      );
    case "siwe_owned":
      throw new ApiError(
        "wrong_claim_flow",
        "Your wallet is owned by your own address: prepare the claim (POST /v1/seller/claim/prepare) and sign it.",
      );
    case "server_owned":
      throw new ApiError("wrong_claim_flow", "The gateway holds this wallet's key: claim with POST /v1/seller/claim, no signature needed.");
    case "in_progress":
      throw new ApiError("claim_in_progress", "Another operation of this wallet is being sent; try again in a moment.");
    case "nothing_to_claim":
      throw new ApiError("nothing_to_claim", "There are no settled earnings to claim yet.");
    case "rejected":
    case "bundler_unavailable":
      // On the server path a refusal is the gateway's problem (it built and signed the operation), not the caller's.
      log(`the bundler did not take a claim (${path} path): ${result.reason}`, result.message);
      if (path === "owner" && result.reason === "rejected")
        throw new ApiError("user_operation_rejected", `The bundler refused the claim: ${result.message}`);
      throw new ApiError("chain_unavailable", "The claim could not be sent to the chain; try again.");
  }
}
