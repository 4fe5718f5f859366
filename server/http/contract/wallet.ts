import { z } from "zod";
import {
  baseUnits,
  dataEnvelope,
  decimalString,
  hex32,
  hexAddress,
  isoDate,
  operation,
  recipientAddress,
  usdAmount,
  usdNumber,
} from "./common";
import { ownerSignatureBody, preparedView, userOperationView } from "./claim";

/**
 * The embedded wallet: a SIWE owner's sweep into the escrow, withdrawals to an address, and
 * its QR code (server/http/routes/wallet.ts, wallet-withdraw.ts, platform.ts).
 */

/** POST /v1/wallet/withdraw's and /prepare's body. */
export const walletWithdrawBody = z.object(
  {
    amount: usdAmount("amount").nullable().optional().meta({ description: "USD; everything available when absent." }),
    to: recipientAddress("to"),
  },
  { error: "Body must be a JSON object." },
);

/** A voucher as a failed withdrawal returns it, to be redeemed another way before it expires. */
export const voucherView = z
  .strictObject({
    account: hexAddress,
    amount: decimalString,
    nonce: decimalString,
    deadline: decimalString,
    signature: z.string(),
    escrow: hexAddress,
    chain_id: z.number().int(),
    expires_at: isoDate,
  })
  .meta({ id: "WalletVoucher" });

/** A withdrawal sent and mined: POST /v1/wallet/withdraw's and /submit's answer. */
export const withdrawalSentView = z.strictObject({
  amount: usdNumber,
  amount_base_units: baseUnits,
  to: hexAddress,
  nonce: decimalString,
  user_op_hash: hex32,
  tx_hash: hex32,
});

/** POST /v1/wallet/sweep/prepare's answer. */
export const sweepPreparedView = preparedView.extend({ amount: usdNumber, user_operation: userOperationView });

/** POST /v1/wallet/sweep/submit's answer. */
export const sweptView = z.strictObject({ transaction_hash: hex32, user_op_hash: hex32, amount: usdNumber });

/** POST /v1/wallet/withdraw/prepare's answer: the voucher is issued and the operation built. */
export const withdrawalPreparedView = preparedView.extend({
  amount: usdNumber,
  amount_base_units: baseUnits,
  to: hexAddress,
  nonce: decimalString,
  voucher: voucherView,
});

const WITHDRAW_ERRORS = [
  "chain_unavailable",
  "chain_not_configured",
  "not_found",
  "no_wallet",
  "wrong_withdrawal_flow",
  "withdrawal_in_progress",
  "no_deposit_address",
  "amount_below_minimum",
  "insufficient_balance",
] as const;
const withdrawalFailure = { voucher: voucherView, user_op_hash: hex32 };

export const walletOperations = [
  operation({
    method: "post",
    path: "/v1/wallet/sweep/prepare",
    tag: "Wallet",
    summary: "Prepare the sweep of a SIWE-owned wallet's USDC into the balance",
    auth: "session",
    responses: [
      {
        status: 201,
        description: "The sponsored sweep, for the owner to sign.",
        schema: dataEnvelope(sweepPreparedView),
      },
    ],
    errors: ["chain_unavailable", "chain_not_configured", "not_found", "no_wallet", "wallet_swept_automatically", "amount_below_minimum"],
  }),
  operation({
    method: "post",
    path: "/v1/wallet/sweep/submit",
    tag: "Wallet",
    summary: "Submit a prepared sweep with the owner's signature",
    auth: "session",
    body: ownerSignatureBody,
    responses: [
      {
        status: 200,
        description: "Sent and mined; the deposit is credited from the escrow's event.",
        schema: dataEnvelope(sweptView),
      },
    ],
    errors: ["chain_unavailable", "chain_not_configured", "not_found", "no_wallet", "sweep_in_progress", "user_operation_rejected"],
  }),
  operation({
    method: "post",
    path: "/v1/wallet/withdraw",
    tag: "Wallet",
    summary: "Withdraw to an address (a wallet whose key the gateway holds)",
    auth: "session",
    body: walletWithdrawBody,
    responses: [{ status: 200, description: "Sent and mined.", schema: dataEnvelope(withdrawalSentView) }],
    errors: [...WITHDRAW_ERRORS],
    errorFields: withdrawalFailure,
  }),
  operation({
    method: "post",
    path: "/v1/wallet/withdraw/prepare",
    tag: "Wallet",
    summary: "Prepare a withdrawal to an address for the wallet's owner to sign (SIWE)",
    auth: "session",
    body: walletWithdrawBody,
    responses: [
      {
        status: 201,
        description: "The voucher is issued and the operation built.",
        schema: dataEnvelope(withdrawalPreparedView),
      },
    ],
    errors: [...WITHDRAW_ERRORS],
    errorFields: withdrawalFailure,
  }),
  operation({
    method: "post",
    path: "/v1/wallet/withdraw/submit",
    tag: "Wallet",
    summary: "Submit a prepared withdrawal with the owner's signature",
    auth: "session",
    body: ownerSignatureBody,
    responses: [{ status: 200, description: "Sent and mined.", schema: dataEnvelope(withdrawalSentView) }],
    errors: [...WITHDRAW_ERRORS, "user_operation_rejected"],
    errorFields: withdrawalFailure,
  }),
  operation({
    method: "get",
    path: "/v1/wallet/qr.svg",
    tag: "Wallet",
    summary: "An EIP-681 QR code: send USDC on this chain to the account's wallet",
    auth: "session",
    responses: [{ status: 200, description: "The QR code.", contentType: "image/svg+xml", schema: z.string() }],
    errors: ["not_found", "chain_unavailable", "chain_not_configured"],
  }),
];
