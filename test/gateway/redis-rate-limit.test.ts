import { expect } from "chai";
import fc from "fast-check";
import { type Redis, openRedis } from "../../server/db/redis";
import { DailyCap, type RateDecision, RateLimiter, type RateRule } from "../../server/gateway/rate-limit";
import { RedisDailyCap, RedisRateLimiter } from "../../server/gateway/redis-rate-limit";
import { rejection, startRedis, useRedisServer } from "../helpers/redis";

/*
 * The shared limits of server/gateway/redis-rate-limit.ts against a real redis-server.
 *
 * The property tests replay seeded random sequences of calls through the in-memory limiter and
 * the Redis one and compare every decision, number for number. The seed is random unless
 * REDIS_LIMITS_SEED is set, and is printed in the tests' titles and in any failure; to replay
 * one (shrinking included), run the line a failure prints:
 *   REDIS_LIMITS_SEED=<seed> npx mocha --no-config -r ts-node/register/transpile-only --extension ts --exit test/gateway/redis-rate-limit.test.ts
 * REDIS_LIMITS_RUNS sets how many sequences to try (100 by default).
 */

const DAY_MS = 86_400_000;
/** 2026-03-14 00:00:00 UTC: the start of a UTC day. */
const MIDNIGHT_MS = Date.UTC(2026, 2, 14);
const T0_MS = MIDNIGHT_MS + 9 * 3_600_000;

function envInteger(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  if (!/^-?\d+$/.test(raw)) throw new Error(`${name} must be an integer, got "${raw}"`);
  return Number(raw);
}
const seed = envInteger("REDIS_LIMITS_SEED") ?? (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) | 0;
const numRuns = envInteger("REDIS_LIMITS_RUNS") ?? 100;
const REPLAY = `REDIS_LIMITS_SEED=${seed} npx mocha --no-config -r ts-node/register/transpile-only --extension ts --exit test/gateway/redis-rate-limit.test.ts`;

async function checkProperty<Ts>(property: fc.IAsyncProperty<Ts>): Promise<void> {
  const details = await fc.check(property, { seed, numRuns });
  if (details.failed) {
    const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
    throw new Error(`Replay with: ${REPLAY}\n${fc.defaultReportMessage(details)}\nFailure: ${cause}`);
  }
}

/** The milliseconds between two calls: often none (a burst), often a fraction of a refill, sometimes a long idle. */
const gapMs = fc.oneof(
  { arbitrary: fc.constant(0), weight: 4 },
  { arbitrary: fc.integer({ min: 1, max: 3_000 }), weight: 4 },
  { arbitrary: fc.constantFrom(1_000 / 3, 600, 2_000 / 3), weight: 1 },
  { arbitrary: fc.integer({ min: 3_000, max: 90_000 }), weight: 1 },
);
const ruleShape = fc.record({
  limit: fc.oneof(fc.integer({ min: 1, max: 6 }), fc.constantFrom(3, 7, 100)),
  windowMs: fc.constantFrom(3_000, 10_000, 60_000),
});

