import { z } from "zod";
import { baseUnits, dataEnvelope, hex32, hexAddress, intQuery, isoDate, operation, skillRef, timeQuery, usdNumber, uuidId } from "./common";

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
    api_key_id: z
      .string()
      .meta({ description: "The id of the API key the call was made with (GET /v1/keys); x402 for a call paid with x402." }),
    api_key_name: z
      .string()
      .nullable()
      .meta({ description: 'The key\'s name ("" when it has none); null when the call was not made with a key.' }),
    api_key_prefix: z.string().nullable().meta({ description: "The key's visible start; null when the call was not made with a key." }),
    api_key_metadata: z.record(z.string(), z.string()).nullable().meta({
      description:
        "The key's metadata as it is now (what its maker says the key is for: which agent, which end user; GET /v1/keys); {} when it has none, null when the call was not made with a key.",
    }),
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

/** GET /v1/calls/:callId/receipt's path: a call id is a UUID (anything else is answered as an unknown call, 404). */
export const callParams = z.object({
  callId: uuidId("No such call for this key's account.").meta({ description: "The call's id (X-Call-Id)." }),
});

/** The filters GET /v1/usage, /v1/usage.csv and /v1/usage/daily share. */
const usageFilters = {
  api_key_id: z
    .string({ error: "api_key_id must be the id of one of the account's keys." })
    .min(1, { error: "api_key_id must be the id of one of the account's keys." })
    .max(128, { error: "api_key_id must be the id of one of the account's keys." })
    .optional()
    .meta({
      description: "Only the calls made with this key of the account (an id from GET /v1/keys, revoked keys too); 404 for any other id.",
    }),
  skill_id: skillRef("skill_id must be a skill's slug or UUID.")
    .optional()
    .meta({ description: "Only the calls of this skill, by its slug or its UUID (a call's skill_id or skill_uuid)." }),
};

const FROM_AT_OR_AFTER = "Only the calls made at or after this: a date (2026-11-01, from 00:00 UTC) or an ISO 8601 time with its offset.";
const TO_AT_OR_BEFORE = "Only the calls made at or before this: a date (2026-11-30, to its end, UTC) or an ISO 8601 time with its offset.";

/** A range's bounds, once parsed ([from, to) in epoch ms), are in order. */
const inOrder = { check: (q: { from?: number; to?: number }) => q.from === undefined || q.to === undefined || q.from < q.to };
const OUT_OF_ORDER = { path: ["to"], error: "to must not be before from." };

/** GET /v1/usage's query. */
export const usageQuery = z
  .object({
    limit: intQuery("limit", 50, 1, 500).meta({ description: "Calls per page." }),
    before: intQuery("before", Number.MAX_SAFE_INTEGER, 0, Number.MAX_SAFE_INTEGER).meta({
      description: "Only calls made before this time (epoch ms): a page's next_before.",
    }),
    ...usageFilters,
    from: timeQuery("from", "start").meta({ description: FROM_AT_OR_AFTER }),
    to: timeQuery("to", "end").meta({ description: TO_AT_OR_BEFORE }),
  })
  .refine(inOrder.check, OUT_OF_ORDER);

/** GET /v1/usage.csv's query: the filters of GET /v1/usage, without paging (the file has every call they select). */
export const usageCsvQuery = z
  .object({
    ...usageFilters,
    from: timeQuery("from", "start").meta({ description: FROM_AT_OR_AFTER }),
    to: timeQuery("to", "end").meta({ description: TO_AT_OR_BEFORE }),
  })
  .refine(inOrder.check, OUT_OF_ORDER);

/** The most days GET /v1/usage/daily answers at once. */
export const MAX_DAILY_DAYS = 366;

/** GET /v1/usage/daily's query: `days` back from today, or the days from `from` to `to`. */
export const dailyQuery = z
  .object({
    days: intQuery("days", 30, 1, MAX_DAILY_DAYS).meta({ description: "Days back, today included; not with from." }),
    ...usageFilters,
    from: timeQuery("from", "start", { daysOnly: true }).meta({ description: "The first day (UTC); not with days." }),
    to: timeQuery("to", "end", { daysOnly: true }).meta({
      description: `The last day (UTC), today by default; at most ${MAX_DAILY_DAYS} days from from.`,
    }),
  })
  .refine(inOrder.check, OUT_OF_ORDER);

