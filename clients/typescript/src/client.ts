import { UsagePage, type UsagePagePromise, usagePagePromise } from "./pagination";
import { Keys } from "./keys";
import type { CallReceipt } from "./receipt";
import { DEFAULT_BACKOFF } from "./retry";
import { type TransportConfig, type TransportRequest, send } from "./transport";
import type {
  Balance,
  CallMetadata,
  CallOptions,
  CallResult,
  KeyStatus,
  RateLimitInfo,
  RequestOptions,
  Skill,
  SkillGatewayOptions,
  UsageCall,
  UsageParams,
} from "./types";

export const DEFAULT_BASE_URL = "http://127.0.0.1:8787";
export const DEFAULT_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_RETRIES = 2;

// The SDK runs in browsers too, where there is no `process`: it is only read through this guard.
declare const process: { env?: Record<string, string | undefined> } | undefined;

function fromEnvironment(name: string): string | undefined {
  const value = typeof process !== "undefined" ? process?.env?.[name] : undefined;
  return value === "" ? undefined : value;
}

/**
 * A client of one Skill Gateway with one API key.
 *
 * ```ts
 * const client = new SkillGateway({ apiKey: "atom_..." });
 * const { data, metadata } = await client.call("echo", { hello: "world" });
 * ```
 */
export class SkillGateway {
  readonly baseUrl: string;
  /** The marketplace: GET /v1/skills and GET /v1/skills/:skillId (no API key needed). */
  readonly skills: {
    list(options?: RequestOptions): Promise<Skill[]>;
    get(skillId: string, options?: RequestOptions): Promise<Skill>;
  };
  /**
   * The account's API keys, made, listed, changed and revoked from code (`client.keys.create/list/update/revoke`):
   * the client's key needs the keys:manage scope (./keys.ts).
   */
  readonly keys: Keys;
  private readonly transport: TransportConfig;

