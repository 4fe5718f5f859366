import type { Redis } from "../db/redis";
import type { CallDailyCap, CallLimiter, CountSince, DailyCapDecision, RateDecision, RateRule } from "./rate-limit";

/**
 * The rate limits and daily caps of ./rate-limit.ts, kept in Redis so that every replica
 * counts against the same numbers: 100 calls a minute per key means 100 in total, however the
 * calls are spread over the replicas. Each decision is one Lua script, which Redis runs
 * atomically: no other command runs between its reads and its writes, so concurrent calls
 * from any number of replicas are decided one after another.
 *
 * The decisions are those of the in-memory RateLimiter and DailyCap, number for number (the
 * same arithmetic on the same IEEE doubles: Lua's numbers are doubles, and times cross the
 * wire with 17 significant digits so they round-trip exactly); test/gateway/redis-rate-limit.test.ts
 * replays random sequences through both and compares every decision.
 *
 * Time: the scripts read the Redis server's clock (TIME) and not the replica's, so replicas
 * whose clocks disagree still share one timeline. A `nowMs` passed in (tests) replaces it.
 *
 * One Redis server (with or without replicas of its own), not Redis Cluster: the counters of
 * one call may live in different hash slots.
 */

const DAY_MS = 86_400_000;

/** Both scripts' clock: the `nowMs` passed in, or else the server's TIME in whole milliseconds (as Date.now()). */
const LUA_NOW = `
local now
if ARGV[1] == "" then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[1])
end
local function exact(x) return string.format("%.17g", x) end
`;

/**
 * GCRA over all of a call's rules, as RateLimiter.admit: KEYS[i] holds rule i's theoretical
 * arrival time; ARGV[1] is the time ("" for the server's), ARGV[2i] and ARGV[2i+1] rule i's limit
 * and window. Either every rule allows the call and all of them count it, or none does.
 * Replies {allowed, index of the deciding rule (1-based), remaining, resetMs, retryAfterMs},
 * the last two as exact decimal strings (a Lua number would reach the client truncated).
 *
 * Each counter expires a window after its last write: by then its arrival time has passed,
 * and an absent counter is the same as a full one (tat = now).
 */
const ADMIT_LUA = `${LUA_NOW}
local n = #KEYS
local tats = {}
local headline
for i = 1, n do
  local limit = tonumber(ARGV[2 * i])
  local window = tonumber(ARGV[2 * i + 1])
  local interval = window / limit
  local stored = redis.call("GET", KEYS[i])
  local tat = now
  if stored then tat = math.max(tonumber(stored), now) end
  local new_tat = tat + interval
  local allow_at = new_tat - window
  if now < allow_at - 1e-9 then
    return {0, i, 0, exact(tat - now), exact(allow_at - now)}
  end
  tats[i] = new_tat
  if not headline then
    local remaining = math.max(0, math.floor((window - (new_tat - now)) / interval + 1e-9))
    headline = {1, i, remaining, exact(new_tat - now), "0"}
  end
end
for i = 1, n do
  redis.call("SET", KEYS[i], exact(tats[i]), "PX", math.ceil(tonumber(ARGV[2 * i + 1])))
end
return headline
`;

/**
 * One account's calls of the current UTC day, as DailyCap.admit: KEYS[1] is a hash {day, count}.
 * ARGV[1] is the time, ARGV[2] the cap, ARGV[3] how a counter absent for today starts: "zero",
 * "ask" (reply so that the caller counts the day's calls in the calls log and asks again) or a
 * count, which applies when ARGV[4] is still today. A refused call is not counted. The counter
 * expires a minute after the end of its day: its \`day\` field, not its expiry, decides which day it
 * counts, so a counter never vanishes between two calls made in the day's last milliseconds.
 * Replies {allowed, retryAfterMs as an exact string, day, needs a starting count}.
 */
const DAILY_LUA = `${LUA_NOW}
local cap = tonumber(ARGV[2])
local day = math.floor(now / ${DAY_MS})
local day_end = (day + 1) * ${DAY_MS}
local count
if tonumber(redis.call("HGET", KEYS[1], "day")) == day then
  count = tonumber(redis.call("HGET", KEYS[1], "count"))
elseif ARGV[3] == "zero" then
  count = 0
elseif ARGV[3] ~= "ask" and tonumber(ARGV[4]) == day then
  count = tonumber(ARGV[3])
  redis.call("HSET", KEYS[1], "day", day, "count", count)
  redis.call("PEXPIRE", KEYS[1], math.ceil(day_end - now) + 60000)
else
  return {0, "0", day, 1}
end
if count >= cap then
  return {0, exact(day_end - now), day, 0}
end
redis.call("HSET", KEYS[1], "day", day, "count", count + 1)
redis.call("PEXPIRE", KEYS[1], math.ceil(day_end - now) + 60000)
return {1, "0", day, 0}
`;