/** The columns of GET /v1/usage.csv, in order. */
export const USAGE_CSV_COLUMNS = [
  "created_at",
  "call_id",
  "skill_id",
  "skill_name",
  "api_key_id",
  "api_key_name",
  "api_key_metadata",
  "endpoint",
  "status",
  "outcome",
  "http_status",
  "cost_usd",
  "cost_base_units",
  "response_time_ms",
  "settlement",
  "batch_number",
] as const;

/** GET /v1/history's query. */
export const historyQuery = z.object({
  limit: intQuery("limit", 50, 1, 200),
  before: intQuery("before", Number.MAX_SAFE_INTEGER, 0, Number.MAX_SAFE_INTEGER),
});

/** Some calls' spend and how many they were (429s, which reached no skill, are not counted). */
const spendTotal = z.strictObject({ spend: usdNumber, spend_base_units: baseUnits, calls: z.number().int() });
/** Calls the key's own limits refused (rate limits, daily cap): counted, not listed as calls, and not in `calls`. */
const refusedCount = z
  .number()
  .int()
  .meta({ description: "Calls refused by the key's own limits (rate limits, the daily cap): counted, never listed or charged." });

const nextBefore = z.number().int().nullable().meta({ description: "Pass as ?before= to read the next page; null on the last." });

/** GET /v1/usage's answer: a page of calls. */
export const usagePageView = z.strictObject({ calls: z.array(usageCallView), next_before: nextBefore });

/** GET /v1/usage/daily's answer. */
export const dailyView = z.strictObject({
  currency: z.literal("USDC"),
  from: z.iso.date().meta({ description: "The first day shown (UTC)." }),
  to: z.iso.date().meta({ description: "The last day shown (UTC)." }),
  days: z.array(spendTotal.extend({ date: z.iso.date(), refused: refusedCount })),
  total: spendTotal.extend({ refused: refusedCount }).meta({ description: "The days' calls and spend, summed." }),
  month_to_date: spendTotal.extend({ month: z.string().regex(/^\d{4}-\d{2}$/), refused: refusedCount }).meta({
    description: "The current UTC month's calls and spend until now, with the same key and skill filters, whatever the days shown.",
  }),
});

/** GET /v1/usage/keys's answer. */
export const usageByKeyView = z.strictObject({
  currency: z.literal("USDC"),
  day: z.iso.date().meta({ description: "Today (UTC)." }),
  month: z
    .string()
    .regex(/^\d{4}-\d{2}$/)
    .meta({ description: "This month (UTC)." }),
  keys: z.array(z.strictObject({ api_key_id: z.string(), today: spendTotal, month: spendTotal, total: spendTotal })),
});

/** GET /v1/history's answer: a page of money in and out. */
export const historyView = z.strictObject({
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
});

export const earningsView = z.strictObject({
  currency: z.literal("USDC"),
  pending: usdNumber.nullable(),
  settled: usdNumber.nullable(),
  claimable: usdNumber.nullable(),
  claimed: usdNumber.nullable(),
  address: hexAddress.nullable(),
  escrow: hexAddress.nullable(),
});

