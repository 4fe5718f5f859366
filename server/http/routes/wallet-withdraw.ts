import express, { type Router } from "express";
import { jsonBody } from "../json-body";
import type { Address, Hex } from "viem";
import type { Sessions } from "../../identity/sessions";
import type { WalletService } from "../../wallets/wallet-service";
import type { Refusal } from "../../errors";
import type { IssuedVoucher } from "../../settlement/vouchers";
import { microsToUsd } from "../../ledger/money";
import { dataEnvelopeOf } from "../envelope";
import { preparedViewOf, readOwnerSignature } from "../owner-signed";
import { ApiError, refuse } from "../errors";
import { requireSession } from "../session-cookies";
import { parseRequest } from "../contract/common";
import { type voucherView, walletWithdrawBody, withdrawalPreparedView, withdrawalSentView } from "../contract/wallet";
import type { z } from "zod";

/**
 * A withdrawal to an address, through the account's embedded wallet (server/wallets/wallet-withdrawals.ts). A
 * plain voucher (POST /v1/withdrawals) pays the embedded wallet, whose USDC the sweep puts straight back into the
 * escrow; these redeem the voucher and pass the USDC on to `to` in one sponsored UserOperation:
 *   POST /v1/wallet/withdraw { amount?, to }                a wallet whose owner key the gateway holds (e-mail, OAuth
 *        sign-in): sent and mined → { amount, amount_base_units, to, nonce, user_op_hash, tx_hash }
 *   POST /v1/wallet/withdraw/prepare { amount?, to }        a wallet its SIWE address owns: the voucher is issued and
 *        the operation built → 201 { user_op_hash, amount, amount_base_units, to, nonce, expires_at, ... }; the
 *        owner personal_signs user_op_hash (32 raw bytes)
 *   POST /v1/wallet/withdraw/submit { user_op_hash, signature } → sent and mined → the same as the first
 * `amount` is USD (all available when absent); `to` an address (EIP-55 or lowercase), never zero, the escrow or
 * the wallet itself. The amount leaves the balance when the voucher is issued. If the operation then fails, the
 * error body carries `voucher` (still valid until its deadline, redeemable with SkillEscrow.withdrawWithVoucher;
 * unredeemed, it returns to the balance after that) and the money is never taken twice.
 * All need a session and its CSRF token; without the ERC-4337 stack or a voucher signer, 503 chain_not_configured.
 */
export function walletWithdrawRoutes(deps: {
  sessions: Sessions;
  wallets?: WalletService;
  log: (message: string, error?: unknown) => void;
}): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);
  const json = jsonBody(4_096);
  const withdrawals = () => {
    const service = deps.wallets?.withdrawals;
    if (!service)
      throw new ApiError("chain_not_configured", "Withdrawals to an address need the gateway's embedded wallets and escrow chain.");
    return service;
  };

  router.post("/v1/wallet/withdraw", session, json, async (req, res) => {
    const service = withdrawals();
    const { amountMicros, to } = readWithdrawal(req.body);
    const result = await service.withdrawTo(req.session!.accountId, { amountMicros, to });
    if (!result.ok) refuse(withVoucher(result));
    res.json(dataEnvelopeOf(withdrawalSentView, sent(result)));
  });

  router.post("/v1/wallet/withdraw/prepare", session, json, async (req, res) => {
    const service = withdrawals();
    const { amountMicros, to } = readWithdrawal(req.body);
    const result = await service.prepareOwnerWithdrawal(req.session!.accountId, { amountMicros, to });
    if (!result.ok) refuse(withVoucher(result));
    const { prepared } = result;
    const { voucher } = prepared.details.voucher;
    res.set("cache-control", "no-store");
    res.status(201).json(
      dataEnvelopeOf(withdrawalPreparedView, {
        ...preparedViewOf(prepared),
        amount: microsToUsd(voucher.amount),
        amount_base_units: voucher.amount.toString(),
        to: prepared.details.to,
        nonce: voucher.nonce.toString(),
        voucher: voucherBody(prepared.details.voucher),
      }),
    );
  });

  router.post("/v1/wallet/withdraw/submit", session, json, async (req, res) => {
    const service = withdrawals();
    const { hash, signature } = readOwnerSignature(req.body);
    const result = await service.submitOwnerWithdrawal(req.session!.accountId, hash, signature);
    if (!result.ok) refuse(withVoucher(result));
    res.json(dataEnvelopeOf(withdrawalSentView, sent(result)));
  });

  return router;
}

function sent(result: {
  amountMicros: bigint;
  nonce: bigint;
  to: Address;
  userOpHash: Hex;
  transactionHash: Hex;
}): z.input<typeof withdrawalSentView> {
  return {
    amount: microsToUsd(result.amountMicros),
    amount_base_units: result.amountMicros.toString(),
    to: result.to,
    nonce: result.nonce.toString(),
    user_op_hash: result.userOpHash,
    tx_hash: result.transactionHash,
  };
}

function voucherBody(issued: IssuedVoucher): z.input<typeof voucherView> {
  const { voucher, signature, escrow, chainId } = issued;
  return {
    account: voucher.account,
    amount: voucher.amount.toString(),
    nonce: voucher.nonce.toString(),
    deadline: voucher.deadline.toString(),
    signature,
    escrow,
    chain_id: chainId,
    expires_at: new Date(Number(voucher.deadline) * 1000).toISOString(),
  };
}

/** `amount` (optional USD string or number, ≤ 6 decimals) and `to` (required address, EIP-55 or lowercase, not zero). */
function readWithdrawal(body: unknown): { amountMicros: bigint | undefined; to: Address } {
  const { amount, to } = parseRequest(walletWithdrawBody, body ?? {});
  return { amountMicros: amount ?? undefined, to: to as Address };
}

/**
 * A refusal as the client sees it: one that came after the voucher was issued carries the voucher (still valid
 * until its deadline, redeemable another way) and the operation's hash when there was one.
 */
function withVoucher(result: Refusal & { voucher?: IssuedVoucher; userOpHash?: Hex }): Refusal {
  if (!result.voucher) return result;
  const details = { voucher: voucherBody(result.voucher), ...(result.userOpHash ? { user_op_hash: result.userOpHash } : {}) };
  return { ok: false, code: result.code, message: result.message, cause: result.cause, details };
}
