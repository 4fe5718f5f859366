/**
 * What can go wrong, in one vocabulary every layer shares: the closed table of error codes a
 * client can see, and the one base error that carries a code. The core (gateway, catalog,
 * identity, wallets, ...) names a code; only server/http/ decides what status, headers and body
 * it becomes (server/http/errors.ts holds the code → status table). Nothing here knows HTTP.
 *
 * Each code says in a line when it is used; docs/errors.md's table of codes is generated from this
 * table and server/http/errors.ts (scripts/error-table.ts), and a test keeps them equal.
 */
export const ERROR_CODES = {
  invalid_json:
    "the body is not UTF-8 JSON, nests objects and arrays more than 64 levels deep, or holds a number JSON cannot carry exactly (an integer past 2^53 - 1, a number beyond about 1.8e308): the message says where",
  invalid_request: "the request is malformed: a field missing or of the wrong type, a bad header, an amount or address refused",
  invalid_input: "the input fails the skill's JSON Schema (the message says where)",
  amount_below_minimum:
    "an amount under its minimum (a deposit's, the escrow's minimum deposit; a withdrawal voucher's, `VOUCHER_MIN_USD`), or a wallet holding less than the minimum deposit",
  user_operation_rejected: "the bundler refused an owner-signed UserOperation (its words are in the message)",
  skill_rejected_input: "the skill's backend answered 4xx (its message is passed through)",
  unauthorized: "API key missing, malformed, unknown or revoked; or no dashboard session",
  key_expired: "the API key's `expires_at` has passed: it authenticates nothing any more (its owner makes another)",
  scope_missing:
    "the API key lacks the scope the request needs (`calls`, `usage:read`, `funds:withdraw`, `keys:manage`): the message names it",
  skill_not_allowed: "the API key's `allowed_skills` does not include this skill: nothing ran, nothing was held or charged",
  authority_exceeded:
    "a `keys:manage` key asked for a key wider than itself (`keys:manage` or `funds:withdraw`, a scope it lacks, a skill, expiry or spending limit beyond its own), or to change or revoke such a key: the message says which; a dashboard session can",
  sign_in_failed: "a sign-in link, state or code that is bad, expired, used or foreign",
  invalid_signature: "a signature that does not verify (SIWE message, provider notification)",
  csrf_failed: "a state-changing request of a session without its X-CSRF-Token",
  origin_refused: "a sign-in started from another site",
  identity_taken: "the identity already signs in to another account",
  session_exists: "the browser is signed in to another account",
  slug_taken: "a skill with that slug exists",
  payout_address_refused: "the payout address cannot be set to that address",
  no_deposit_address: "the account has no address for the escrow to credit (or its wallet is not that address)",
  wallet_swept_automatically: "the gateway holds this wallet's key and sweeps it itself",
  sweep_in_progress: "a sweep of this wallet is being submitted",
  claim_in_progress: "another operation of this wallet is being sent",
  nothing_to_claim: "no settled earnings to claim",
  payout_address_not_wallet: "earnings are paid to another address than the embedded wallet",
  wrong_claim_flow: "the other claim flow is the one for this wallet (server-held key or owner-signed)",
  withdrawal_in_progress: "another operation of this wallet is being sent",
  wrong_withdrawal_flow: "the other withdrawal flow is the one for this wallet (server-held key or owner-signed)",
  price_above_max:
    "the skill's price per call is above the call's `max_price` (`X-Max-Price`, MCP `_meta.max_price`): the message names the current price; nothing ran, nothing was held or charged",
  insufficient_balance: "the balance is below the call's price or the amount asked",
  key_spend_limit_reached:
    "the API key's spending limit for its period (a UTC day, a UTC month, or in total) would be passed: nothing ran or was charged; the message says when it resets",
  payment_required: "an x402 call without a `PAYMENT-SIGNATURE`: its `PAYMENT-REQUIRED` header says what to pay",
  payment_invalid:
    "an x402 payment that does not verify: its scheme, network, asset, recipient, amount, validity window, signature, funds or nonce",
  payment_reused: "an x402 payment authorization already presented for another call",
  payment_settlement_failed: "the x402 payment could not be collected on-chain before the call: nothing was paid, the skill was not called",
  skill_not_found: "no skill with that slug or UUID",
  not_found: "no such route, or no such thing on this account",
  no_wallet: "the account has no embedded wallet yet",
  idempotency_key_in_use: "a request with this key is still running",
  method_not_allowed: "the path does not take this method",
  payload_too_large: "the body is over the endpoint's limit (`MAX_REQUEST_BYTES` for calls)",
  unsupported_media_type: "a sign-in body that is not JSON",
  idempotency_key_reused: "this key was used with another body",
  rate_limited: "over the per-key, per-skill or per-address limit; see `Retry-After`",
  daily_limit_reached: "over the account's daily call cap; see `Retry-After`",
  internal_error: "the gateway failed; nothing is charged, a hold is released",
  chain_unavailable: "the chain or the bundler did not answer, or did not take the operation: try again",
  chain_not_configured: "this gateway runs without what the request needs (escrow chain, ERC-4337 stack, funding wallet)",
  not_ready: "the gateway is not ready (readiness probe)",
  limits_unavailable: "the shared rate limits (Redis) did not answer: the call did not run and nothing was charged; try again",
  database_unavailable:
    "the database (PostgreSQL) did not answer: try again. A call is not charged, except one whose answer says `charge_unknown`: its charge may have committed, and a retry with the same `Idempotency-Key` gets its answer",
  sign_in_unavailable: "the sign-in provider could not be reached",
  skill_error: "the backend answered 5xx or a redirect (never followed)",
  skill_timeout: "the backend did not answer within the skill's timeout",
  skill_unreachable: "the backend refused the connection",
  skill_invalid_response: "the backend answered non-JSON, or too much",
  skill_bad_output:
    "the backend answered 2xx with JSON its skill's `output_schema` refuses: the skill answered something it promised not to. Not charged (an x402 payment is refunded); its seller sees the first problem",
  usage_pricing_unsupported:
    "the skill is usage-priced (it charges what each call used, up to its `max_price`), which this way to pay cannot do: x402 pays one fixed amount per call (`exact` scheme). Call it with an API key",
  skill_bad_charge:
    "a usage-priced skill's backend answered 2xx without a valid charge: `X-Skill-Charge` missing, malformed (a USD amount of at most 6 decimals) or above the skill's `max_price`, or `X-Skill-Charge-Signature` missing or wrong. Not charged",
  skill_backend_forbidden: "the skill's backend is not a public internet address (see Security: egress policy)",
} as const satisfies Record<string, string>;

