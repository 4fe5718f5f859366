import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { EgressPolicy } from "./egress";
import { type ForwardResult, Forwarder } from "./forward";

/**
 * The test call a new listing makes to its backend (issue 16): one real, signed call, so that a seller hears at
 * once what the backend answers instead of the skill's first callers meeting a dead port.
 *
 * It is a call like any other the gateway forwards (./forward.ts): POSTed JSON, the input `{}`, signed
 * with the skill's new secret (X-Skill-Call-Id, X-Skill-Timestamp, X-Skill-Signature), under the egress policy on
 * every connection, within the skill's timeout but never longer than LISTING_CHECK_TIMEOUT_MS. Nobody pays for it.
 *
 * A backend that gives no HTTP answer at all (the connection refused or reset, no route, TLS failing, the egress
 * policy refusing the address it resolves to) is dead: the listing is refused. Any HTTP answer means something
 * listens there: the skill is listed, and the seller is shown the answer, with a warning when it is not the 2xx
 * JSON a call needs (a 4xx is usually the backend refusing the empty test input, which is fine). A backend that
 * accepts the connection but does not answer in time is listed with a warning too: it may be slow to start.
 */

/** The longest a listing waits for its test call. */
export const LISTING_CHECK_TIMEOUT_MS = 5_000;

/** How much of the backend's answer the seller is shown. */
const SNIPPET_CHARS = 200;

// The check's shapes belong to the catalog, which asks for it (a listing); the call path's forwarder makes it here.
export type { BackendCheck, BackendCheckTarget, CheckBackend } from "../catalog/backend-check";
import type { BackendCheck, CheckBackend } from "../catalog/backend-check";

/**
 * Builds the listing's test call. Each check gets a forwarder of its own, closed after it: a listing's backend
 * may never be called again, so its connection pool is not kept beside the call path's.
 */
export function backendChecker(options: { egress: EgressPolicy; maxResponseBytes: number }): CheckBackend {
  return async (target) => {
    const forwarder = new Forwarder({ egress: options.egress, maxResponseBytes: options.maxResponseBytes, connectionsPerOrigin: 1 });
    const timeoutMs = Math.min(target.timeoutMs, LISTING_CHECK_TIMEOUT_MS);
    const started = performance.now();
    try {
      // The test call is made only for a seller's own listing or backend edit (the operator's register script
      // makes none), so it is held to the public-address rule even on an origin the operator allowlisted.
      const result = await forwarder.forward({ ...target, timeoutMs, operatorListed: false }, randomUUID(), {});
      return describeCheck(result, Math.round((performance.now() - started) * 10) / 10, timeoutMs);
    } finally {
      await forwarder.close();
    }
  };
}

/** Turns the forwarder's answer into what the seller is told. */
export function describeCheck(result: ForwardResult, latencyMs: number, timeoutMs: number): BackendCheck {
  // The backend's words, shown to the seller: control and format characters (a bell, a bidi override) become U+FFFD,
  // and the cut falls between code points, never inside a surrogate pair.
  const clip = (text: string) => {
    const chars = [...text.replace(/[\p{Cf}]|(?![\n\t])\p{Cc}/gu, "\uFFFD")];
    return chars.length > SNIPPET_CHARS ? `${chars.slice(0, SNIPPET_CHARS - 1).join("")}…` : chars.join("");
  };
  if (result.kind === "ok") {
    return {
      reachable: true,
      ok: true,
      status: result.status,
      latencyMs,
      snippet: clip(JSON.stringify(result.data)),
      message: `The backend answered the test call with HTTP ${result.status}.`,
    };
  }
  if (result.kind === "rejected") {
    return {
      reachable: true,
      ok: false,
      status: result.status,
      latencyMs,
      snippet: clip(result.message),
      message: `The backend answered the test call (input {}) with HTTP ${result.status}: it is up, and refused that input.`,
    };
  }
  switch (result.reason) {
    case "unreachable":
    case "forbidden":
      return {
        reachable: false,
        ok: false,
        status: null,
        latencyMs,
        snippet: clip(result.message),
        message: `The backend did not answer the test call (${result.message}). Start it, or check the URL, then list the skill again.`,
      };
    case "timeout":
      return {
        reachable: true,
        ok: false,
        status: null,
        latencyMs,
        snippet: clip(result.message),
        message: `The backend took the test call but did not answer within ${timeoutMs} ms: calls to it will time out unless it answers faster.`,
      };
    default:
      return {
        reachable: true,
        ok: false,
        status: result.status ?? null,
        latencyMs,
        snippet: clip(result.message),
        message: `The backend answered the test call, but not as a call needs (${result.message}): calls to it will fail, uncharged, until it does.`,
      };
  }
}
