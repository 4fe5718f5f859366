import type { BackoffOptions } from "./retry";

export interface SkillGatewayOptions {
  /** An `atom_` API key. Default: the SKILL_GATEWAY_API_KEY environment variable (Node). */
  apiKey?: string;
  /** The gateway's address. Default: SKILL_GATEWAY_URL, then http://127.0.0.1:8787. */
  baseUrl?: string;
  /** The longest one attempt may take, answer body included. Default 60000. */
  timeoutMs?: number;
  /** Retries after the first attempt of a request (see retry.ts for which failures). Default 2. */
  maxRetries?: number;
  /** The fetch to use. Default: the platform's global fetch. */
  fetch?: typeof fetch;
  /** Tuning of the waits between retries. */
  backoff?: Partial<BackoffOptions>;
  /**
   * Retry a call that failed where the skill's backend may have done the work: a 502 of the
   * skill (`skill_timeout`, `skill_error`, `skill_invalid_response`, `skill_unreachable`) or a
   * 500. Default false: such a call is thrown at once, since a retry would run the seller's
   * work again (the seller sees the same X-Skill-Idempotency-Key on every attempt, and may
   * answer it without working twice; not every seller does). CallOptions can override it.
   */
  retrySkillFailures?: boolean;
}

export interface RequestOptions {
  /** Aborting it stops the request at once, waits between retries included; nothing is retried after. */
  signal?: AbortSignal;
  /** Overrides the client's timeoutMs for each attempt of this request. */
  timeoutMs?: number;
}

export interface CallOptions extends RequestOptions {
  /**
   * Sent as the Idempotency-Key header on every attempt of this call. Default: a fresh
   * crypto.randomUUID() per call. Pass your own to make retries across processes safe.
   */
  idempotencyKey?: string;
  /**
   * The most this call may cost, in USD: a number (0.002) or a decimal string ("0.002"), above 0
   * with at most 6 decimals. A skill priced above it is refused with `PriceAboveMaxError` (409
   * `price_above_max`, naming its current price) and nothing is charged. Sent as `max_price` in
   * the body of `client.call`, as the `X-Max-Price` header by `client.skill(...).call`.
   * Default: any price.
   */
  maxPrice?: number | string;
  /** Overrides the client's retrySkillFailures for this call. */
  retrySkillFailures?: boolean;
}

/** The metadata of a call, the same whichever endpoint answered. */
export interface CallMetadata {
  /** The skill that was called (its slug). */
  skillId: string;
  /** What the call cost, in USD; 0 when it was not charged. */
  cost: number;
  /** The gateway's measure of the call, in milliseconds. */
  responseTimeMs: number;
  /**
   * The call's id: the metadata's `call_id` (`callId` on the per-skill endpoint), else X-Call-Id. An idempotent replay
   * names the call it replays; absent only from a gateway that sent neither.
   */
  callId?: string;
  /** The Idempotency-Key the call was sent with. */
  idempotencyKey: string;
  /** True when the gateway answered with the stored response of an earlier attempt (Idempotent-Replayed). */
  replayed: boolean;
  /** The per-key rate limit from the RateLimit-* headers, when the answer had them. */
  rateLimit?: RateLimitInfo;
  /**
   * The account's available balance after this call's charge, in USD (X-Balance-Available); absent
   * when the call charged nothing (a free skill, an idempotent replay).
   */
  balanceAvailable?: number;
  /**
   * What the key may still spend in its current period after this call's charge, in USD
   * (X-Key-Spend-Remaining); absent for a key without a spending limit, or a call that charged nothing.
   */
  keySpendRemaining?: number;
}

export interface RateLimitInfo {
  /** Calls allowed per window (RateLimit-Limit). */
  limit: number;
  /** Calls left in this window (RateLimit-Remaining). */
  remaining: number;
  /** Seconds until the window resets (RateLimit-Reset). */
  resetSec: number;
}

export interface CallResult<T = unknown> {
  data: T;
  metadata: CallMetadata;
}

/**
 * A marketplace skill, as GET /v1/skills answers it (the API's field names). `price` is the
 * listed price and `price_per_call` what a caller pays, both in USD. A usage-priced skill
 * (`pricing: "usage"`) has `max_price` instead of `price`: each call costs what it used, up to
 * `price_per_call`.
 */
export interface Skill {
  id: string;
  slug: string;
  name: string;
  description: string;
  /** `fixed`: `price` per call; `usage`: what each call used, up to `max_price` (docs/selling.md, Pricing models). */
  pricing: "fixed" | "usage";
  /** A fixed price per call, USD; absent for a usage-priced skill. */
  price?: number;
  /** A usage-priced skill's most a call may cost, USD, before any fee on top; absent for a fixed price. */
  max_price?: number;
  price_per_call: number;
  currency: string;
  rate_limit_per_min: number | null;
  input_schema: unknown;
  /** The JSON Schema a 2xx answer must match to be charged (docs/selling.md, Output contracts); absent when the skill makes no promise. */
  output_schema?: Record<string, unknown>;
  seller: { name: string; address: string | null };
  /**
   * What the gateway measured of the skill's calls over the last 7 days (docs/selling.md, Quality): null while it has too
   * few calls to say. `qualityLine(skill.quality)` says it in words.
   */
  quality: SkillQuality | null;
}