/** A code a client can see: snake_case, stable, one of ERROR_CODES. */
export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && Object.hasOwn(ERROR_CODES, value);
}

export interface GatewayErrorOptions {
  /**
   * Facts a client may see, sent beside `error` and `code` in the body (JSON values, snake_case
   * keys). Anything internal (SQL, RPC, stack) belongs in `cause`, which is logged, never sent.
   */
  details?: Record<string, unknown>;
  /** What led to it; logged with it, never shown to a client. */
  cause?: unknown;
}

/**
 * The base error: a code from the table, a message safe to show a client, optional details a
 * client may see, and a cause that stays in the logs. Services throw it for failures at their
 * boundary, and return `Refusal`s (below) for expected business outcomes; either way the HTTP
 * layer turns it into the spec's `{success:false, error, code}` with the code's status.
 */
export class GatewayError extends Error {
  override name = "GatewayError";
  readonly details: Record<string, unknown>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: GatewayErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.details = options.details ?? {};
  }
}

/**
 * An expected business outcome that refuses a request, as a service returns it: a member of the
 * code table with its message (safe to show) and, when the caller needs them, the facts behind it.
 * `ok: false` lets it sit in a discriminated result beside `{ ok: true, ... }`.
 */
export interface Refusal<C extends ErrorCode = ErrorCode> {
  ok: false;
  code: C;
  message: string;
  /** As GatewayError's: shown to the client beside the message. */
  details?: Record<string, unknown>;
  /** As GatewayError's: logged, never shown. */
  cause?: unknown;
}

/** Builds a Refusal. */
export function refusal<C extends ErrorCode>(
  code: C,
  message: string,
  extra: Omit<Refusal<C>, "ok" | "code" | "message"> = {},
): Refusal<C> {
  return { ok: false, code, message, ...extra };
}

/** The error a refusal becomes when the caller cannot go on: to throw, for the HTTP layer to answer. */
export function refusalError(refused: Refusal): GatewayError {
  return new GatewayError(refused.code, refused.message, { details: refused.details, cause: refused.cause });
}
