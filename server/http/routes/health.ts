import express, { type Router } from "express";
import type { MoneyPath } from "../../settlement/money-path";
import type { ChainConnection } from "../../settlement/money-path";
import type { Ledger } from "../../ledger/ledger";
import { checkReadiness } from "../../ops/readiness";
import { dataEnvelopeOf, errorEnvelope } from "../envelope";
import { livenessView, readinessView } from "../contract/platform";

/**
 *   GET /healthz   liveness: the process answers (always 200 while it does)
 *   GET /readyz    readiness: 200 when the ledger commits, Redis (if used) and the chain answer, and the money
 *                  path's loops are neither halted nor lagging; 503 not_ready naming what is
 *                  wrong otherwise (server/ops/readiness.ts). Both answer in the spec's envelope.
 */
export function healthRoutes(deps: {
  ledger: Ledger;
  chain?: ChainConnection;
  moneyPath?: MoneyPath;
  /** With REDIS_URL: the shared limits' connection, checked by /readyz. */
  redis?: { ping(): Promise<unknown> };
  maxLagMs: number;
  log: (message: string, error?: unknown) => void;
}): Router {
  const router = express.Router();
  // One check a second at most, however many ask: each costs a durable commit and an RPC.
  let cached: { atMs: number; result: ReturnType<typeof checkReadiness> } | undefined;
  const readiness = () => {
    const now = Date.now();
    if (!cached || now - cached.atMs >= 1_000) {
      cached = {
        atMs: now,
        result: checkReadiness({
          database: deps.ledger.db,
          redis: deps.redis,
          publicClient: deps.chain?.publicClient,
          indexer: deps.moneyPath?.indexer,
          settler: deps.moneyPath?.settler,
          maxLagMs: deps.maxLagMs,
          log: deps.log,
        }),
      };
    }
    return cached.result;
  };

  router.get("/healthz", (_req, res) => {
    res.json(dataEnvelopeOf(livenessView, { status: "ok" }));
  });

  router.get("/readyz", async (_req, res) => {
    const { ready, checks } = await readiness();
    res.set("cache-control", "no-store");
    if (ready) {
      res.json(dataEnvelopeOf(readinessView, { status: "ready", checks }));
      return;
    }
    const failing = Object.entries(checks)
      .filter(([, check]) => !check.ok)
      .map(([name, check]) => `${name}: ${check.detail}`);
    res.status(503).json(errorEnvelope("not_ready", `Not ready: ${failing.join("; ")}`, { checks }));
  });

  return router;
}
