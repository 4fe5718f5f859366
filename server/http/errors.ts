import { type ErrorCode, GatewayError, type GatewayErrorOptions, type Refusal, refusalError } from "../errors";

/**
 * The one table from error code (server/errors.ts names them) to HTTP status: the core decides
 * what went wrong, this layer decides what status it is. Every error body is the spec's
 * `{success:false, error}` with `code` beside it (./envelope.ts).
 */
export const ERROR_STATUS = {
  invalid_json: 400,
  invalid_request: 400,
  invalid_input: 400,
  amount_below_minimum: 400,
  user_operation_rejected: 400,
  skill_rejected_input: 400,
  unauthorized: 401,
  key_expired: 401,
  scope_missing: 403,
  skill_not_allowed: 403,
  authority_exceeded: 403,
  sign_in_failed: 401,
  invalid_signature: 401,
  csrf_failed: 403,
  origin_refused: 403,
  identity_taken: 409,
  session_exists: 409,
  slug_taken: 409,
  payout_address_refused: 409,
  no_deposit_address: 409,
  wallet_swept_automatically: 409,
  sweep_in_progress: 409,
  claim_in_progress: 409,
  nothing_to_claim: 409,
  payout_address_not_wallet: 409,
  wrong_claim_flow: 409,
  withdrawal_in_progress: 409,
  wrong_withdrawal_flow: 409,
  price_above_max: 409,
  insufficient_balance: 402,
  key_spend_limit_reached: 402,
  payment_required: 402,
  payment_invalid: 402,
  payment_reused: 402,
  payment_settlement_failed: 402,
  skill_not_found: 404,
  not_found: 404,
  no_wallet: 404,
  idempotency_key_in_use: 409,
  method_not_allowed: 405,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  rate_limited: 429,
  daily_limit_reached: 429,
  internal_error: 500,
  chain_unavailable: 503,
  chain_not_configured: 503,
  not_ready: 503,
  limits_unavailable: 503,
  database_unavailable: 503,
  sign_in_unavailable: 503,
  skill_error: 502,
  skill_timeout: 502,
  skill_unreachable: 502,
  skill_invalid_response: 502,
  skill_bad_output: 502,
  skill_bad_charge: 502,
  usage_pricing_unsupported: 409,
  skill_backend_forbidden: 502,
} as const satisfies Record<ErrorCode, number>;

/**
 * A base error with what only HTTP adds to it: its status (from the table) and the response
 * headers that go with it (Retry-After, Connection, ...). Routes throw it; anything else thrown
 * reaches the client through `toApiError`.
 */
export class ApiError extends GatewayError {
  override name = "ApiError";
  readonly status: number;
  constructor(
    code: ErrorCode,
    message: string,
    /** Response headers that go with it (Retry-After, ...). */
    readonly headers: Record<string, string> = {},
    options: GatewayErrorOptions = {},
  ) {
    super(code, message, options);
    this.status = ERROR_STATUS[code];
  }
}

/**
 * The one path from anything thrown to what the client sees: a base error keeps its code,
 * message and details (with its status from the table); anything else is a 500 whose details
 * (SQL, stack, RPC) never leave. `internal` is the message of that 500.
 */
export function toApiError(error: unknown, internal = "Internal server error."): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof GatewayError) {
    return new ApiError(error.code, error.message, {}, { details: error.details, cause: error.cause });
  }
  return new ApiError("internal_error", internal, {}, { cause: error });
}

/**
 * A service's refusal, thrown as the error the client sees. One that says when to ask again (`details.retry_after_sec`,
 * a limit's refusal) also says it in the Retry-After header, where HTTP clients look.
 */
export function refuse(refused: Refusal): never {
  const retryAfterSec = refused.details?.retry_after_sec;
  if (typeof retryAfterSec === "number") {
    throw new ApiError(
      refused.code,
      refused.message,
      { "retry-after": String(retryAfterSec) },
      { details: refused.details, cause: refused.cause },
    );
  }
  throw refusalError(refused);
}
