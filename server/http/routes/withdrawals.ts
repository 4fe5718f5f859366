import express, { type Router } from "express";
import { jsonBody } from "../json-body";
import type { ApiKeys } from "../../identity/api-keys";
import { type VoucherIssuer, issueRefusal } from "../../settlement/vouchers";
import { microsToUsd } from "../../ledger/money";
import type { VoucherStore } from "../../settlement/vouchers-store";
import { requireAccount } from "../auth";
import type { Sessions } from "../../identity/sessions";
import { dataEnvelopeOf } from "../envelope";
import { ApiError, refuse } from "../errors";
import { parseRequest } from "../contract/common";
import { issuedVoucherView, listedVoucherView, withdrawalBody } from "../contract/withdrawals";

/**
 * Instant withdrawals (issue 4, exits seen from the gateway):
 *   POST /v1/withdrawals { amount?: "1.50" (USD; all available when absent), address? }
 *     → a voucher signed by the gateway, to submit to SkillEscrow.withdrawWithVoucher.
 *       The amount leaves the balance at once, so it cannot be spent twice.
 *   GET /v1/withdrawals → the account's vouchers and their status.
 */
export function withdrawalRoutes(deps: {
  keys: ApiKeys;
  sessions: Sessions;
  voucherStore: VoucherStore;
  vouchers?: VoucherIssuer;
}): Router {
  const router = express.Router();
  /** The key-or-session check of a route, with the scope its declaration (server/http/contract/) names. */
  const auth = (route: string) => requireAccount(deps.keys, deps.sessions, route);
  const json = jsonBody(4_096);

  router.post("/v1/withdrawals", auth("POST /v1/withdrawals"), json, async (req, res) => {
    if (!deps.vouchers) throw new ApiError("chain_not_configured", "Withdrawals need the gateway to be connected to its escrow chain.");
    const body = parseRequest(withdrawalBody, req.body ?? {});
    const result = await deps.vouchers.issue(req.accountId!, { amountMicros: body.amount ?? undefined, address: body.address });
    if (!result.ok) refuse(issueRefusal(result));
    const { voucher, signature, escrow, chainId } = result.issued;
    res.json(
      dataEnvelopeOf(issuedVoucherView, {
        amount: microsToUsd(voucher.amount),
        voucher: {
          account: voucher.account,
          amount: voucher.amount.toString(),
          nonce: voucher.nonce.toString(),
          deadline: voucher.deadline.toString(),
        },
        signature,
        escrow,
        chain_id: chainId,
        expires_at: new Date(Number(voucher.deadline) * 1000).toISOString(),
      }),
    );
  });

  router.get("/v1/withdrawals", auth("GET /v1/withdrawals"), async (req, res) => {
    const vouchers = await deps.voucherStore.ofAccount(req.accountId!, 100);
    res.json(
      dataEnvelopeOf(
        listedVoucherView.array(),
        vouchers.map((v) => ({
          address: v.address,
          nonce: v.nonce.toString(),
          amount: microsToUsd(v.amountMicros),
          status: v.status,
          expires_at: new Date(Number(v.deadlineSec) * 1000).toISOString(),
          created_at: new Date(v.createdAtMs).toISOString(),
        })),
      ),
    );
  });

  return router;
}
