import express, { type Router } from "express";
import type { ApiKeys } from "../../identity/api-keys";
import type { Sessions } from "../../identity/sessions";
import type { Ledger } from "../../ledger/ledger";
import { accountHistory } from "../../ledger/history";
import { microsToUsd } from "../../ledger/money";
import { requireAccount } from "../auth";
import { dataEnvelopeOf } from "../envelope";
import { historyQuery, historyView } from "../contract/account";
import { parseRequest } from "../contract/common";

/**
 * GET /v1/history?limit=50&before=<ms>   (session or API key)
 * The account's deposits, card top-ups, charges, withdrawal vouchers and exits, newest first:
 * the Wallet page's history. Amounts are signed (money in positive) in USD and base units.
 */
export function historyRoutes(deps: { keys: ApiKeys; sessions: Sessions; ledger: Ledger }): Router {
  const router = express.Router();
  /** The key-or-session check of a route, with the scope its declaration (server/http/contract/) names. */
  const auth = (route: string) => requireAccount(deps.keys, deps.sessions, route);

  router.get("/v1/history", auth("GET /v1/history"), async (req, res) => {
    const { limit, before } = parseRequest(historyQuery, req.query);
    const items = await accountHistory(deps.ledger.db, req.accountId!, { limit, beforeMs: before });
    res.set("cache-control", "no-store");
    res.json(
      dataEnvelopeOf(historyView, {
        items: items.map((i) => ({
          type: i.type,
          amount: microsToUsd(i.amountMicros),
          amount_base_units: i.amountMicros.toString(),
          description: i.description,
          status: i.status,
          tx_hash: i.txHash,
          created_at: new Date(i.createdAtMs).toISOString(),
        })),
        next_before: items.length === limit ? items[items.length - 1].createdAtMs : null,
      }),
    );
  });

  return router;
}
