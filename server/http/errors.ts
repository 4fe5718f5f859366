/**
 * The closed set of error codes a client can see, and the one table from code to HTTP
 * status. Every error body is the spec's `{success:false, error}` with `code` beside it.
 */
export const ERROR_STATUS = {
  invalid_json: 400,
  invalid_request: 400,
  invalid_input: 400,
  amount_below_minimum: 400,
  user_operation_rejected: 400,
  skill_rejected_input: 400,
  unauthorized: 401,
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
  insufficient_balance: 402,
  skill_not_found: 404,
  not_found: 404,
  idempotency_key_in_use: 409,
  method_not_allowed: 405,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  rate_limited: 429,
  daily_limit_reached: 429,
  internal_error: 500,
  chain_unavailable: 503,
  not_ready: 503,
  sign_in_unavailable: 503,
  skill_error: 502,
  skill_timeout: 502,
  skill_unreachable: 502,
  skill_invalid_response: 502,
  skill_backend_forbidden: 502,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** An error meant for the client: its message is safe to show. */
export class ApiError extends Error {
  override name = "ApiError";
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Response headers that go with it (Retry-After, ...). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }
}
