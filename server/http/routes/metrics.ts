import { createHash, timingSafeEqual } from "node:crypto";
import express, { type Router } from "express";
import type { GatewayMetrics } from "../../ops/metrics";
import { bearerToken } from "../auth";
import { ApiError } from "../errors";

/**
 *   GET /metrics   the gateway's Prometheus metrics (text exposition format), for a scraper
 *                  that sends `Authorization: Bearer <METRICS_TOKEN>`.
 *
 * Without a METRICS_TOKEN the endpoint is not served (404, as any unknown path): metrics say
 * how much money moves and through which skills, so they are never public by default. A wrong
 * or missing token is answered 401 in the spec's envelope.
 */
export function metricsRoutes(deps: { metrics: GatewayMetrics; token: string }): Router {
  const router = express.Router();
  if (deps.token === "") return router;
  // Compared as SHA-256 digests: equal lengths for timingSafeEqual, and no timing on the token's length.
  const expected = digest(deps.token);
  router.get("/metrics", async (req, res) => {
    const given = bearerToken(req.headers.authorization ?? "");
    if (given === undefined || !timingSafeEqual(digest(given), expected)) {
      throw new ApiError("unauthorized", "GET /metrics needs Authorization: Bearer <METRICS_TOKEN>.");
    }
    const body = await deps.metrics.registry.metrics();
    res.set("content-type", deps.metrics.registry.contentType).set("cache-control", "no-store").send(body);
  });
  return router;
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}