  constructor(options: SkillGatewayOptions = {}) {
    const baseUrl = (options.baseUrl ?? fromEnvironment("SKILL_GATEWAY_URL") ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    if (!(timeoutMs > 0)) throw new RangeError(`timeoutMs must be a positive number of milliseconds, not ${timeoutMs}.`);
    if (!Number.isInteger(maxRetries) || maxRetries < 0) throw new RangeError(`maxRetries must be a whole number >= 0, not ${maxRetries}.`);
    const fetchImpl = options.fetch ?? globalThis.fetch;
    if (typeof fetchImpl !== "function")
      throw new TypeError("No fetch: pass one as the `fetch` option on a platform without a global fetch.");

    this.baseUrl = baseUrl;
    this.transport = {
      baseUrl,
      apiKey: options.apiKey ?? fromEnvironment("SKILL_GATEWAY_API_KEY"),
      timeoutMs,
      maxRetries,
      // Bound to globalThis: browsers refuse a fetch called as a method of another object.
      fetch: options.fetch ?? fetchImpl.bind(globalThis),
      backoff: { ...DEFAULT_BACKOFF, ...options.backoff },
      retrySkillFailures: options.retrySkillFailures ?? false,
    };
    this.skills = {
      list: async (requestOptions = {}) => (await this.get("/v1/skills", requestOptions)) as Skill[],
      get: async (skillId, requestOptions = {}) => (await this.get(`/v1/skills/${encodeURIComponent(skillId)}`, requestOptions)) as Skill,
    };
    this.keys = new Keys(this.transport);
  }

  /**
   * Calls a skill by slug or UUID through POST /v1/call. Retried on 429 and connection
   * failures with one Idempotency-Key, so it is charged at most once; a failure where the
   * seller may have done the work (a skill's 502, a 500) only with `retrySkillFailures`. With
   * `maxPrice`, a skill priced above it throws PriceAboveMaxError and charges nothing.
   */
  async call<T = unknown>(skill: string, input: object, options: CallOptions = {}): Promise<CallResult<T>> {
    const body = options.maxPrice === undefined ? { skill_id: skill, input } : { skill_id: skill, input, max_price: options.maxPrice };
    return this.callEndpoint<T>("/v1/call", body, options, {});
  }

  /** A skill by slug or UUID, to call through its own endpoint, POST /v1/skills/:skillId/call. */
  skill(slugOrId: string): SkillHandle {
    const path = `/v1/skills/${encodeURIComponent(slugOrId)}`;
    return {
      id: slugOrId,
      // The body is the skill's own parameters: the price cap travels in a header.
      call: <T = unknown>(params: object = {}, options: CallOptions = {}) =>
        this.callEndpoint<T>(
          `${path}/call`,
          params,
          options,
          options.maxPrice === undefined ? {} : { "x-max-price": String(options.maxPrice) },
        ),
      get: (options: RequestOptions = {}) => this.skills.get(slugOrId, options),
    };
  }

  /** GET /v1/balance: the key's account balance, available and held. */
  async balance(options: RequestOptions = {}): Promise<Balance> {
    return (await this.get("/v1/balance", options)) as Balance;
  }

  /**
   * GET /v1/key: the calling key's own record and budget (any key may read itself, whatever its
   * scopes): its scopes, allowed skills and expiry, its spending limit with what it spent, what
   * remains and when it resets, and the account's available balance.
   */
  async key(options: RequestOptions = {}): Promise<KeyStatus> {
    return (await this.get("/v1/key", options)) as KeyStatus;
  }

  /**
   * GET /v1/calls/:callId/receipt: a paid call's settlement receipt and Merkle proof once its batch is posted, or
   * its status (`not_charged`, `unsettled`) until then. Check it against the chain with verifyReceipt; save it
   * (JSON.stringify) to check it later without the gateway.
   */
  async receipt(callId: string, options: RequestOptions = {}): Promise<CallReceipt> {
    return (await this.get(`/v1/calls/${encodeURIComponent(callId)}/receipt`, options)) as CallReceipt;
  }

  /**
   * GET /v1/usage: the account's calls, newest first. Await it for one page
   * (`page.calls`, `page.nextPage()`), or iterate it for every call:
   * `for await (const call of client.usage({ limit: 100 })) ...`.
   */
  usage(params: UsageParams = {}, options: RequestOptions = {}): UsagePagePromise {
    const fetchPage = async (before: number | undefined): Promise<UsagePage> => {
      const query = new URLSearchParams();
      if (params.limit !== undefined) query.set("limit", String(params.limit));
      if (before !== undefined) query.set("before", String(before));
      const qs = query.toString();
      const data = (await this.get(`/v1/usage${qs ? `?${qs}` : ""}`, options)) as { calls: UsageCall[]; next_before: number | null };
      return new UsagePage(data.calls, data.next_before ?? null, fetchPage);
    };
    return usagePagePromise(fetchPage(params.before));
  }

  private async get(path: string, options: RequestOptions): Promise<unknown> {
    const response = await send(this.transport, { method: "GET", path, signal: options.signal, timeoutMs: options.timeoutMs });
    return response.body.data;
  }

  private async callEndpoint<T>(path: string, body: object, options: CallOptions, headers: Record<string, string>): Promise<CallResult<T>> {
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    const request: TransportRequest = {
      method: "POST",
      path,
      body,
      idempotencyKey,
      headers,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
      skillCall: { retryFailures: options.retrySkillFailures ?? this.transport.retrySkillFailures },
    };
    const response = await send(this.transport, request);
    return {
      data: response.body.data as T,
      metadata: callMetadata(response.body.metadata, response.headers, idempotencyKey),
    };
  }
}

export interface SkillHandle {
  /** The slug or UUID this handle was made with. */
  readonly id: string;
  /** POST /v1/skills/:skillId/call with `params` as the flat body. */
  call<T = unknown>(params?: object, options?: CallOptions): Promise<CallResult<T>>;
  /** GET /v1/skills/:skillId. */
  get(options?: RequestOptions): Promise<Skill>;
}

/**
 * One metadata shape from either endpoint's: snake_case `skill_id`, `price_paid`,
 * `response_time_ms`, `call_id` on /v1/call, camelCase `skillId`, `cost`, `responseTime`, `callId` on the
 * per-skill endpoint, plus what the response headers say (docs/clients.md, "One contract").
 */
export function callMetadata(raw: unknown, headers: Headers, idempotencyKey: string): CallMetadata {
  const m = typeof raw === "object" && raw !== null ? (raw as Record<string, unknown>) : {};
  const metadata: CallMetadata = {
    skillId: String(m.skill_id ?? m.skillId ?? ""),
    cost: Number(m.price_paid ?? m.cost ?? 0),
    responseTimeMs: Number(m.response_time_ms ?? m.responseTime ?? 0),
    idempotencyKey,
    replayed: headers.get("idempotent-replayed") === "true",
  };
  // The body names the call (call_id, callId) since the gateway put it there, so a replay names it too; X-Call-Id
  // is the same id, for a gateway that sends only the header.
  const bodyId = m.call_id ?? m.callId;
  const callId = typeof bodyId === "string" ? bodyId : headers.get("x-call-id");
  if (callId !== null) metadata.callId = callId;
  const rateLimit = rateLimitOf(headers);
  if (rateLimit) metadata.rateLimit = rateLimit;
  const available = usdHeader(headers, "x-balance-available");
  if (available !== undefined) metadata.balanceAvailable = available;
  const remaining = usdHeader(headers, "x-key-spend-remaining");
  if (remaining !== undefined) metadata.keySpendRemaining = remaining;
  return metadata;
}

/** A USD decimal string header as a number; undefined when absent or not a number. */
function usdHeader(headers: Headers, name: string): number | undefined {
  const value = headers.get(name);
  if (value === null || !/^\d+(\.\d+)?$/.test(value)) return undefined;
  return Number(value);
}

function rateLimitOf(headers: Headers): RateLimitInfo | undefined {
  const limit = headers.get("ratelimit-limit");
  const remaining = headers.get("ratelimit-remaining");
  const reset = headers.get("ratelimit-reset");
  if (limit === null || remaining === null || reset === null) return undefined;
  return { limit: Number(limit), remaining: Number(remaining), resetSec: Number(reset) };
}

/** A v4 UUID: crypto.randomUUID where there is one (Node 20, browsers on https), else built from getRandomValues. */
function randomUUID(): string {
  const c = globalThis.crypto;
  if (typeof c?.randomUUID === "function") return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
