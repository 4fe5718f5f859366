import express, { type Router } from "express";
import { jsonBody } from "../json-body";
import { CARD_SIGNATURE_HEADER } from "../../payments/card-provider";
import { type CardCheckout, type CardTopups, MAX_CARD_TOPUP_MICROS } from "../../payments/card-topups";
import type { Sessions } from "../../identity/sessions";
import { microsToUsd, usdDisplay, usdToMicros } from "../../ledger/money";
import { dataEnvelopeOf } from "../envelope";
import { ApiError, refuse } from "../errors";
import { requireSession } from "../session-cookies";
import { parseParams, parseRequest } from "../contract/common";
import { cardTopupBody, checkoutParams, checkoutView, notificationReceivedView, startedCheckoutView } from "../contract/topups";
import type { z } from "zod";

const view = (checkout: CardCheckout): z.input<typeof checkoutView> => ({
  id: checkout.id,
  status: checkout.status,
  amount: microsToUsd(checkout.amountMicros),
  address: checkout.address,
  decline_code: checkout.declineCode,
  mint_tx: checkout.mintTx,
  deposit_tx: checkout.depositTx,
  credited: checkout.credited,
  created_at: new Date(checkout.createdAtMs).toISOString(),
  expires_at: new Date(checkout.expiresAtMs).toISOString(),
});

/**
 * Card top-ups (server/payments/card-topups.ts):
 *   POST /v1/topups/card { amount: "10.00", card? }  (session + CSRF) → the checkout; with a card, paid at once
 *   GET  /v1/topups/card/:id                          (session)        → the checkout's status
 *   POST /v1/topups/card/notify                       (the provider's HMAC signature, no session)
 * A declined card is an outcome, not an error: 200 with status `declined`. Refusals: 400 amount_below_minimum,
 * 400 invalid_request (amount or card number), 409 no_deposit_address, 503 chain_not_configured (no funding wallet).
 */
export function topupRoutes(deps: { sessions: Sessions; cardTopups: CardTopups }): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);
  const json = jsonBody(4_096);
  // The signature covers the exact bytes, so the body is kept as text.
  const raw = express.text({ limit: 16_384, type: () => true });

  router.post("/v1/topups/card/notify", raw, async (req, res) => {
    const body = typeof req.body === "string" ? req.body : "";
    const result = await deps.cardTopups.receive(body, req.get(CARD_SIGNATURE_HEADER));
    if (!result.ok) refuse(result);
    res.json(dataEnvelopeOf(notificationReceivedView, { received: true, duplicate: result.duplicate, status: result.checkout.status }));
  });

  router.post("/v1/topups/card", session, json, async (req, res) => {
    const body = parseRequest(cardTopupBody, req.body ?? {});
    const amountMicros = usdToMicros(body.amount);
    if (amountMicros === 0n || amountMicros > MAX_CARD_TOPUP_MICROS) {
      throw new ApiError("invalid_request", `Amount must be above $0.00 and at most ${usdDisplay(MAX_CARD_TOPUP_MICROS)}.`);
    }
    const result = await deps.cardTopups.start(req.session!.accountId, amountMicros, body.card);
    if (!result.ok) refuse(result);
    res.status(201).json(dataEnvelopeOf(startedCheckoutView, { ...view(result.checkout), next: result.next }));
  });

  router.get("/v1/topups/card/:id", session, async (req, res) => {
    const { id } = parseParams(checkoutParams, req.params, "No such checkout on this account.");
    const checkout = await deps.cardTopups.get(req.session!.accountId, id);
    if (!checkout) throw new ApiError("not_found", "No such checkout on this account.");
    res.set("cache-control", "no-store");
    res.json(dataEnvelopeOf(checkoutView, view(checkout)));
  });

  return router;
}