/** A skill's measured quality over the last 7 days, from the gateway's own calls. */
export interface SkillQuality {
  /** The calls the skill is judged on: its successes and its own failures (not the caller's or the gateway's). */
  calls_7d: number;
  /** Successes over calls_7d, 0 to 1, rounded down to 4 decimals. */
  success_rate_7d: number;
  /** Half of those calls answered within this many milliseconds (a latency bucket's bound). */
  p50_ms_7d: number;
  /** 95% of those calls answered within this many milliseconds. */
  p95_ms_7d: number;
}

/** GET /v1/balance: USD numbers, and the same in USDC base units (6 decimals) as strings. */
export interface Balance {
  currency: string;
  available: number;
  held: number;
  available_base_units: string;
  held_base_units: string;
}

/**
 * GET /v1/key: the calling key's own record (the API's field names, as GET /v1/keys lists a key)
 * and its budget. Amounts in USD, with their USDC base units (6 decimals) as strings beside them.
 */
export interface KeyStatus {
  id: string;
  prefix: string;
  name: string;
  created_at: string | null;
  last_used_at: string | null;
  scopes: string[];
  /** The skills the key may call, slugs or UUIDs; null: every skill. */
  allowed_skills: string[] | null;
  /** When the key stops working; null: never. */
  expires_at: string | null;
  /** What the key's owner noted on it (which agent, which end user); {} for none. */
  metadata: Record<string, string>;
  /** The key's spending limit per period; null (and the five below) without one. */
  spend_limit_usd: number | null;
  spend_limit_base_units: string | null;
  spend_limit_period: "day" | "month" | "total" | null;
  /** What the current period has spent, calls in flight included. */
  spent_usd: number | null;
  spent_base_units: string | null;
  /** When the current period's count starts again; null for `total`, or without a limit. */
  resets_at: string | null;
  /** What the key may still spend in its current period (never below 0); null without a limit. */
  remaining_usd: number | null;
  remaining_base_units: string | null;
  /** The account's available balance. */
  available_usd: number;
  available_base_units: string;
}

/** One call of GET /v1/usage (the API's field names). */
export interface UsageCall {
  id: string;
  /** The key the call was made with (`x402` for a call paid with x402); its name ("" when unnamed) and prefix, null then. */
  api_key_id: string;
  api_key_name: string | null;
  api_key_prefix: string | null;
  /** The key's metadata as it is now (which agent, which end user it is for); {} for none, null without a key. */
  api_key_metadata: Record<string, string> | null;
  skill_id: string;
  skill_uuid: string;
  skill_name: string | null;
  endpoint: string;
  status: "success" | "failed";
  outcome: string;
  http_status: number;
  /** USD. */
  cost: number;
  cost_base_units: string;
  response_time_ms: number;
  created_at: string;
  batch_number: number | null;
  settlement: "not_charged" | "unsettled" | "pending" | "settled";
}

export interface UsageParams {
  /** Calls per page, 1 to 500. The gateway's default is 50. */
  limit?: number;
  /** Only calls made before this time (epoch milliseconds): a page's `nextBefore`. */
  before?: number;
}

// ---- Keys made by code (client.keys, ./keys.ts) -------------------------------------------------------------------

/** What a key may do: call skills, read the account's usage, make withdrawal vouchers, manage keys. */
export type KeyScope = "calls" | "usage:read" | "funds:withdraw" | "keys:manage";

/** The periods a key's spending limit counts over (UTC). */
export type SpendPeriod = "day" | "month" | "total";

/** An API key as GET /v1/keys lists it (the API's field names); never its secret. */
export interface ApiKey {
  id: string;
  /** The key's visible start, to recognise it by. */
  prefix: string;
  name: string;
  created_at: string | null;
  last_used_at: string | null;
  /** What the key may spend per period, in USD; null without a limit (and then every spend field is null). */
  spend_limit_usd: number | null;
  spend_limit_base_units: string | null;
  spend_limit_period: SpendPeriod | null;
  /** Spent in the current period, calls in flight included. */
  spent_usd: number | null;
  spent_base_units: string | null;
  /** When the current period ends; null for `total`, or without a limit. */
  resets_at: string | null;
  scopes: string[];
  /** The skills the key may call, as its maker named them; null for every skill. */
  allowed_skills: string[] | null;
  /** When the key stops authenticating; null for never. */
  expires_at: string | null;
  /** What its maker says the key is for (which agent, which end user); {} for nothing. */
  metadata: Record<string, string>;
}

/** A key just made: the listed fields, and its whole secret, shown this once. */
export interface CreatedApiKey extends ApiKey {
  /** The whole key (atom_...): the gateway keeps only its hash, so store it now. */
  key: string;
}

/**
 * A new key's fields, all optional. The gateway's defaults: scopes ["calls"]; every skill, no expiry and no limit from
 * a dashboard session, or the keys:manage key's own restrictions when one makes it.
 */
export interface CreateKeyParams {
  name?: string;
  /** USD per period, as a string ("5.00", exact) or a number; null for none. */
  spendLimitUsd?: string | number | null;
  /** Required with spendLimitUsd. */
  spendLimitPeriod?: SpendPeriod;
  scopes?: KeyScope[];
  /** Slugs or UUIDs of listed skills; null for every skill. */
  allowedSkills?: string[] | null;
  /** In the future, at most 366 days away; null for never. */
  expiresAt?: Date | string | null;
  /** At most 20 entries: names of 1 to 40 letters, digits, _ . : - (starting with a letter or digit), values up to 500 characters. */
  metadata?: Record<string, string> | null;
}

/** The fields a change sets; those left out are kept. With spendLimitPeriod alone, the current amount over a new period. */
export type UpdateKeyParams = CreateKeyParams;