describe("RedisRateLimiter and RedisDailyCap: the limits shared through a real Redis", () => {
  const redis = useRedisServer();
  let clients: Redis[] = [];
  /** A replica's connection, as the gateway opens it (server/replication.ts): failing fast while Redis is down, auto-pipelined. */
  const connect = async (url = redis.server.url) => {
    const client = await openRedis({ url, name: "test:limits", failFast: true, autoPipelining: true });
    clients.push(client);
    return client;
  };
  let admin: Redis;
  beforeEach(async () => {
    admin = await connect();
    await admin.flushall();
  });
  afterEach(() => {
    for (const client of clients) client.disconnect();
    clients = [];
  });

  describe("agrees with the in-memory limits, decision for decision", () => {
    it(`RateLimiter: allowed, deciding rule, remaining, reset and Retry-After on random calls over keys and skills (seed ${seed})`, async function () {
      this.timeout(numRuns * 2_000);
      let run = 0;
      await checkProperty(
        fc.asyncProperty(
          fc.array(ruleShape, { minLength: 3, maxLength: 3 }),
          fc.array(fc.option(ruleShape, { nil: null }), { minLength: 2, maxLength: 2 }),
          fc.array(fc.record({ key: fc.nat({ max: 2 }), skill: fc.option(fc.nat({ max: 1 }), { nil: null }), gapMs }), {
            minLength: 1,
            maxLength: 80,
            size: "max",
          }),
          async (keyShapes, skillShapes, calls) => {
            const memory = new RateLimiter();
            const shared = new RedisRateLimiter(admin, { prefix: `run${run++}:` });
            let nowMs = T0_MS;
            for (const [i, call] of calls.entries()) {
              nowMs += call.gapMs;
              // Keys 0 and 2 belong to one account, so they share that account's per-skill counters.
              const rules: RateRule[] = [{ key: `key:k${call.key}`, ...keyShapes[call.key] }];
              const skill = call.skill === null ? null : skillShapes[call.skill];
              if (skill) rules.push({ key: `skill:s${call.skill}:acct${call.key % 2}`, ...skill });
              const expected = await memory.admit(rules, nowMs);
              const actual = await shared.admit(rules, nowMs);
              const [got, want] = [actual, expected].map((d) => ({ ...d, rule: rules.indexOf(d.rule) }));
              expect(got, `call ${i} at +${nowMs - T0_MS} ms: ${JSON.stringify(got)} vs ${JSON.stringify(want)}`).to.deep.equal(want);
            }
          },
        ),
      );
    });

    it(`DailyCap: allowed and Retry-After, and the same loads from the calls log, across UTC days (seed ${seed})`, async function () {
      this.timeout(numRuns * 2_000);
      let run = 0;
      await checkProperty(
        fc.asyncProperty(
          fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 3, maxLength: 3 }),
          fc.array(
            fc.record({
              account: fc.nat({ max: 2 }),
              cap: fc.oneof({ arbitrary: fc.constant(null), weight: 4 }, { arbitrary: fc.integer({ min: 1, max: 6 }), weight: 1 }),
              gapMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3 * 3_600_000 }), fc.integer({ min: DAY_MS / 2, max: 2 * DAY_MS })),
            }),
            { minLength: 1, maxLength: 60, size: "max" },
          ),
          fc.integer({ min: 0, max: DAY_MS - 1 }),
          async (caps, calls, startMs) => {
            // The calls log: how many calls an account made since a time, made up but the same for both.
            const logged = (loads: string[]) => (accountId: string, sinceMs: number) => {
              loads.push(`${accountId}@${sinceMs}`);
              return (accountId.length + Math.floor(sinceMs / DAY_MS)) % 3;
            };
            const memoryLoads: string[] = [];
            const sharedLoads: string[] = [];
            const memory = new DailyCap(logged(memoryLoads));
            const shared = new RedisDailyCap(admin, logged(sharedLoads), { prefix: `run${run++}:` });
            const capOf = [...caps].map((c) => c + 1);
            let nowMs = MIDNIGHT_MS + startMs;
            for (const [i, call] of calls.entries()) {
              nowMs += call.gapMs;
              // A cap changed between calls applies at once (the account's own, or the configuration's).
              if (call.cap !== null) capOf[call.account] = call.cap;
              const accountId = `acct:${"a".repeat(call.account + 1)}`;
              const expected = await memory.admit(accountId, capOf[call.account], nowMs);
              const actual = await shared.admit(accountId, capOf[call.account], nowMs);
              const at = `call ${i} at ${new Date(nowMs).toISOString()}`;
              expect(actual, `${at}: ${JSON.stringify(actual)} vs ${JSON.stringify(expected)}`).to.deep.equal(expected);
            }
            expect(sharedLoads).to.deep.equal(memoryLoads);
          },
        ),
      );
    });
  });

  describe("RedisRateLimiter", () => {
    const perKey: RateRule = { key: "key:k1", limit: 100, windowMs: 60_000 };

    it("shares one limit between replicas: 100 a minute per key is 100 in total, not 100 on each", async () => {
      const replicas = [new RedisRateLimiter(await connect()), new RedisRateLimiter(await connect())];
      const decisions: RateDecision[] = [];
      for (let i = 0; i < 250; i++) decisions.push(await replicas[i % 2].admit([perKey], T0_MS + i));
      const allowedBy = replicas.map((_, r) => decisions.filter((d, i) => i % 2 === r && d.allowed).length);
      expect(allowedBy[0] + allowedBy[1]).to.equal(100);
      expect(allowedBy).to.deep.equal([50, 50]);
      // The 101st call, on either replica, is told the same wait: one refill, less the time gone by.
      const refused = decisions[100];
      expect(refused).to.deep.include({ allowed: false, remaining: 0, retryAfterMs: 600 - 100 });
    });

    it("admits exactly 100 of 300 concurrent checks against a limit of 100, from three replicas, on the server's clock", async () => {
      const replicas = [0, 1, 2].map(async () => new RedisRateLimiter(await connect()));
      const limiters = await Promise.all(replicas);
      // A refill every 36 s: no allowance comes back while the 300 checks run.
      const rule: RateRule = { key: "key:concurrent", limit: 100, windowMs: 3_600_000 };
      const decisions = await Promise.all(Array.from({ length: 300 }, (_, i) => limiters[i % 3].admit([rule])));
      const allowed = decisions.filter((d) => d.allowed);
      expect(allowed).to.have.length(100);
      // Decided one after another: each admitted call saw a different remaining allowance.
      expect(allowed.map((d) => d.remaining).sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 100 }, (_, i) => i));
    });

    it("consumes from every rule or from none, across replicas", async () => {
      const [a, b] = [new RedisRateLimiter(await connect()), new RedisRateLimiter(await connect())];
      const perSkill: RateRule = { key: "skill:s1:acct", limit: 2, windowMs: 10_000 };
      const key: RateRule = { key: "key:k2", limit: 5, windowMs: 10_000 };
      expect((await a.admit([key, perSkill], T0_MS)).allowed).to.equal(true);
      expect((await b.admit([key, perSkill], T0_MS)).allowed).to.equal(true);
      const refused = await a.admit([key, perSkill], T0_MS);
      expect(refused.allowed).to.equal(false);
      expect(refused.rule).to.equal(perSkill);
      // The key rule counted the two admitted calls only: 3 more fit, on the other replica.
      const rest = [];
      for (let i = 0; i < 4; i++) rest.push((await b.admit([key], T0_MS)).allowed);
      expect(rest).to.deep.equal([true, true, true, false]);
    });

    it("decides by the Redis server's clock, not the replica's", async () => {
      const [a, b] = [new RedisRateLimiter(await connect()), new RedisRateLimiter(await connect())];
      const rule: RateRule = { key: "key:clock", limit: 1, windowMs: 60_000 };
      expect((await a.admit([rule])).allowed).to.equal(true);
      // Replica b's clock runs 30 s late. Had it used its own, it would see the first call 30 s in
      // its future and ask for a wait of 90 s.
      const realNow = Date.now;
      Date.now = () => realNow() - 30_000;
      let refused: RateDecision;
      try {
        refused = await b.admit([rule]);
      } finally {
        Date.now = realNow;
      }
      expect(refused.allowed).to.equal(false);
      expect(refused.retryAfterMs).to.be.within(59_000, 60_000);
    });

    it("admits again once the server's clock has moved on by Retry-After", async function () {
      this.timeout(10_000);
      const limiter = new RedisRateLimiter(await connect());
      const rule: RateRule = { key: "key:refill", limit: 2, windowMs: 600 };
      expect((await limiter.admit([rule])).allowed).to.equal(true);
      expect((await limiter.admit([rule])).allowed).to.equal(true);
      const refused = await limiter.admit([rule]);
      expect(refused.allowed).to.equal(false);
      expect(refused.retryAfterMs).to.be.within(1, 300);
      await new Promise((resolve) => setTimeout(resolve, refused.retryAfterMs + 20));
      expect((await limiter.admit([rule])).allowed).to.equal(true);
    });

    it("keeps each counter no longer than its window: the keys expire on their own", async function () {
      this.timeout(10_000);
      const limiter = new RedisRateLimiter(admin, { prefix: "ttl:" });
      await limiter.admit([perKey, { key: "key:short", limit: 5, windowMs: 200 }]);
      expect(await admin.pttl("ttl:rate:key:k1")).to.be.within(59_000, 60_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await admin.exists("ttl:rate:key:short")).to.equal(0);
      expect(await admin.exists("ttl:rate:key:k1")).to.equal(1);
    });

    it("refuses malformed rules before asking Redis", async () => {
      const limiter = new RedisRateLimiter(admin);
      expect((await rejection(limiter.admit([]))).message).to.contain("at least one rule");
      expect((await rejection(limiter.admit([{ key: "k", limit: 0, windowMs: 1_000 }]))).message).to.contain("positive integer");
      expect((await rejection(limiter.admit([{ key: "k", limit: 1, windowMs: Number.NaN }]))).message).to.contain("positive integer");
    });
  });

  describe("RedisDailyCap", () => {
    it("rolls over at the UTC day boundary: refused at 23:59:59.999, admitted at 00:00", async () => {
      const [a, b] = [new RedisDailyCap(await connect()), new RedisDailyCap(await connect())];
      const lastMs = MIDNIGHT_MS + DAY_MS - 1;
      expect(await a.admit("acct:a", 2, lastMs - 60_000)).to.deep.equal({ allowed: true });
      expect(await b.admit("acct:a", 2, lastMs - 1)).to.deep.equal({ allowed: true });
      expect(await a.admit("acct:a", 2, lastMs)).to.deep.equal({ allowed: false, retryAfterMs: 1 });
      expect(await b.admit("acct:a", 2, lastMs)).to.deep.equal({ allowed: false, retryAfterMs: 1 });
      expect(await b.admit("acct:a", 2, lastMs + 1)).to.deep.equal({ allowed: true });
      expect(await a.admit("acct:a", 2, lastMs + 2)).to.deep.equal({ allowed: true });
      expect(await a.admit("acct:a", 2, lastMs + 3)).to.deep.equal({ allowed: false, retryAfterMs: DAY_MS - 2 });
    });

    it("does not count refused calls: a cap raised after many refusals admits at once", async () => {
      const cap = new RedisDailyCap(await connect());
      for (let i = 0; i < 3; i++) expect((await cap.admit("acct:b", 3, T0_MS)).allowed).to.equal(true);
      for (let i = 0; i < 20; i++) expect((await cap.admit("acct:b", 3, T0_MS)).allowed).to.equal(false);
      expect(await cap.admit("acct:b", 4, T0_MS)).to.deep.equal({ allowed: true });
      expect((await cap.admit("acct:b", 4, T0_MS)).allowed).to.equal(false);
    });

    it("counts each account on its own, and expires an account's counter a minute after the end of the server's day", async () => {
      const cap = new RedisDailyCap(admin, undefined, { prefix: "day:" });
      expect((await cap.admit("acct:c", 1)).allowed).to.equal(true);
      expect((await cap.admit("acct:c", 1)).allowed).to.equal(false);
      expect((await cap.admit("acct:d", 1)).allowed).to.equal(true);
      const [sec, usec] = (await admin.time()).map(Number);
      const serverNowMs = sec * 1000 + Math.floor(usec / 1000);
      const untilMidnightMs = (Math.floor(serverNowMs / DAY_MS) + 1) * DAY_MS - serverNowMs;
      const ttl = await admin.pttl("day:daily:acct:c");
      // The script sets math.ceil(day_end - now) + 60 s from the server's clock in microseconds: up to 1 ms above
      // what the floored milliseconds here give.
      expect(ttl).to.be.within(untilMidnightMs + 59_000, untilMidnightMs + 60_001);
    });

    it("starts a day's count from the calls log once, whichever replica asks first", async () => {
      const loads: string[] = [];
      const countSince = async (accountId: string, sinceMs: number) => {
        loads.push(`${accountId}@${sinceMs}`);
        return 2;
      };
      const [a, b] = [new RedisDailyCap(await connect(), countSince), new RedisDailyCap(await connect(), countSince)];
      expect(await a.admit("acct:e", 3, T0_MS)).to.deep.equal({ allowed: true });
      expect((await b.admit("acct:e", 3, T0_MS + 1)).allowed).to.equal(false);
      expect(loads).to.deep.equal([`acct:e@${MIDNIGHT_MS}`]);
    });
  });

  it("carries on after Redis restarts empty: scripts loaded again, the day's count taken from the calls log again", async function () {
    this.timeout(30_000);
    let server = await startRedis();
    try {
      const client = await connect(server.url);
      const limiter = new RedisRateLimiter(client);
      // The calls log: one call today before the restart, two after it.
      let loggedToday = 1;
      const cap = new RedisDailyCap(client, () => loggedToday);
      const rule: RateRule = { key: "key:restart", limit: 1, windowMs: 60_000 };
      expect((await limiter.admit([rule], T0_MS)).allowed).to.equal(true);
      expect((await cap.admit("acct:f", 2, T0_MS)).allowed).to.equal(true);
      expect((await cap.admit("acct:f", 2, T0_MS)).allowed).to.equal(false);

      await server.stop();
      loggedToday = 2;
      // While Redis is down the replica's connection fails fast, it does not wait.
      const down = await rejection(limiter.admit([rule], T0_MS));
      expect(down.message).to.match(/writeable|closed|connect/i);
      server = await startRedis({ port: server.port });

      const deadline = Date.now() + 5_000;
      let decision: RateDecision | undefined;
      while (!decision) {
        try {
          decision = await limiter.admit([rule], T0_MS);
        } catch (error) {
          if (Date.now() > deadline) throw error;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      // The counters went with the old server: the limit starts afresh, the daily cap from the log.
      expect(decision.allowed).to.equal(true);
      expect(await cap.admit("acct:f", 2, T0_MS)).to.deep.equal({ allowed: false, retryAfterMs: DAY_MS - 9 * 3_600_000 });
      expect(await cap.admit("acct:f", 3, T0_MS)).to.deep.equal({ allowed: true });
    } finally {
      await server.stop();
    }
  });
});
