/**
 * The SDK's errors: one base class, SkillGatewayError, and a subclass per outcome a caller
 * handles differently. Errors from the gateway carry its HTTP status, its snake_case `code`
 * and its `error` message; errors raised before any answer (ConnectionError, TimeoutError)
 * have no status and a code of the SDK's own.
 */

export interface SkillGatewayErrorOptions {
  /** The HTTP status of the gateway's answer; undefined when there was no answer. */
  status?: number;
  /** The gateway's error code (`insufficient_balance`, ...) or the SDK's (`connection_error`, `timeout`). */
  code: string;
  /** The gateway's `X-Call-Id` for this attempt, when it sent one. */
  callId?: string;
  /** The `Idempotency-Key` the call was sent with: pass it again to retry the same call safely. */
  idempotencyKey?: string;
  /** The answer's headers, when there was an answer. */
  headers?: Headers;
  cause?: unknown;
}

export class SkillGatewayError extends Error {
  override readonly name: string = "SkillGatewayError";
  readonly status: number | undefined;
  readonly code: string;
  readonly callId: string | undefined;
  readonly idempotencyKey: string | undefined;
  readonly headers: Headers | undefined;

  constructor(message: string, options: SkillGatewayErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status;
    this.code = options.code;
    this.callId = options.callId;
    this.idempotencyKey = options.idempotencyKey;
    this.headers = options.headers;
  }
}

/** 400: the request or the input is invalid, or the skill's backend refused the input. Not retried. */
export class BadRequestError extends SkillGatewayError {
  override readonly name: string = "BadRequestError";
}

/** 401: the API key is missing, malformed, unknown or revoked. Not retried. */
export class AuthenticationError extends SkillGatewayError {
  override readonly name: string = "AuthenticationError";
}

/** 402: the balance is below the call's price. Nothing was charged. Not retried. */
export class InsufficientBalanceError extends SkillGatewayError {
  override readonly name: string = "InsufficientBalanceError";
}

/**
 * 402 `key_spend_limit_reached`: the API key's spending limit for its period (a UTC day, a UTC
 * month, or in total) would be passed. Nothing was charged. Not retried: the message says when
 * the limit resets; its owner may raise it. A subclass of InsufficientBalanceError, so code that
 * handles "cannot pay for this call" handles it too.
 */
export class KeySpendLimitReachedError extends InsufficientBalanceError {
  override readonly name: string = "KeySpendLimitReachedError";
}

/** 404: no skill with that slug or UUID. Not retried. */
export class NotFoundError extends SkillGatewayError {
  override readonly name: string = "NotFoundError";
}

/**
 * 409 or 422: the Idempotency-Key is in use by a request still running (409, retried), or was
 * used with another body (422, not retried).
 */
export class ConflictError extends SkillGatewayError {
  override readonly name: string = "ConflictError";
}

/** 429: a per-key, per-skill or daily limit was reached. */
export class RateLimitError extends SkillGatewayError {
  override readonly name: string = "RateLimitError";
  /** The gateway's Retry-After in milliseconds, when it sent one. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options: SkillGatewayErrorOptions & { retryAfterMs?: number }) {
    super(message, options);
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** 500: the gateway failed; the call was not charged. */
export class InternalServerError extends SkillGatewayError {
  override readonly name: string = "InternalServerError";
}

/** 502: the skill's backend failed, timed out or answered something unusable; not charged. */
export class SkillError extends SkillGatewayError {
  override readonly name: string = "SkillError";
}

/** No answer: the connection was refused, reset or closed before a whole response arrived. */
export class ConnectionError extends SkillGatewayError {
  override readonly name: string = "ConnectionError";
}

/** No answer within `timeoutMs` for one attempt. */
export class TimeoutError extends SkillGatewayError {
  override readonly name: string = "TimeoutError";
}

const BY_STATUS: Record<number, typeof SkillGatewayError> = {
  400: BadRequestError,
  401: AuthenticationError,
  402: InsufficientBalanceError,
  404: NotFoundError,
  409: ConflictError,
  422: ConflictError,
  500: InternalServerError,
  502: SkillError,
};

/** Codes whose error is more precise than their status's class. */
const BY_CODE: Record<string, typeof SkillGatewayError> = {
  key_spend_limit_reached: KeySpendLimitReachedError,
};

/**
 * The error for a gateway answer that is not a success: the class by code when the code has
 * one of its own, else by status (others, such as 403, 413 or 503, are the base class), the
 * message and code from the body when it is the gateway's `{success: false, error, code}` envelope.
 */
export function errorFromResponse(
  status: number,
  body: unknown,
  headers: Headers,
  extra: { idempotencyKey?: string; retryAfterMs?: number } = {},
): SkillGatewayError {
  const envelope = typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {};
  const message = typeof envelope.error === "string" && envelope.error !== "" ? envelope.error : `The gateway answered HTTP ${status}.`;
  const code = typeof envelope.code === "string" && envelope.code !== "" ? envelope.code : `http_${status}`;
  const options: SkillGatewayErrorOptions = {
    status,
    code,
    callId: headers.get("x-call-id") ?? undefined,
    idempotencyKey: extra.idempotencyKey,
    headers,
  };
  if (status === 429) return new RateLimitError(message, { ...options, retryAfterMs: extra.retryAfterMs });
  const ByStatus = BY_STATUS[status] ?? SkillGatewayError;
  const ByCode = Object.prototype.hasOwnProperty.call(BY_CODE, code) ? BY_CODE[code] : undefined;
  // A code's own class only refines its status's: the same code on another status keeps the status's class.
  const ErrorClass = ByCode !== undefined && ByCode.prototype instanceof ByStatus ? ByCode : ByStatus;
  return new ErrorClass(message, options);
}
