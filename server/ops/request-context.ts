import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";

/**
 * What the gateway knows about the request it is answering, wherever in the code it is:
 * the request id that error bodies and log lines carry, and what the access log line needs
 * once the response is sent. The HTTP layer opens one per request (server/http/app.ts);
 * code running outside a request (timers, the settler) sees none.
 *
 * An AsyncLocalStorage rather than a parameter: the id must reach every error body and log
 * line, and threading it through every service's signature would change them all for a
 * value none of them uses.
 */
export interface RequestContext {
  /** The request id: the client's X-Request-Id when it is sane, otherwise a new UUID. */
  readonly id: string;
  /** The route pattern that served it (`/v1/skills/:skillId`), never the raw URL and its query. */
  route?: string;
  /** The skill a call named, its outcome (as in the calls log) and what it charged, in base units, once recorded. */
  skill?: string;
  outcome?: string;
  chargedMicros?: bigint;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** Runs `fn` (and everything it starts) inside `context`. */
export function runInRequest<T>(context: RequestContext, fn: () => T): T {
  return storage.run(context, fn);
}

/** The request being answered, or undefined outside one. */
export function currentRequest(): RequestContext | undefined {
  return storage.getStore();
}

/**
 * A client's own request id is kept only when it is short and made of characters that cannot
 * forge a log line or a header: letters, digits, and `.`, `_`, `-`, `:`, 1 to 64 of them.
 */
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** The id of a request: its X-Request-Id header when sane, a new UUID otherwise. */
export function requestIdFrom(header: string | string[] | undefined): string {
  return typeof header === "string" && SAFE_REQUEST_ID.test(header) ? header : randomUUID();
}
