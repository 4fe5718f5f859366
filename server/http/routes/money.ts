import express, { type Router } from "express";
import type { ApiKeys } from "../../identity/api-keys";
import type { Earnings } from "../../settlement/earnings";
import type { CallsStore } from "../../gateway/calls-store";
import { callIdToBytes32 } from "../../settlement/batches";
import { receiptLeaf } from "../../chain/receipts";
import type { ChainConnection, MoneyPath } from "../../settlement/money-path";
import { microsToUsd } from "../../ledger/money";
import { requireAccount, scopeMissing } from "../auth";
import type { Sessions } from "../../identity/sessions";
import { callParams, earningsView, receiptView } from "../contract/account";
import { parseParams } from "../contract/common";
import { dataEnvelopeOf } from "../envelope";
import { ApiError } from "../errors";

/**
 * The money path seen from an API key:
 *   GET /v1/earnings                 a seller's earnings: pending, settled on-chain, claimed
 *   GET /v1/calls/:callId/receipt    a paid call's settlement: batch, receipt and Merkle proof
 */
export function moneyRoutes(deps: {
  keys: ApiKeys;
  sessions: Sessions;
  calls: CallsStore;
  /** The account's earnings (settlement/earnings.ts), read against the chain when there is one. */
  earningsOf: (accountId: string) => Promise<Earnings>;
  moneyPath?: MoneyPath;
  chain?: ChainConnection;
}): Router {
  const router = express.Router();
  /** The key-or-session check of a route, with the scope its declaration (server/http/contract/) names. */
  const auth = (route: string) => requireAccount(deps.keys, deps.sessions, route);

  router.get("/v1/earnings", auth("GET /v1/earnings"), async (req, res) => {
    const e = await deps.earningsOf(req.accountId!);
    const usd = (micros: bigint | null) => (micros === null ? null : microsToUsd(micros));
    res.json(
      dataEnvelopeOf(earningsView, {
        currency: "USDC",
        pending: usd(e.pendingMicros),
        settled: usd(e.settledMicros),
        claimable: usd(e.claimableMicros),
        claimed: usd(e.claimedMicros),
        address: e.address ?? null,
        escrow: deps.chain?.escrowAddress ?? null,
      }),
    );
  });

  router.get("/v1/calls/:callId/receipt", auth("GET /v1/calls/{callId}/receipt"), async (req, res) => {
    const settler = deps.moneyPath?.settler;
    if (!settler) throw new ApiError("chain_not_configured", "Receipts need the gateway to settle on its escrow chain.");
    // Call ids are UUIDs: anything else is no call, on either database engine, and is never looked up.
    const { callId } = parseParams(callParams, req.params, "No such call for this key's account.");
    // Only the caller's own calls: another account's call is as unknown as a made-up id.
    const owner = await deps.calls.ownerOf(callId);
    if (owner?.accountId !== req.accountId!) throw new ApiError("not_found", `No call ${callId} for this key's account.`);
    // A key with `calls` alone reads its own calls' receipts, not its account's other keys'.
    if (req.ownCallsOf !== undefined && owner.apiKeyId !== req.ownCallsOf)
      throw scopeMissing("usage:read", "the receipt of another key's call");
    const r = await settler.receiptFor(callId);
    if (r.status === "unknown_call") throw new ApiError("not_found", `No call ${callId} for this key's account.`);
    if (r.status === "not_charged" || r.status === "unsettled") {
      res.json(dataEnvelopeOf(receiptView, { call_id: callId, status: r.status }));
      return;
    }
    res.json(
      dataEnvelopeOf(receiptView, {
        call_id: callId,
        status: r.status,
        batch_number: r.batchNumber,
        receipts_root: r.receiptsRoot,
        tx_hash: r.txHash,
        // Where the batch's root is: a saved receipt is checked against the chain with nothing from the gateway.
        escrow: deps.chain?.escrowAddress ?? null,
        chain_id: deps.chain?.chainId ?? null,
        receipt: {
          call_id: callIdToBytes32(callId),
          account: r.receipt.account,
          seller: r.receipt.seller,
          amount: r.receipt.amount.toString(),
          platform_fee: r.receipt.platformFee.toString(),
        },
        // The receipt's Merkle leaf, so that a verifier tells a changed receipt (its fields no longer hash to it) from a wrong proof.
        leaf: receiptLeaf(r.receipt),
        proof: r.proof,
        verify_with:
          "SkillEscrow.verifyReceipt(batch_number, receipt.call_id, receipt.account, receipt.seller, receipt.amount, receipt.platform_fee, proof)",
      }),
    );
  });

  return router;
}
