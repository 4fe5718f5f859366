/** The shapes of the API's answers the dashboard reads (the `data` of `{success:true, data}`). */

import type { DaySpend } from "./bars";

export interface Me {
  account_id: string;
  name: string;
  /** The seller name the marketplace shows; null until set (PATCH /v1/account). */
  display_name?: string | null;
  identities: { provider: string; subject: string; linked_at: string }[];
  addresses: string[];
  wallet: { address: string; owner: "server" | "siwe" | string; owner_address: string | null } | null;
  balance: { currency: string; available: number; held: number; available_base_units?: string; held_base_units?: string };
}

export interface Platform {
  chain_id?: number;
  sign_in?: { email?: boolean; siwe?: boolean; github?: boolean; google?: boolean };
  email_delivery?: "smtp" | "outbox";
  /** The escrow's minimum deposit (the smallest card top-up), USD; null without a chain. */
  min_deposit?: number | null;
  /** The largest card top-up, USD. */
  card_topup_max?: number;
  /** The bounds of a skill's price per call, USD. */
  skill_price_min?: number;
  skill_price_max?: number;
}

export interface Skill {
  id: string;
  slug: string;
  name: string;
  description: string;
  /** `usage`: each call costs what it used, up to `max_price` (and `price_per_call` is the most a call costs). */
  pricing?: "fixed" | "usage";
  /** A fixed price per call (absent for a usage-priced skill). */
  price?: number;
  max_price?: number;
  price_per_call: number;
  currency: string;
  rate_limit_per_min: number | null;
  input_schema: unknown;
  seller?: { name: string } | null;
  /** What the gateway measured of the skill this week; null while it has too few calls to say. */
  quality?: SkillQuality | null;
}

/** GET /v1/skills's `quality`: the last 7 days of the skill's own calls. */
export interface SkillQuality {
  calls_7d: number;
  success_rate_7d: number;
  p50_ms_7d: number;
  p95_ms_7d: number;
}

/** Some calls' figures in GET /v1/seller/skills/:id/stats (one day's, or the range's). */
export interface StatsFigures {
  calls: number;
  successes: number;
  seller_failures: number;
  buyer_failures: number;
  gateway_failures: number;
  success_rate: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  p99_ms: number | null;
  revenue: number;
  revenue_base_units: string;
}

export interface SellerSkillStats {
  skill_id: string;
  slug: string;
  from: string;
  to: string;
  quality: SkillQuality | null;
  totals: StatsFigures;
  days: (StatsFigures & { date: string })[];
  failures: { code: string; fault: "seller" | "buyer" | "gateway"; calls: number }[];
  output_contract_failures: number;
  charge_header_failures: number;
}

export interface OutputFailure {
  call_id: string;
  endpoint: string;
  problem: string;
  created_at: string;
}

/** The periods a key's spending limit counts over (UTC): a day, a month, or in total. */
export type SpendPeriod = "day" | "month" | "total";

export interface ApiKey {
  id: string;
  prefix: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  /** What the key may spend per period; null for no limit (and then every spend field is null). */
  spend_limit_usd: number | null;
  spend_limit_base_units: string | null;
  spend_limit_period: SpendPeriod | null;
  /** Spent in the current period, calls in flight included. */
  spent_usd: number | null;
  spent_base_units: string | null;
  /** When the current period ends; null for `total`. */
  resets_at: string | null;
  /** What the key may do: calls, usage:read, funds:withdraw, keys:manage (docs/keys.md). */
  scopes: string[];
  /** The skills the key may call; null for every skill. */
  allowed_skills: string[] | null;
  /** When the key stops working; null for never. */
  expires_at: string | null;
  /** What its maker says the key is for (which agent, which end user); {} for nothing. */
  metadata: Record<string, string>;
  key?: string;
}

export interface UsageCall {
  id: string;
  api_key_id?: string;
  /** The key's name ("" when it has none) and prefix; null for a call made without a key (x402). */
  api_key_name?: string | null;
  api_key_prefix?: string | null;
  /** The key's metadata as it is now ({} for none); null for a call made without a key (x402). */
  api_key_metadata?: Record<string, string> | null;
  skill_id: string;
  skill_name?: string;
  status: string;
  outcome?: string;
  http_status?: number;
  cost: number;
  cost_base_units?: string;
  response_time_ms: number;
  created_at: string;
  batch_number?: number | null;
  settlement?: "not_charged" | "unsettled" | "pending" | "settled";
}

/** Some calls' spend and how many they were. */
export interface SpendTotal {
  spend: number;
  spend_base_units: string;
  calls: number;
}

export interface DailySpend {
  /** The first and last days shown (UTC), as 2026-11-21. */
  from: string;
  to: string;
  days: DaySpend[];
  total: SpendTotal;
  month_to_date: SpendTotal & { month: string };
}

export interface UsagePage {
  calls: UsageCall[];
  next_before: number | null;
}

/** GET /v1/usage/keys: each key's calls and spend today, this month (UTC) and in total. */
export interface KeysUsage {
  day: string;
  month: string;
  keys: { api_key_id: string; today: SpendTotal; month: SpendTotal; total: SpendTotal }[];
}

export interface HistoryItem {
  type: string;
  amount: number;
  amount_base_units?: string;
  description: string;
  status: string;
  tx_hash: string | null;
  created_at: string;
}

export interface Withdrawal {
  address: string;
  nonce: string;
  amount: number;
  status: string;
  expires_at: string;
  created_at: string;
}

export interface IssuedVoucher {
  amount: number;
  voucher: { account: string; amount: string; nonce: string; deadline: string };
  signature: string;
  escrow: string;
  chain_id: number;
  expires_at: string;
}

export interface CardCheckout {
  id: string;
  status: "created" | "paid" | "declined" | "abandoned" | "funded" | string;
  amount: number;
  decline_code: string | null;
  credited: boolean;
}

export interface Earnings {
  pending: number | null;
  settled: number | null;
  claimable: number | null;
  claimed: number | null;
  address: string | null;
  escrow: string | null;
}

export interface SellerSkill {
  id: string;
  slug: string;
  name: string;
  description: string;
  /** A usage-priced skill has `max_price` (the most a call may cost) instead of `price`. */
  pricing?: "fixed" | "usage";
  price?: number;
  max_price?: number;
  backend_url: string;
  input_schema: unknown;
  /** The skill's output contract, when it has one. */
  output_schema?: Record<string, unknown>;
  listed: boolean;
  signing_secret?: string;
  /** What the backend answered the listing's signed test call (only in POST /v1/seller/skills' answer). */
  backend_check?: BackendCheck;
}

export interface BackendCheck {
  reachable: boolean;
  ok: boolean;
  status: number | null;
  latency_ms: number;
  snippet: string;
  message: string;
}
