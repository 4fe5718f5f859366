import { z } from "zod";
import { baseUnits, dataEnvelope, hex32, hexAddress, intQuery, isoDate, operation, usdNumber } from "./common";

/**
 * An account's own books, read with an API key or a dashboard session (server/http/routes/read.ts,
 * history.ts, money.ts, session.ts): balance, usage, daily spend, history, earnings, a call's
 * settlement receipt, and the signed-in person's own view.
 */

export const balanceView = z
  .strictObject({
    currency: z.literal("USDC"),
    available: usdNumber,
    held: usdNumber.meta({ description: "USD held by calls in flight." }),
    available_base_units: baseUnits,
    held_base_units: baseUnits,
  })
  .meta({ id: "Balance" });

export const usageCallView = z
  .strictObject({
    id: z.string().meta({ description: "The call's id (X-Call-Id)." }),
    skill_id: z.string().meta({ description: "The skill's slug (its UUID when it has none)." }),
    skill_uuid: z.string(),
    skill_name: z.string().nullable(),
    endpoint: z.enum(["/v1/call", "/v1/skills/:skillId/call"]),
    status: z.enum(["success", "failed"]),
    outcome: z.string().meta({ description: "success, or why the call failed (skill_error, insufficient_balance, ...)." }),
    http_status: z.number().int(),
    cost: usdNumber,
    cost_base_units: baseUnits,
    response_time_ms: z.number(),
    created_at: isoDate,
    batch_number: z.number().int().nullable(),
    settlement: z.enum(["not_charged", "unsettled", "pending", "settled"]),
  })
  .meta({ id: "UsageCall" });

/** GET /v1/usage's query. */
export const usageQuery = z.object({
  limit: intQuery("limit", 50, 1, 500).meta({ description: "Calls per page." }),
  before: intQuery("before", Number.MAX_SAFE_INTEGER, 0, Number.MAX_SAFE_INTEGER).meta({
    description: "Only calls made before this time (epoch ms): a page's next_before.",
  }),
});

/** GET /v1/usage/daily's query. */
export const dailyQuery = z.object({ days: intQuery("days", 30, 1, 366).meta({ description: "Days back, today included." }) });

/** GET /v1/history's query. */
export const historyQuery = z.object({
  limit: intQuery("limit", 50, 1, 200),
  before: intQuery("before", Number.MAX_SAFE_INTEGER, 0, Number.MAX_SAFE_INTEGER),
});

const nextBefore = z.number().int().nullable().meta({ description: "Pass as ?before= to read the next page; null on the last." });

const earningsView = z.strictObject({
  currency: z.literal("USDC"),
  pending: usdNumber.nullable(),
  settled: usdNumber.nullable(),
  claimable: usdNumber.nullable(),
  claimed: usdNumber.nullable(),
  address: hexAddress.nullable(),
  escrow: hexAddress.nullable(),
});

const receiptView = z.union([
  z.strictObject({ call_id: z.string(), status: z.enum(["not_charged", "unsettled"]) }),
  z.strictObject({
    call_id: z.string(),
    status: z.enum(["pending", "settled"]),
    batch_number: z.number().int(),
    receipts_root: hex32,
    tx_hash: hex32.nullable(),
    receipt: z.strictObject({
      call_id: hex32,
      account: hexAddress,
      seller: hexAddress,
      amount: z.string(),
      platform_fee: z.string(),
    }),
    proof: z.array(hex32),
    verify_with: z.string(),
  }),
]);

/** PATCH /v1/account's body: the display name to set, or null to remove it. */
export const updateAccountBody = z.object(
  {
    display_name: z.string({ error: "display_name must be a string, or null to remove it." }).nullable().meta({
      description:
        "The name the marketplace shows as the seller of the account's skills: 1 to 60 characters once trimmed, no control or invisible characters; null removes it.",
    }),
  },
  { error: "Body must be a JSON object." },
);

const accountView = z.strictObject({ account_id: z.string(), display_name: z.string().nullable() });

