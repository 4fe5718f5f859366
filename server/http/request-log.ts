import type http from "node:http";
import { performance } from "node:perf_hooks";
import type { Logger } from "pino";
import type { GatewayMetrics } from "../ops/metrics";
import { type RequestContext, requestIdFrom, runInRequest } from "../ops/request-context";

/** The route of a request no route served (a 404): its path is the client's and is not logged. */
export const UNMATCHED_ROUTE = "(unmatched)";

/**
 * Wraps the gateway's request listener: gives each request its id (X-Request-Id, echoed on
 * the response), runs the listener inside that request's context (server/ops/request-context.ts),
 * and when the response is done writes the request's one log line and counts it.
 *
 * The line names the route pattern, never the URL (whose query may carry a token), and never
 * a header or a body: what identifies a caller (a key, a cookie) stays out of the log.
 */
export function observeRequests(deps: { logger: Logger; metrics: GatewayMetrics }, listener: http.RequestListener): http.RequestListener {
  return (req, res) => {
    const startedAt = performance.now();
    const context: RequestContext = { id: requestIdFrom(req.headers["x-request-id"]) };
    res.setHeader("x-request-id", context.id);
    res.once("close", () => {
      const route = context.route ?? expressRoute(req) ?? UNMATCHED_ROUTE;
      const method = req.method ?? "";
      const latencyMs = Math.round((performance.now() - startedAt) * 100) / 100;
      // A response that never finished was cut off (the client hung up, or a drain gave up on it).
      const status = res.writableFinished ? res.statusCode : null;
      deps.metrics.observeRequest(method, route, status ?? 0);
      const line: Record<string, unknown> = { request_id: context.id, method, route, status, latency_ms: latencyMs };
      if (context.skill !== undefined) {
        line.skill = context.skill;
        line.outcome = context.outcome;
        line.charged_micros = String(context.chargedMicros ?? 0n);
      }
      deps.logger.info(line, status === null ? "request cut off" : "request");
    });
    runInRequest(context, () => listener(req, res));
  };
}

/**
 * The pattern of the Express route that answered (`/v1/keys/:id`), if one did. A route declared
 * with several literal paths (the dashboard's pages) is named by the one requested.
 */
function expressRoute(req: http.IncomingMessage): string | undefined {
  const { route, path } = req as { route?: { path?: unknown }; path?: string };
  if (typeof route?.path === "string") return route.path;
  if (Array.isArray(route?.path)) return route.path.find((p) => p === path) ?? route.path.filter((p) => typeof p === "string").join(",");
  return undefined;
}
