import { z } from "zod";
import { hexAddress, dataEnvelope, isoDate, opaqueId, operation, usdNumber } from "./common";

/** Card top-ups (server/http/routes/topups.ts). */

const AMOUNT_MESSAGE = 'amount must be a USD string with at most 2 decimals, such as "10.00".';

/** POST /v1/topups/card's body. Cards charge whole cents. */
export const cardTopupBody = z.object(
  {
    amount: z
      .string({ error: AMOUNT_MESSAGE })
      .regex(/^\d{1,7}(\.\d{1,2})?$/, { error: AMOUNT_MESSAGE })
      .meta({ description: "USD." }),
    card: z
      .string({ error: "card must be a card number string." })
      .max(32, { error: "card must be a card number string." })
      .optional()
      .meta({ description: "A card number: with it, the checkout is paid at once (the sandbox takes its test cards)." }),
  },
  { error: "Body must be a JSON object." },
);

/**
 * The provider's notification, as payments/card-topups.ts reads it once its signature (over the exact
 * bytes, so the route keeps the body as text) has verified: the provider's own format.
 */
export const cardNotificationBody = z.object({
  checkoutId: z.string(),
  eventId: z.string(),
  outcome: z.enum(["paid", "declined", "expired"]),
  amountMicros: z.string().regex(/^[1-9]\d{0,17}$/),
  declineCode: z.enum(["card_declined", "insufficient_funds"]).optional(),
});

const checkoutStatus = z.enum(["created", "paid", "declined", "abandoned", "funded"]);

/**
 * GET /v1/topups/card/:id's path: the card provider's checkout id, letters, digits and _ - . : (anything else is
 * answered as an unknown checkout, 404).
 */
export const checkoutParams = z.object({ id: opaqueId("No such checkout on this account.").meta({ description: "The checkout's id." }) });

export const checkoutView = z
  .strictObject({
    id: z.string(),
    status: checkoutStatus,
    amount: usdNumber,
    address: hexAddress,
    decline_code: z.string().nullable(),
    mint_tx: z.string().nullable(),
    deposit_tx: z.string().nullable(),
    credited: z.boolean(),
    created_at: isoDate,
    expires_at: isoDate,
  })
  .meta({ id: "CardCheckout" });

const nextStep = z.union([
  z.strictObject({ kind: z.literal("card_entry") }),
  z.strictObject({ kind: z.literal("redirect"), url: z.string() }),
]);

/** POST /v1/topups/card's answer: the checkout and what to do next. */
export const startedCheckoutView = checkoutView.extend({ next: nextStep });

/** POST /v1/topups/card/notify's answer. */
export const notificationReceivedView = z.strictObject({ received: z.literal(true), duplicate: z.boolean(), status: checkoutStatus });

export const topupOperations = [
  operation({
    method: "post",
    path: "/v1/topups/card",
    tag: "Top-ups",
    summary: "Top up by card",
    description: "A declined card is an outcome, not an error: 201 with status declined.",
    auth: "session",
    body: cardTopupBody,
    responses: [{ status: 201, description: "The checkout.", schema: dataEnvelope(startedCheckoutView) }],
    errors: ["chain_unavailable", "chain_not_configured", "no_deposit_address", "amount_below_minimum"],
  }),
  operation({
    method: "get",
    path: "/v1/topups/card/{id}",
    tag: "Top-ups",
    summary: "A checkout's status",
    auth: "session",
    params: checkoutParams,
    responses: [{ status: 200, description: "The checkout.", schema: dataEnvelope(checkoutView) }],
    errors: ["not_found"],
  }),
  operation({
    method: "post",
    path: "/v1/topups/card/notify",
    tag: "Top-ups",
    summary: "The card provider's notification of a checkout's outcome",
    description: "Signed by the provider (HMAC of the exact body, in its signature header); no session.",
    auth: "provider",
    body: cardNotificationBody,
    responses: [
      {
        status: 200,
        description: "Received (a duplicate is received again, changing nothing).",
        schema: dataEnvelope(notificationReceivedView),
      },
    ],
    errors: ["invalid_signature", "not_found"],
  }),
];
