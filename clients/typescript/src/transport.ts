import { ConnectionError, SkillGatewayError, TimeoutError, errorFromResponse } from "./errors";
import { type BackoffOptions, parseRetryAfterMs, retryDelayMs, sleep } from "./retry";

export interface TransportConfig {
  baseUrl: string;
  apiKey: string | undefined;
  timeoutMs: number;
  maxRetries: number;
  fetch: typeof fetch;
  backoff: BackoffOptions;
  /** Whether a skill call is retried where the seller may have done the work (SkillGatewayOptions). */
  retrySkillFailures: boolean;
}

export interface TransportRequest {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  /** The path and query, beginning with "/". */
  path: string;
  body?: unknown;
  idempotencyKey?: string;
  /** More request headers, by their lowercase names (X-Max-Price). */
  headers?: Record<string, string>;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Set for a request that runs a skill: whether its failures where the seller may have worked are retried. */
  skillCall?: { retryFailures: boolean };
  /** Overrides the client's maxRetries for this request: 0 for one that must not be sent twice (it has no Idempotency-Key). */
  maxRetries?: number;
}

export interface TransportResponse {
  status: number;
  headers: Headers;
  /** The parsed success envelope. */
  body: Record<string, unknown>;
}

/**
 * Sends a request and retries it as retry.ts decides, with the same headers and body (so the
 * same Idempotency-Key) on every attempt. Throws a SkillGatewayError, or the signal's reason
 * when the caller aborted.
 */
export async function send(config: TransportConfig, request: TransportRequest): Promise<TransportResponse> {
  for (let retry = 0; ; retry++) {
    try {
      return await attempt(config, request);
    } catch (error) {
      if (request.signal?.aborted) throw request.signal.reason;
      const delayMs =
        retry < (request.maxRetries ?? config.maxRetries) ? retryDelayMs(error, retry, config.backoff, request.skillCall) : null;
      if (delayMs === null) throw error;
      await sleep(delayMs, request.signal);
    }
  }
}

async function attempt(config: TransportConfig, request: TransportRequest): Promise<TransportResponse> {
  const { signal, idempotencyKey } = request;
  if (signal?.aborted) throw signal.reason;

  const headers: Record<string, string> = { ...request.headers, accept: "application/json" };
  if (config.apiKey) headers.authorization = `Bearer ${config.apiKey}`;
  if (request.body !== undefined) headers["content-type"] = "application/json";
  if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey;

  // One controller per attempt: the attempt's timeout aborts it, and so does the caller's signal.
  const controller = new AbortController();
  let timedOut = false;
  const timeoutMs = request.timeoutMs ?? config.timeoutMs;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  const onAbort = () => controller.abort(signal!.reason);
  signal?.addEventListener("abort", onAbort, { once: true });

  // Whatever stopped the attempt before a whole answer was in: the caller, the timeout, or the network.
  const noAnswer = (cause: unknown): unknown => {
    if (signal?.aborted) return signal.reason;
    if (timedOut) return new TimeoutError(`No answer from the gateway within ${timeoutMs} ms.`, { code: "timeout", idempotencyKey, cause });
    const reason = cause instanceof Error && cause.cause instanceof Error ? `: ${cause.cause.message}` : "";
    return new ConnectionError(`Could not reach the gateway at ${config.baseUrl}${reason}.`, {
      code: "connection_error",
      idempotencyKey,
      cause,
    });
  };

  try {
    let response: Response;
    let text: string;
    try {
      response = await config.fetch(config.baseUrl + request.path, {
        method: request.method,
        headers,
        body: request.body === undefined ? undefined : JSON.stringify(request.body),
        signal: controller.signal,
      });
      text = await response.text();
    } catch (cause) {
      throw noAnswer(cause);
    }

    let body: unknown;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    const envelope = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;

    if (response.ok && envelope?.success === true) return { status: response.status, headers: response.headers, body: envelope };
    if (response.ok) {
      // A 2xx that is not the gateway's envelope: something else answered (a proxy, a wrong baseUrl).
      throw new SkillGatewayError(`The answer from ${config.baseUrl} is not a Skill Gateway response (HTTP ${response.status}).`, {
        status: response.status,
        code: "invalid_response",
        idempotencyKey,
        headers: response.headers,
      });
    }
    throw errorFromResponse(response.status, envelope, response.headers, {
      idempotencyKey,
      retryAfterMs: parseRetryAfterMs(response.headers.get("retry-after")),
    });
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}
