import { expect } from "chai";
import { DailyCap, type RateDecision, RateLimiter, type RateRule } from "../../server/gateway/rate-limit";

const DAY_MS = 86_400_000;
/** 2026-03-14 00:00:00 UTC: the start of a UTC day, so offsets read as times of day. */
const MIDNIGHT_MS = Date.UTC(2026, 2, 14);
const T0_MS = MIDNIGHT_MS + 9 * 3_600_000;

/** 5 calls per 10 s: one call's worth refills every 2 s. */
const perKey: RateRule = { key: "key:k1", limit: 5, windowMs: 10_000 };

describe("RateLimiter", () => {
  let limiter: RateLimiter;

  beforeEach(() => {
    limiter = new RateLimiter();
  });

  /** Admits `count` calls at one instant, one after another, and returns the decisions. */
  const burst = async (rules: readonly RateRule[], count: number, nowMs = T0_MS) => {
    const decisions: RateDecision[] = [];
    for (let i = 0; i < count; i++) decisions.push(await limiter.admit(rules, nowMs));
    return decisions;
  };

  describe("a single rule", () => {
    it("allows exactly `limit` calls in a burst, then rejects", async () => {
      const decisions = await burst([perKey], 7);
      expect(decisions.map((d) => d.allowed)).to.deep.equal([true, true, true, true, true, false, false]);
    });

    it("counts down `remaining` through the burst", async () => {
      expect((await burst([perKey], 5)).map((d) => d.remaining)).to.deep.equal([4, 3, 2, 1, 0]);
    });

    it("reports, for each allowed call, how long until the allowance is full again", async () => {
      expect((await burst([perKey], 5)).map((d) => d.resetMs)).to.deep.equal([2_000, 4_000, 6_000, 8_000, 10_000]);
    });

    it("tells a rejected call to retry when one call has refilled", async () => {
      await burst([perKey], 5);
      const rejected = await limiter.admit([perKey], T0_MS);
      expect(rejected).to.deep.include({ allowed: false, remaining: 0, retryAfterMs: 2_000, resetMs: 10_000 });
      expect(rejected.rule).to.equal(perKey);
      expect((await limiter.admit([perKey], T0_MS + 500)).retryAfterMs).to.equal(1_500);
    });

    it("reports retryAfterMs 0 on an allowed call", async () => {
      expect((await limiter.admit([perKey], T0_MS)).retryAfterMs).to.equal(0);
    });

    it("admits the retry exactly at retryAfterMs, and not a millisecond before", async () => {
      await burst([perKey], 5);
      const { retryAfterMs } = await limiter.admit([perKey], T0_MS);
      expect((await limiter.admit([perKey], T0_MS + retryAfterMs - 1)).allowed).to.equal(false);
      expect((await limiter.admit([perKey], T0_MS + retryAfterMs)).allowed).to.equal(true);
    });

    it("does not count rejected calls: hammering while limited does not push the retry further away", async () => {
      await burst([perKey], 5);
      await burst([perKey], 100, T0_MS + 1_000);
      expect((await limiter.admit([perKey], T0_MS + 2_000)).allowed).to.equal(true);
    });

    it("refills one call every window/limit", async () => {
      await burst([perKey], 5);
      for (let i = 1; i <= 3; i++) {
        const atMs = T0_MS + i * 2_000;
        expect((await limiter.admit([perKey], atMs)).allowed, `refill ${i}`).to.equal(true);
        expect((await limiter.admit([perKey], atMs)).allowed, `second call at refill ${i}`).to.equal(false);
      }
    });

    it("sustains exactly limit per window at a steady pace", async () => {
      const decisions: RateDecision[] = [];
      for (let i = 0; i < 50; i++) decisions.push(await limiter.admit([perKey], T0_MS + i * 2_000));
      expect(decisions.every((d) => d.allowed)).to.equal(true);
      expect(decisions.at(-1)!.remaining).to.equal(4);
    });

    it("gives back the whole burst after a full idle window", async () => {
      await burst([perKey], 5);
      expect((await burst([perKey], 6, T0_MS + 10_000)).map((d) => d.allowed)).to.deep.equal([true, true, true, true, true, false]);
    });

    it("does not bank unused allowance beyond the limit after a long idle time", async () => {
      await limiter.admit([perKey], T0_MS);
      expect((await burst([perKey], 6, T0_MS + 3_600_000)).filter((d) => d.allowed)).to.have.length(5);
    });

    it("keeps separate counters per key", async () => {
      await burst([perKey], 5);
      expect((await limiter.admit([{ ...perKey, key: "key:k2" }], T0_MS)).allowed).to.equal(true);
    });

    it("handles a window that does not divide evenly by the limit (100 per minute)", async () => {
      const rule: RateRule = { key: "key:spec-default", limit: 100, windowMs: 60_000 };
      expect((await burst([rule], 101)).filter((d) => d.allowed)).to.have.length(100);
      expect((await limiter.admit([rule], T0_MS)).retryAfterMs).to.equal(600);
      const third: RateRule = { key: "key:thirds", limit: 3, windowMs: 1_000 };
      // 333.33 ms per call: a hundred steady calls must not drift into a rejection.
      const steady: RateDecision[] = [];
      for (let i = 0; i < 100; i++) steady.push(await limiter.admit([third], T0_MS + (i * 1_000) / 3));
      expect(steady.every((d) => d.allowed)).to.equal(true);
    });

    it("refuses to decide without a rule", async () => {
      const refused = await limiter.admit([], T0_MS).then(
        () => expect.fail("admit should have refused"),
        (error: Error) => error,
      );
      expect(refused.message).to.contain("at least one rule");
    });
  });

  describe("several rules", () => {
    const perSkill: RateRule = { key: "skill:s1:acct", limit: 2, windowMs: 10_000 };

    it("admits only when every rule allows, and reports the first rule as the headline", async () => {
      const decision = await limiter.admit([perKey, perSkill], T0_MS);
      expect(decision.allowed).to.equal(true);
      expect(decision.rule).to.equal(perKey);
      expect(decision.remaining).to.equal(4);
    });

    it("reports the rule that rejected, with its own retryAfterMs", async () => {
      await burst([perKey, perSkill], 2);
      const rejected = await limiter.admit([perKey, perSkill], T0_MS);
      expect(rejected.allowed).to.equal(false);
      expect(rejected.rule).to.equal(perSkill);
      expect(rejected.retryAfterMs).to.equal(5_000);
    });

    it("consumes nothing from the first rule when the second rejects", async () => {
      await burst([perKey, perSkill], 2);
      await burst([perKey, perSkill], 10); // all rejected by perSkill
      // perKey has had 2 calls counted, so 3 remain in its burst.
      expect((await burst([perKey], 4)).map((d) => d.allowed)).to.deep.equal([true, true, true, false]);
    });

    it("consumes nothing from any rule when the first rejects", async () => {
      await burst([perKey], 5);
      expect((await limiter.admit([perKey, perSkill], T0_MS)).rule).to.equal(perKey);
      expect((await burst([perSkill], 3)).map((d) => d.allowed)).to.deep.equal([true, true, false]);
    });
  });

  describe("prune", () => {
    it("forgets counters that have refilled completely and keeps the others", async () => {
      await limiter.admit([perKey], T0_MS);
      await limiter.admit([{ key: "key:later", limit: 5, windowMs: 10_000 }], T0_MS + 1_000);
      expect(limiter.size).to.equal(2);
      limiter.prune(T0_MS + 2_000);
      expect(limiter.size).to.equal(1);
      limiter.prune(T0_MS + 3_000);
      expect(limiter.size).to.equal(0);
    });

    it("changes no decision: a pruned counter behaves as a full one", async () => {
      await burst([perKey], 5);
      limiter.prune(T0_MS + 9_999);
      expect(limiter.size).to.equal(1);
      expect((await limiter.admit([perKey], T0_MS + 9_999)).allowed).to.equal(true);
      limiter.prune(T0_MS + 60_000);
      expect(limiter.size).to.equal(0);
      expect((await burst([perKey], 6, T0_MS + 60_000)).filter((d) => d.allowed)).to.have.length(5);
    });

    it("runs by itself after many writes, so idle counters do not pile up", async () => {
      for (let i = 0; i < 10_000; i++) await limiter.admit([{ key: `key:${i}`, limit: 1, windowMs: 1_000 }], T0_MS);
      expect(limiter.size).to.equal(10_000);
      // The 10,001st write prunes; by then the first 10,000 counters have refilled.
      await limiter.admit([perKey], T0_MS + 1_000);
      expect(limiter.size).to.equal(1);
    });
  });
});