const meView = z.strictObject({
  account_id: z.string(),
  name: z.string().meta({ description: "How the account signed up (an e-mail address, a login, an address): never shown to others." }),
  display_name: z.string().nullable().meta({ description: "The seller name the marketplace shows; null until set (PATCH /v1/account)." }),
  identities: z.array(z.strictObject({ provider: z.string(), subject: z.string(), linked_at: isoDate })),
  addresses: z.array(hexAddress),
  wallet: z.strictObject({ address: hexAddress, owner: z.string(), owner_address: hexAddress.nullable() }).nullable(),
  balance: z.strictObject({ currency: z.literal("USDC"), available: usdNumber, held: usdNumber }),
});

export const accountOperations = [
  operation({
    method: "get",
    path: "/v1/balance",
    tag: "Account",
    summary: "The account's balance",
    auth: "account",
    responses: [{ status: 200, description: "Available and held, in USD and base units.", schema: dataEnvelope(balanceView) }],
    errors: [],
  }),
  operation({
    method: "get",
    path: "/v1/usage",
    tag: "Account",
    summary: "The account's calls, newest first",
    auth: "account",
    query: usageQuery,
    responses: [
      {
        status: 200,
        description: "A page of calls.",
        schema: dataEnvelope(z.strictObject({ calls: z.array(usageCallView), next_before: nextBefore })),
      },
    ],
    errors: ["invalid_request"],
  }),
  operation({
    method: "get",
    path: "/v1/usage/daily",
    tag: "Account",
    summary: "The account's spend per day (UTC)",
    auth: "account",
    query: dailyQuery,
    responses: [
      {
        status: 200,
        description: "One entry per day, oldest first.",
        schema: dataEnvelope(
          z.strictObject({
            currency: z.literal("USDC"),
            days: z.array(z.strictObject({ date: z.iso.date(), spend: usdNumber, spend_base_units: baseUnits, calls: z.number().int() })),
          }),
        ),
      },
    ],
    errors: ["invalid_request"],
  }),
  operation({
    method: "get",
    path: "/v1/history",
    tag: "Account",
    summary: "Money in and out of the account, newest first",
    description:
      "Deposits, card top-ups, charges, withdrawal vouchers and exits; amounts signed (money in positive). A card top-up that moved no money (declined, or abandoned unpaid) is listed too, with amount 0 and that status.",
    auth: "account",
    query: historyQuery,
    responses: [
      {
        status: 200,
        description: "A page of history.",
        schema: dataEnvelope(
          z.strictObject({
            items: z.array(
              z.strictObject({
                type: z.enum(["deposit", "card_topup", "charge", "withdrawal", "exit"]),
                amount: usdNumber,
                amount_base_units: baseUnits,
                description: z.string(),
                status: z.string(),
                tx_hash: z.string().nullable(),
                created_at: isoDate,
              }),
            ),
            next_before: nextBefore,
          }),
        ),
      },
    ],
    errors: ["invalid_request"],
  }),
  operation({
    method: "get",
    path: "/v1/earnings",
    tag: "Account",
    summary: "A seller's earnings: pending, settled on-chain, claimable, claimed",
    auth: "account",
    responses: [{ status: 200, description: "USD; null where the chain could not say.", schema: dataEnvelope(earningsView) }],
    errors: [],
  }),
  operation({
    method: "get",
    path: "/v1/calls/{callId}/receipt",
    tag: "Account",
    summary: "A paid call's settlement: batch, receipt and Merkle proof",
    auth: "account",
    params: z.object({ callId: z.string() }),
    responses: [{ status: 200, description: "The receipt, once the call is in a batch.", schema: dataEnvelope(receiptView) }],
    errors: ["not_found", "chain_unavailable", "chain_not_configured"],
  }),
  operation({
    method: "get",
    path: "/v1/me",
    tag: "Account",
    summary: "The signed-in account: identities, addresses, wallet, balance",
    auth: "session",
    responses: [{ status: 200, description: "The account.", schema: dataEnvelope(meView) }],
    errors: [],
  }),
  operation({
    method: "patch",
    path: "/v1/account",
    tag: "Account",
    summary: "Set or remove the account's display name",
    description:
      "The display name is what the marketplace (GET /v1/skills' seller.name) shows as the seller of the account's skills. Without one, a seller is shown by its payout address, shortened.",
    auth: "session",
    body: updateAccountBody,
    responses: [{ status: 200, description: "The display name as stored (trimmed).", schema: dataEnvelope(accountView) }],
    errors: ["invalid_request"],
  }),
];
