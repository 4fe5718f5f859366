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
  /** The numbers of a refusal (the body's `details`: a 402's price and balance, a 409's price and max_price). */
  details?: Record<string, unknown>;
  cause?: unknown;
}

export class SkillGatewayError extends Error {
  override readonly name: string = "SkillGatewayError";
  readonly status: number | undefined;
  readonly code: string;
  readonly callId: string | undefined;
  readonly idempotencyKey: string | undefined;
  readonly headers: Headers | undefined;
  /** The body's `details`, as the gateway sent them (the subclasses below read their numbers from it). */
  readonly details: Record<string, unknown> | undefined;

  constructor(message: string, options: SkillGatewayErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status;
    this.code = options.code;
    this.callId = options.callId;
    this.idempotencyKey = options.idempotencyKey;
    this.headers = options.headers;
    this.details = options.details;
  }
}

/** A USD amount of `details`, or undefined when it is absent or not a number. */
function usdOf(details: Record<string, unknown> | undefined, name: string): number | undefined {
  const value = details?.[name];
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** 400: the request or the input is invalid, or the skill's backend refused the input. Not retried. */
export class BadRequestError extends SkillGatewayError {
  override readonly name: string = "BadRequestError";
}

/** 401: the API key is missing, malformed, unknown or revoked. Not retried. */
export class AuthenticationError extends SkillGatewayError {
  override readonly name: string = "AuthenticationError";
}

/**
 * 402: the balance is below the call's price. Nothing was charged. Not retried. `price` and
 * `available` are the gateway's numbers (USD), undefined when it sent none.
 */
export class InsufficientBalanceError extends SkillGatewayError {
  override readonly name: string = "InsufficientBalanceError";
  /** What the call would have cost, in USD. */
  readonly price: number | undefined;
  /** The account's available balance, in USD. */
  readonly available: number | undefined;

  constructor(message: string, options: SkillGatewayErrorOptions) {
    super(message, options);
    this.price = usdOf(options.details, "price");
    this.available = usdOf(options.details, "available");
  }
}

/**
 * 402 `key_spend_limit_reached`: the API key's spending limit for its period (a UTC day, a UTC
 * month, or in total) would be passed. Nothing was charged. Not retried: the message says when
 * the limit resets; its owner may raise it. A subclass of InsufficientBalanceError, so code that
 * handles "cannot pay for this call" handles it too.
 */
export class KeySpendLimitReachedError extends InsufficientBalanceError {
  override readonly name: string = "KeySpendLimitReachedError";
  /** The key's spending limit per period, in USD. */
  readonly limit: number | undefined;
  /** What the key's current period has spent, in USD (calls in flight included). */
  readonly spent: number | undefined;
  /** The limit's period: `day`, `month` or `total`. */
  readonly period: string | undefined;
  /** When the period's count starts again (ISO 8601); null when it never does (`total`); undefined when not sent. */
  readonly resetsAt: string | null | undefined;

  constructor(message: string, options: SkillGatewayErrorOptions) {
    super(message, options);
    this.limit = usdOf(options.details, "limit");
    this.spent = usdOf(options.details, "spent");
    const period = options.details?.period;
    this.period = typeof period === "string" ? period : undefined;
    const resetsAt = options.details?.resets_at;
    this.resetsAt = typeof resetsAt === "string" || resetsAt === null ? resetsAt : undefined;
  }
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

/**
 * 409 `price_above_max`: the skill costs more than the call's `maxPrice` (its price was raised, or
 * the cap is too low). Nothing was charged. Not retried: call again with a `maxPrice` of at least
 * `price` to accept the new price. A subclass of ConflictError, as its status is 409.
 */
export class PriceAboveMaxError extends ConflictError {
  override readonly name: string = "PriceAboveMaxError";
  /** What the skill costs per call now, in USD. */
  readonly price: number | undefined;
  /** The call's max_price, in USD. */
  readonly maxPrice: number | undefined;

  constructor(message: string, options: SkillGatewayErrorOptions) {
    super(message, options);
    this.price = usdOf(options.details, "price");
    this.maxPrice = usdOf(options.details, "max_price");
  }
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
  price_above_max: PriceAboveMaxError,
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
  const details = envelope.details;
  const options: SkillGatewayErrorOptions = {
    status,
    code,
    callId: headers.get("x-call-id") ?? undefined,
    idempotencyKey: extra.idempotencyKey,
    headers,
    ...(typeof details === "object" && details !== null && !Array.isArray(details) ? { details: details as Record<string, unknown> } : {}),
  };
  if (status === 429) return new RateLimitError(message, { ...options, retryAfterMs: extra.retryAfterMs });
  const ByStatus = BY_STATUS[status] ?? SkillGatewayError;
  const ByCode = Object.prototype.hasOwnProperty.call(BY_CODE, code) ? BY_CODE[code] : undefined;
  // A code's own class only refines its status's: the same code on another status keeps the status's class.
  const ErrorClass = ByCode !== undefined && ByCode.prototype instanceof ByStatus ? ByCode : ByStatus;
  return new ErrorClass(message, options);
}
