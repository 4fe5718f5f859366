import express, { type Router } from "express";
import { jsonBody } from "../json-body";
import type { ApiKeys } from "../../identity/api-keys";
import { type VoucherIssuer, issueRefusal } from "../../settlement/vouchers";
import { microsToUsd } from "../../ledger/money";
import type { Db } from "../../db/db";
import { requireAccount } from "../auth";
import type { Sessions } from "../../identity/sessions";
import { objectBody, optionalUsd } from "../body";
import { dataEnvelope } from "../envelope";
import { ApiError, refuse } from "../errors";

/**
 * Instant withdrawals (issue 4, exits seen from the gateway):
 *   POST /v1/withdrawals { amount?: "1.50" (USD; all available when absent), address? }
 *     → a voucher signed by the gateway, to submit to SkillEscrow.withdrawWithVoucher.
 *       The amount leaves the balance at once, so it cannot be spent twice.
 *   GET /v1/withdrawals → the account's vouchers and their status.
 */
export function withdrawalRoutes(deps: { keys: ApiKeys; sessions: Sessions; db: Db; vouchers?: VoucherIssuer }): Router {
  const router = express.Router();
  const auth = requireAccount(deps.keys, deps.sessions);
  const json = jsonBody(4_096);

  router.post("/v1/withdrawals", auth, json, async (req, res) => {
    if (!deps.vouchers) throw new ApiError("chain_not_configured", "Withdrawals need the gateway to be connected to its escrow chain.");
    const body = objectBody(req.body);
    const amountMicros = optionalUsd(body.amount, "amount");
    if (body.address !== undefined && typeof body.address !== "string") throw new ApiError("invalid_request", "address must be a string.");
    const result = await deps.vouchers.issue(req.accountId!, { amountMicros, address: body.address as string | undefined });
    if (!result.ok) refuse(issueRefusal(result));
    const { voucher, signature, escrow, chainId } = result.issued;
    res.json(
      dataEnvelope({
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

  router.get("/v1/withdrawals", auth, (req, res) => {
    const rows = deps.db
      .prepare(
        "SELECT address, nonce, amount, deadline, status, created_at FROM vouchers WHERE account_id = ? ORDER BY created_at DESC LIMIT 100",
      )
      .all(req.accountId!) as Array<{
      address: string;
      nonce: bigint;
      amount: bigint;
      deadline: bigint;
      status: string;
      created_at: bigint;
    }>;
    res.json(
      dataEnvelope(
        rows.map((r) => ({
          address: r.address,
          nonce: r.nonce.toString(),
          amount: microsToUsd(r.amount),
          status: r.status,
          expires_at: new Date(Number(r.deadline) * 1000).toISOString(),
          created_at: new Date(Number(r.created_at)).toISOString(),
        })),
      ),
    );
  });

  return router;
}