type AdmitReply = [number, number, number, string, string];
type DailyReply = [number, string, number, number];

/** The connection with the two scripts defined on it (ioredis defineCommand: EVALSHA, and EVAL after a Redis restart). */
interface Scripted {
  gatewayRateAdmit(...args: string[]): Promise<AdmitReply>;
  gatewayDailyAdmit(key: string, ...args: string[]): Promise<DailyReply>;
}

function scripted(redis: Redis): Scripted {
  const commands = redis as unknown as Partial<Scripted>;
  if (!commands.gatewayRateAdmit) redis.defineCommand("gatewayRateAdmit", { lua: ADMIT_LUA });
  if (!commands.gatewayDailyAdmit) redis.defineCommand("gatewayDailyAdmit", { lua: DAILY_LUA, numberOfKeys: 1 });
  return redis as unknown as Scripted;
}

/** `nowMs` for a script: "" asks for the server's clock. String() of a number round-trips exactly. */
function timeArgument(nowMs: number | undefined): string {
  if (nowMs === undefined) return "";
  if (!Number.isFinite(nowMs)) throw new Error(`nowMs must be a finite number, got ${nowMs}`);
  return String(nowMs);
}

export interface RedisLimitsOptions {
  /** Prefix of every key these limits write; "sg:" by default. */
  prefix?: string;
}

/** The GCRA rate limiter of ./rate-limit.ts (RateLimiter), shared by every replica through Redis. */
export class RedisRateLimiter implements CallLimiter {
  private readonly redis: Scripted;
  private readonly prefix: string;

  constructor(redis: Redis, options: RedisLimitsOptions = {}) {
    this.redis = scripted(redis);
    this.prefix = `${options.prefix ?? "sg:"}rate:`;
  }

  /**
   * Admits a call only if every rule allows it, and then counts it against all of them; a call
   * refused by one rule consumes none (RateLimiter.admit). Rejects when Redis does not answer.
   */
  async admit(rules: readonly RateRule[], nowMs?: number): Promise<RateDecision> {
    if (rules.length === 0) throw new Error("admit needs at least one rule");
    const args = [String(rules.length), ...rules.map((rule) => this.prefix + rule.key), timeArgument(nowMs)];
    for (const rule of rules) {
      if (!Number.isSafeInteger(rule.limit) || rule.limit < 1) throw new Error(`rule ${rule.key}: limit must be a positive integer`);
      if (!Number.isSafeInteger(rule.windowMs) || rule.windowMs < 1)
        throw new Error(`rule ${rule.key}: windowMs must be a positive integer`);
      args.push(String(rule.limit), String(rule.windowMs));
    }
    const [allowed, index, remaining, resetMs, retryAfterMs] = await this.redis.gatewayRateAdmit(...args);
    const rule = rules[index - 1];
    if (!rule) throw new Error(`the rate limit script answered rule ${index} of ${rules.length}`);
    return { allowed: allowed === 1, rule, remaining, resetMs: Number(resetMs), retryAfterMs: Number(retryAfterMs) };
  }
}

/**
 * The per-account cap on calls per UTC day of ./rate-limit.ts (DailyCap), shared through Redis.
 * A counter Redis does not have for today (the first call of the day, or Redis restarted empty)
 * starts from the day's calls in the calls log when `countSince` is given, as DailyCap's does,
 * and from zero otherwise.
 */
export class RedisDailyCap implements CallDailyCap {
  private readonly redis: Scripted;
  private readonly prefix: string;

  constructor(
    redis: Redis,
    private readonly countSince?: CountSince,
    options: RedisLimitsOptions = {},
  ) {
    this.redis = scripted(redis);
    this.prefix = `${options.prefix ?? "sg:"}daily:`;
  }

  /** Counts a call if the account is under its cap; returns the ms until the next UTC day otherwise. */
  async admit(accountId: string, cap: number, nowMs?: number): Promise<DailyCapDecision> {
    if (!Number.isSafeInteger(cap) || cap < 0) throw new Error("cap must be a non-negative integer");
    const key = this.prefix + accountId;
    const now = timeArgument(nowMs);
    let reply = await this.redis.gatewayDailyAdmit(key, now, String(cap), this.countSince ? "ask" : "zero", "");
    // The day can turn between asking and answering (the server's clock): then ask once more.
    for (let attempt = 0; reply[3] === 1; attempt++) {
      if (attempt === 3) throw new Error("the daily cap could not be started from the calls log");
      const day = reply[2];
      const count = await this.countSince!(accountId, day * DAY_MS);
      if (!Number.isSafeInteger(count) || count < 0) throw new Error(`countSince answered ${count}`);
      reply = await this.redis.gatewayDailyAdmit(key, now, String(cap), String(count), String(day));
    }
    return reply[0] === 1 ? { allowed: true } : { allowed: false, retryAfterMs: Number(reply[1]) };
  }
}