export const receiptView = z.union([
  z.strictObject({ call_id: z.string(), status: z.enum(["not_charged", "unsettled"]) }),
  z.strictObject({
    call_id: z.string(),
    status: z.enum(["pending", "settled"]),
    batch_number: z.number().int(),
    receipts_root: hex32,
    tx_hash: hex32.nullable(),
    escrow: hexAddress.nullable().meta({ description: "The SkillEscrow whose receiptsRoots(batch_number) the proof leads to." }),
    chain_id: z.number().int().nullable().meta({ description: "The chain the escrow is on." }),
    receipt: z.strictObject({
      call_id: hex32,
      account: hexAddress,
      seller: hexAddress,
      amount: z.string(),
      platform_fee: z.string(),
    }),
    leaf: hex32.meta({ description: "keccak256(keccak256(abi.encode(receipt))): the Merkle leaf the proof starts from." }),
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

export const accountView = z.strictObject({ account_id: z.string(), display_name: z.string().nullable() });

export const meView = z.strictObject({
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
    scope: "usage:read",
    responses: [{ status: 200, description: "Available and held, in USD and base units.", schema: dataEnvelope(balanceView) }],
    errors: [],
  }),
  operation({
    method: "get",
    path: "/v1/usage",
    tag: "Account",
    summary: "The account's calls, newest first",
    description: "Filtered by key, skill and time when those are given.",
    auth: "account",
    scope: "usage:read",
    ownCalls: true,
    query: usageQuery,
    responses: [
      {
        status: 200,
        description: "A page of calls.",
        schema: dataEnvelope(usagePageView),
      },
    ],
    errors: ["invalid_request", "not_found"],
  }),
  operation({
    method: "get",
    path: "/v1/usage.csv",
    tag: "Account",
    summary: "The account's calls as a CSV file, newest first",
    description:
      "The calls GET /v1/usage would list with the same filters, all of them, streamed: a header row, then one row per call, with the columns " +
      `${USAGE_CSV_COLUMNS.join(", ")}. Times are ISO 8601 UTC; cost_usd is a decimal string ("0.0025") and cost_base_units the exact integer; api_key_metadata is the key's metadata as a JSON object, empty when it has none. ` +
      "A text cell that starts with =, +, -, @ or a control character is prefixed with ' so that a spreadsheet shows it as text.",
    auth: "account",
    scope: "usage:read",
    ownCalls: true,
    query: usageCsvQuery,
    responses: [
      { status: 200, description: "The CSV (RFC 4180, UTF-8, CRLF), as an attachment.", contentType: "text/csv", schema: z.string() },
    ],
    errors: ["invalid_request", "not_found"],
  }),
  operation({
    method: "get",
    path: "/v1/usage/daily",
    tag: "Account",
    summary: "The account's spend per day (UTC)",
    description: `Filtered by key and skill when those are given; at most ${MAX_DAILY_DAYS} days at once.`,
    auth: "account",
    scope: "usage:read",
    ownCalls: true,
    query: dailyQuery,
    responses: [
      {
        status: 200,
        description: "One entry per day, oldest first, with the range's total and this month's spend so far.",
        schema: dataEnvelope(dailyView),
      },
    ],
    errors: ["invalid_request", "not_found"],
  }),
  operation({
    method: "get",
    path: "/v1/usage/keys",
    tag: "Account",
    summary: "Calls and spend per API key: today, this month, in total",
    description: "Every key of the account that made calls, revoked ones included; today and this month are UTC's.",
    auth: "account",
    scope: "usage:read",
    ownCalls: true,
    responses: [
      {
        status: 200,
        description: "One entry per key.",
        schema: dataEnvelope(usageByKeyView),
      },
    ],
    errors: [],
  }),
  operation({
    method: "get",
    path: "/v1/history",
    tag: "Account",
    summary: "Money in and out of the account, newest first",
    description:
      "Deposits, card top-ups, charges, withdrawal vouchers and exits; amounts signed (money in positive). A card top-up that moved no money (declined, or abandoned unpaid) is listed too, with amount 0 and that status.",
    auth: "account",
    scope: "usage:read",
    query: historyQuery,
    responses: [
      {
        status: 200,
        description: "A page of history.",
        schema: dataEnvelope(historyView),
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
    scope: "usage:read",
    responses: [{ status: 200, description: "USD; null where the chain could not say.", schema: dataEnvelope(earningsView) }],
    errors: [],
  }),
  operation({
    method: "get",
    path: "/v1/calls/{callId}/receipt",
    tag: "Account",
    summary: "A paid call's settlement: batch, receipt and Merkle proof",
    auth: "account",
    scope: "usage:read",
    ownCalls: true,
    params: callParams,
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
