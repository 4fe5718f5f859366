import { z } from "zod";
import { dataEnvelope, decimalString, hexAddress, isoDate, operation, usdAmount, usdNumber } from "./common";

/** Instant withdrawals by voucher (server/http/routes/withdrawals.ts). */

/** POST /v1/withdrawals's body: both optional (an empty body withdraws everything to the account's one address). */
export const withdrawalBody = z.object(
  {
    amount: usdAmount("amount").nullable().optional().meta({ description: "USD; everything available when absent." }),
    address: z.string({ error: "address must be a string." }).optional().meta({ description: "Which of the account's addresses." }),
  },
  { error: "Body must be a JSON object." },
);

/** POST /v1/withdrawals's answer: the signed voucher. */
export const issuedVoucherView = z.strictObject({
  amount: usdNumber,
  voucher: z.strictObject({ account: hexAddress, amount: decimalString, nonce: decimalString, deadline: decimalString }),
  signature: z.string(),
  escrow: hexAddress,
  chain_id: z.number().int(),
  expires_at: isoDate,
});

/** A voucher as GET /v1/withdrawals lists it. */
export const listedVoucherView = z.strictObject({
  address: hexAddress,
  nonce: decimalString,
  amount: usdNumber,
  status: z.string(),
  expires_at: isoDate,
  created_at: isoDate,
});

export const withdrawalOperations = [
  operation({
    method: "post",
    path: "/v1/withdrawals",
    tag: "Withdrawals",
    summary: "A voucher to withdraw with SkillEscrow.withdrawWithVoucher",
    description: "The amount leaves the balance at once, so it cannot be spent twice; unredeemed by its deadline, it returns.",
    auth: "account",
    scope: "funds:withdraw",
    body: withdrawalBody,
    bodyOptional: true,
    responses: [
      {
        status: 200,
        description: "The signed voucher.",
        schema: dataEnvelope(issuedVoucherView),
      },
    ],
    errors: ["chain_unavailable", "chain_not_configured", "amount_below_minimum", "insufficient_balance"],
  }),
  operation({
    method: "get",
    path: "/v1/withdrawals",
    tag: "Withdrawals",
    summary: "The account's vouchers and their status",
    auth: "account",
    scope: "funds:withdraw",
    responses: [
      {
        status: 200,
        description: "The newest 100.",
        schema: dataEnvelope(z.array(listedVoucherView)),
      },
    ],
    errors: [],
  }),
];
