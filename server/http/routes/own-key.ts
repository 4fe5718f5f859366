import express, { type Router } from "express";
import type { ApiKeys } from "../../identity/api-keys";
import type { Ledger } from "../../ledger/ledger";
import { microsToUsd } from "../../ledger/money";
import { requireApiKey } from "../auth";
import { dataEnvelopeOf } from "../envelope";
import { ownKeyView } from "../contract/own-key";
import { view as keyRecordView } from "./keys";

/**
 * GET /v1/key: the calling key reads itself (issue 24, budgets an agent can see). Any valid key may, whatever its
 * scopes: its record as GET /v1/keys lists it (the one view of a key), with `remaining_usd` (what its spending limit
 * leaves it in the current period) and the account's available balance. `now` is the clock spending periods are read by.
 */
export function ownKeyRoutes(deps: { keys: ApiKeys; ledger: Ledger; now?: () => number }): Router {
  const router = express.Router();
  const now = deps.now ?? Date.now;

  router.get("/v1/key", requireApiKey(deps.keys, "GET /v1/key"), async (req, res) => {
    const authenticated = req.apiKey!;
    const nowMs = now();
    // Read as the listing reads it (its last use not yet written included), not as the authentication cache holds it.
    const [listed, limits, balance] = await Promise.all([
      deps.keys.listForAccount(authenticated.accountId),
      deps.keys.spendLimits([authenticated.id], nowMs),
      deps.ledger.balance(authenticated.accountId),
    ]);
    const record = listed.find((k) => k.id === authenticated.id) ?? authenticated;
    const limit = limits.get(record.id);
    const remainingMicros = limit ? (limit.limitMicros > limit.spentMicros ? limit.limitMicros - limit.spentMicros : 0n) : null;
    res.set("cache-control", "no-store");
    res.json(
      dataEnvelopeOf(ownKeyView, {
        ...keyRecordView(record, limit),
        remaining_usd: remainingMicros === null ? null : microsToUsd(remainingMicros),
        remaining_base_units: remainingMicros === null ? null : remainingMicros.toString(),
        available_usd: microsToUsd(balance.availableMicros),
        available_base_units: balance.availableMicros.toString(),
      }),
    );
  });

  return router;
}