describe("DailyCap", () => {
  let loads: { accountId: string; sinceMs: number }[];
  let alreadyToday: Map<string, number>;
  let cap: DailyCap;

  beforeEach(() => {
    loads = [];
    alreadyToday = new Map();
    // Stands in for the calls log: how many calls each account made since a time.
    cap = new DailyCap((accountId, sinceMs) => {
      loads.push({ accountId, sinceMs });
      return alreadyToday.get(accountId) ?? 0;
    });
  });

  const admitMany = async (accountId: string, limit: number, count: number, nowMs = T0_MS) => {
    const allowed: boolean[] = [];
    for (let i = 0; i < count; i++) allowed.push((await cap.admit(accountId, limit, nowMs)).allowed);
    return allowed;
  };

  it("allows `cap` calls in a UTC day, then rejects", async () => {
    expect(await admitMany("acct:a", 3, 5)).to.deep.equal([true, true, true, false, false]);
  });

  it("starts from the calls already logged today, as after a restart", async () => {
    alreadyToday.set("acct:a", 2);
    expect(await admitMany("acct:a", 3, 2)).to.deep.equal([true, false]);
  });

  it("loads the day's count once, from midnight UTC", async () => {
    await admitMany("acct:a", 100, 10, T0_MS);
    await admitMany("acct:a", 100, 10, T0_MS + 3_600_000);
    expect(loads).to.deep.equal([{ accountId: "acct:a", sinceMs: MIDNIGHT_MS }]);
  });

  it("counts each account on its own", async () => {
    expect(await admitMany("acct:a", 2, 3)).to.deep.equal([true, true, false]);
    expect(await admitMany("acct:b", 2, 3)).to.deep.equal([true, true, false]);
    expect(loads.map((l) => l.accountId)).to.deep.equal(["acct:a", "acct:b"]);
  });

  it("tells a rejected call to retry at the next midnight UTC", async () => {
    await admitMany("acct:a", 1, 1);
    expect(await cap.admit("acct:a", 1, T0_MS)).to.deep.equal({ allowed: false, retryAfterMs: 15 * 3_600_000 });
    expect(await cap.admit("acct:a", 1, MIDNIGHT_MS + DAY_MS - 1)).to.deep.equal({ allowed: false, retryAfterMs: 1 });
  });

  it("starts again the next UTC day, from that day's logged count", async () => {
    await admitMany("acct:a", 2, 2, MIDNIGHT_MS + DAY_MS - 1);
    expect((await cap.admit("acct:a", 2, MIDNIGHT_MS + DAY_MS - 1)).allowed).to.equal(false);
    alreadyToday.set("acct:a", 1); // one call logged after midnight by another instance
    expect(await admitMany("acct:a", 2, 2, MIDNIGHT_MS + DAY_MS)).to.deep.equal([true, false]);
    expect(loads.map((l) => l.sinceMs)).to.deep.equal([MIDNIGHT_MS, MIDNIGHT_MS + DAY_MS]);
  });

  it("counts calls made while the day's count is still being read from the log against the one count", async () => {
    const slowLog = new DailyCap(async (accountId, sinceMs) => {
      loads.push({ accountId, sinceMs });
      await new Promise((resolve) => setTimeout(resolve, 5));
      return 1;
    });
    const decisions = await Promise.all(Array.from({ length: 4 }, () => slowLog.admit("acct:a", 3, T0_MS)));
    expect(decisions.map((d) => d.allowed)).to.deep.equal([true, true, false, false]);
    expect((await slowLog.admit("acct:a", 3, T0_MS)).allowed).to.equal(false);
  });

  it("uses the cap given on each call, so a raised cap applies at once", async () => {
    await admitMany("acct:a", 2, 2);
    expect((await cap.admit("acct:a", 2, T0_MS)).allowed).to.equal(false);
    expect((await cap.admit("acct:a", 3, T0_MS)).allowed).to.equal(true);
  });
});
