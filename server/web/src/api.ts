/**
 * The one way the dashboard talks to the gateway: same-origin JSON, the session cookie sent
 * by the browser, and the CSRF token (the readable `sg_csrf` cookie, `__Host-sg_csrf` on a
 * gateway served over https) echoed in X-CSRF-Token on anything that changes state. Failures
 * become an `ApiFailure` whose message is plain words fit to show a person: the API's own
 * `error`, or a sentence for the network.
 */

import { csrfFromCookies } from "./cookies";

export const UNREACHABLE = "The gateway could not be reached.";

export class ApiFailure extends Error {
  override name = "ApiFailure";
  constructor(
    message: string,
    /** The HTTP status; 0 when the gateway could not be reached. */
    readonly status: number,
    /** The API's snake_case code, `network` or `bad_response`. */
    readonly code: string,
  ) {
    super(message);
  }
}

/** The CSRF token from its cookie, or "" when signed out. */
export function csrfToken(): string {
  return csrfFromCookies(document.cookie);
}

export interface RawResponse {
  status: number;
  /** The parsed JSON body, or the text when it is not JSON. */
  body: unknown;
  /** The response's headers (a call's id is in X-Call-Id). */
  headers: Headers;
}

/** Sends one request and returns its status and parsed body, whatever the status. */
export async function request(method: string, path: string, body?: unknown): Promise<RawResponse> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET" && method !== "HEAD") headers["x-csrf-token"] = csrfToken();
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
  } catch {
    throw new ApiFailure(UNREACHABLE, 0, "network");
  }
  const text = await response.text().catch(() => "");
  let parsed: unknown = text;
  try {
    parsed = text === "" ? null : JSON.parse(text);
  } catch {
    /* left as text */
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

/** The message to show for an error answer: the API's `error`, or a sentence naming the status. */
export function errorMessage(status: number, body: unknown): string {
  if (typeof body === "object" && body !== null && typeof (body as { error?: unknown }).error === "string")
    return (body as { error: string }).error;
  if (status === 0) return UNREACHABLE;
  return `The gateway answered with an unexpected response (HTTP ${status}).`;
}

/** Sends a request and returns the `data` of a `{success:true, data}` answer, or throws an ApiFailure. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const { status, body: answer } = await request(method, path, body);
  const envelope = answer as { success?: unknown; data?: unknown; code?: unknown } | null;
  if (status >= 200 && status < 300 && envelope && envelope.success === true) return envelope.data as T;
  const code = typeof envelope?.code === "string" ? envelope.code : "bad_response";
  throw new ApiFailure(errorMessage(status, answer), status, code);
}

export const get = <T>(path: string) => api<T>("GET", path);
export const post = <T>(path: string, body: unknown = {}) => api<T>("POST", path, body);
export const patch = <T>(path: string, body: unknown) => api<T>("PATCH", path, body);
export const del = <T>(path: string) => api<T>("DELETE", path);

/** Plain words for anything thrown: an ApiFailure's message, else a generic sentence. */
export function describeError(error: unknown): string {
  if (error instanceof ApiFailure) return error.message;
  if (error instanceof Error && error.message) return error.message;
  return "Something went wrong.";
}
