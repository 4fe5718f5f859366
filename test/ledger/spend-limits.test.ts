import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { assertBalanced } from "../../server/ledger/invariants";
import { type HoldResult, Ledger } from "../../server/ledger/ledger";
import { type SpendPeriod, SpendLimits, periodEndMs, periodStartMs } from "../../server/ledger/spend-limits";
import { describeEachEngine } from "../helpers/engines";
import { buildCharge, countRows, makeLedger, makeParties } from "../helpers/ledger";
import { Rng } from "../helpers/random";

const USD = 1_000_000n;
const HOUR_MS = 3_600_000;
/** Noon, UTC, on a Sunday in November. */
const T0 = Date.parse("2026-11-22T12:00:00.000Z");
const MIDNIGHT = Date.parse("2026-11-23T00:00:00.000Z");
const KEY = "key-1";

describeEachEngine("Ledger: API keys' spending limits", (engine) => {
  let db: Database;
  let ledger: Ledger;
  let limits: SpendLimits;
  let userId: string;
  let sellerId: string;

  beforeEach(async () => {
    ({ db, ledger } = await makeLedger(engine));
    ({ userId, sellerId } = await makeParties(ledger, 1_000n * USD));
    limits = new SpendLimits(db);
  });

  /** A hold of `micros` (fee included) made with `key` at `nowMs`. */
  const hold = (micros: bigint, nowMs = T0, key: string | undefined = KEY, on: Ledger = ledger) =>
    on.hold({
      accountId: userId,
      sellerAccountId: sellerId,
      skillId: "skill:echo",
      charge: buildCharge({ priceMicros: micros }),
      apiKeyId: key,
      nowMs,
    });
  const held = (result: HoldResult) => {
    if (!result.ok) throw new Error(`expected the hold to pass, got ${result.reason}`);
    return result.hold.id;
  };
  const spentAt = async (nowMs: number, key = KEY) => (await limits.statuses([key], nowMs)).get(key)?.spentMicros;
  const setLimit = (usd: bigint, period: SpendPeriod, nowMs = T0, key = KEY) => limits.set(key, { limitMicros: usd, period }, nowMs);

  it("reads, in a capture's own transaction, the account's available balance and the key's limit as they stand after it", async () => {
    await setLimit(3n * USD, "day");
    const first = held(await hold(USD));
    const second = held(await hold(USD)); // still in flight when the first is captured: its price is held, and counted
    const captured = await ledger.captureWithBudget(first, { apiKeyId: KEY, nowMs: T0 });
    if (!captured.ok) throw new Error("the hold was open");
    expect(captured.hold.id).to.equal(first);
    expect(captured.budget).to.deep.equal({
      availableMicros: 998n * USD,
      keyLimit: {
        limitMicros: 3n * USD,
        period: "day",
        spentMicros: 2n * USD,
        periodStartMs: Date.parse("2026-11-22T00:00:00Z"),
        resetsAtMs: MIDNIGHT,
      },
    });
    expect(captured.budget.availableMicros).to.equal((await ledger.balance(userId)).availableMicros);
    expect(captured.budget.keyLimit).to.deep.equal((await limits.statuses([KEY], T0)).get(KEY));

    // In the capture's transaction: what that transaction wrote before the capture is in the numbers, uncommitted
    // (a read of its own, on PostgreSQL, would not see it yet).
    const inTx = await db.transaction(async (tx) => {
      await ledger.credit(userId, 5n * USD, "dev_credit", "", tx);
      return ledger.captureWithBudget(second, { apiKeyId: KEY, nowMs: T0 }, tx);
    });
    expect(inTx.ok && inTx.budget.availableMicros).to.equal(1_003n * USD);

    // Read at its own time: past midnight, the key's new period has spent nothing; a key without a limit has none.
    const third = held(await hold(USD));
    const late = await ledger.captureWithBudget(third, { apiKeyId: KEY, nowMs: MIDNIGHT + HOUR_MS });
    expect(late.ok && late.budget.keyLimit).to.deep.include({ spentMicros: 0n, resetsAtMs: MIDNIGHT + 24 * HOUR_MS });
    const unlimited = held(await hold(USD, T0, "key-2"));
    const plain = await ledger.captureWithBudget(unlimited, { apiKeyId: "key-2", nowMs: T0 });
    expect(plain).to.deep.include({ budget: { availableMicros: 1_001n * USD, keyLimit: null } });
    // A hold closed already is not captured twice, and reads nothing.
    expect(await ledger.captureWithBudget(first, { apiKeyId: KEY, nowMs: T0 })).to.deep.equal({ ok: false, reason: "hold_not_open" });
    await assertBalanced(db);
  });

  it("counts nothing for a hold without a key, or made with a key that has no limit", async () => {
    held(await hold(USD, T0, undefined));
    held(await hold(USD, T0, KEY));
    expect(await limits.statuses([KEY], T0)).to.deep.equal(new Map());
    expect(await db.all("SELECT spend_key_id, spend_period_seq FROM holds")).to.deep.equal([
      { spend_key_id: null, spend_period_seq: null },
      { spend_key_id: null, spend_period_seq: null },
    ]);
    await assertBalanced(db);
  });

  it("lets holds through up to the limit exactly, then refuses with the limit, its period, what is spent and when it resets", async () => {
    await setLimit(3n * USD, "day");
    for (let i = 0; i < 2; i++) held(await hold(USD));
    expect(await hold(1_500_000n)).to.deep.include({ ok: false, reason: "key_spend_limit_reached", spentMicros: 2n * USD });
    held(await hold(USD)); // exactly to the limit
    const balance = await ledger.balance(userId);
    const refused = await hold(1n);
    expect(refused).to.deep.equal({
      ok: false,
      reason: "key_spend_limit_reached",
      // The balance the hold read under its lock, for the 402's details.
      availableMicros: balance.availableMicros,
      neededMicros: 1n,
      limitMicros: 3n * USD,
      period: "day",
      spentMicros: 3n * USD,
      periodStartMs: Date.parse("2026-11-22T00:00:00Z"),
      resetsAtMs: MIDNIGHT,
    });
    // A refusal writes nothing: no hold, no entry, the balance as it was.
    expect(await countRows(db, "holds")).to.equal(3);
    expect(await ledger.balance(userId)).to.deep.equal(balance);
    expect(await spentAt(T0)).to.equal(3n * USD);
    // Another key of the same account has its own count (none).
    held(await hold(USD, T0, "key-2"));
    await assertBalanced(db);
  });

  it("gives a released hold's amount back to its period, and keeps a captured one's", async () => {
    await setLimit(2n * USD, "month");
    const captured = held(await hold(USD));
    const released = held(await hold(USD));
    expect((await hold(USD)).ok).to.equal(false);
    expect((await ledger.capture(captured)).ok).to.equal(true);
    expect(await spentAt(T0)).to.equal(2n * USD);
    expect((await ledger.release(released)).ok).to.equal(true);
    expect(await spentAt(T0)).to.equal(USD);
    // A second release of the same hold changes nothing.
    expect((await ledger.release(released)).ok).to.equal(false);
    expect(await spentAt(T0)).to.equal(USD);
    held(await hold(USD));
    expect((await hold(1n)).ok).to.equal(false);
    await assertBalanced(db);
  });

  it("starts the count again at 00:00 UTC; a release of the day before gives nothing to the new day", async () => {
    await setLimit(2n * USD, "day");
    held(await hold(USD, T0));
    const lastOfDay = held(await hold(USD, MIDNIGHT - 1));
    expect(await hold(1n, MIDNIGHT - 1)).to.deep.include({ ok: false, resetsAtMs: MIDNIGHT });
    expect(await spentAt(MIDNIGHT)).to.equal(0n);
    held(await hold(USD, MIDNIGHT));
    expect(await spentAt(MIDNIGHT)).to.equal(USD);
    // The day before's hold is released: the day it was counted in is over, so today's count keeps its value.
    await ledger.release(lastOfDay);
    expect(await spentAt(MIDNIGHT)).to.equal(USD);
    held(await hold(USD, MIDNIGHT + HOUR_MS));
    expect(await hold(1n, MIDNIGHT + HOUR_MS)).to.deep.include({ ok: false, resetsAtMs: MIDNIGHT + 24 * HOUR_MS });
    await assertBalanced(db);
  });

  it("starts a month's count again at 00:00 UTC on the 1st, whatever the month's length", async () => {
    const feb28 = Date.parse("2028-02-28T23:00:00Z");
    const mar1 = Date.parse("2028-03-01T00:00:00Z");
    await setLimit(USD, "month", feb28);
    held(await hold(USD, feb28));
    // 29 February 2028 is still February.
    expect(await hold(1n, Date.parse("2028-02-29T23:59:59.999Z"))).to.deep.include({ ok: false, resetsAtMs: mar1 });
    held(await hold(USD, mar1));
    expect(await hold(1n, mar1)).to.deep.include({ ok: false, resetsAtMs: Date.parse("2028-04-01T00:00:00Z") });
    await assertBalanced(db);
  });

  it("never starts a total limit's count again", async () => {
    await setLimit(2n * USD, "total");
    held(await hold(2n * USD, T0));
    const years = Date.parse("2031-01-01T00:00:00Z");
    expect(await hold(1n, years)).to.deep.include({ ok: false, reason: "key_spend_limit_reached", resetsAtMs: null, periodStartMs: 0 });
    await assertBalanced(db);
  });

  it("refuses at once under a limit lowered below what was spent, until the reset, and allows at once under a raised one", async () => {
    await setLimit(5n * USD, "day");
    held(await hold(3n * USD));
    await setLimit(2n * USD, "day");
    expect(await spentAt(T0)).to.equal(3n * USD);
    expect(await hold(1n)).to.deep.include({ ok: false, limitMicros: 2n * USD, spentMicros: 3n * USD });
    held(await hold(2n * USD, MIDNIGHT));
    await setLimit(10n * USD, "day", MIDNIGHT);
    held(await hold(8n * USD, MIDNIGHT));
    expect((await hold(1n, MIDNIGHT)).ok).to.equal(false);
    await assertBalanced(db);
  });

  it("counts nothing once the limit is removed; set again on its period it goes on, a new period starts at zero", async () => {
    await setLimit(3n * USD, "day");
    const counted = held(await hold(2n * USD));
    await limits.set(KEY, null, T0);
    expect(await limits.statuses([KEY], T0)).to.deep.equal(new Map());
    held(await hold(50n * USD));
    await setLimit(3n * USD, "day");
    expect(await spentAt(T0)).to.equal(2n * USD);
    // A hold counted before the removal gives its amount back to the count it was taken from.
    await ledger.release(counted);
    expect(await spentAt(T0)).to.equal(0n);
    held(await hold(3n * USD));
    await setLimit(4n * USD, "month");
    expect(await spentAt(T0)).to.equal(0n);
    const stale = await db.value<bigint>("SELECT period_seq FROM key_spend_limits WHERE key_id = ?", [KEY]);
    held(await hold(4n * USD));
    // Back to a day: a new count again, which the day's earlier holds do not belong to.
    await setLimit(4n * USD, "day");
    expect(await db.value<bigint>("SELECT period_seq FROM key_spend_limits WHERE key_id = ?", [KEY])).to.equal(stale! + 1n);
    expect(await spentAt(T0)).to.equal(0n);
    await assertBalanced(db);
  });

  it("tells a poor account insufficient_balance, whatever its key's limit, and counts nothing", async () => {
    await setLimit(1n, "day");
    const poor = (await ledger.ensureAccount({ id: "user:poor", kind: "user", name: "Poor" })).id;
    const result = await ledger.hold({
      accountId: poor,
      sellerAccountId: sellerId,
      skillId: "skill:echo",
      charge: buildCharge({ priceMicros: USD }),
      apiKeyId: KEY,
      nowMs: T0,
    });
    expect(result).to.deep.include({ ok: false, reason: "insufficient_balance" });
    expect(await spentAt(T0)).to.equal(0n);
  });

  it("gives back what open holds counted when they are recovered", async () => {
    await setLimit(3n * USD, "day");
    held(await hold(USD));
    held(await hold(2n * USD));
    expect(await ledger.recoverOpenHolds()).to.equal(2);
    expect(await spentAt(T0)).to.equal(0n);
    await assertBalanced(db);
  });

  it("counts a hold whose clock is behind in the period another clock already started", async () => {
    await setLimit(3n * USD, "day");
    held(await hold(USD, T0));
    held(await hold(USD, MIDNIGHT + HOUR_MS));
    // A replica whose clock still says yesterday: the count of today is the one it adds to, not rolled back.
    held(await hold(USD, MIDNIGHT - HOUR_MS));
    expect(await spentAt(MIDNIGHT + HOUR_MS)).to.equal(2n * USD);
    expect(await hold(USD + 1n, MIDNIGHT - HOUR_MS)).to.deep.include({ ok: false, resetsAtMs: MIDNIGHT + 24 * HOUR_MS });
    await assertBalanced(db);
  });

  it("matches a model of the counts over a seeded random run of holds, settlements, limit changes and clock moves", async () => {
    const seed = Number(process.env.SPEND_LIMIT_SEED ?? 0x5eed15);
    const rng = new Rng(seed);
    const keys = ["key-a", "key-b"];
    type ModelKey = { limit: bigint | null; period: SpendPeriod; startMs: number; spent: bigint; seq: number };
    const model = new Map<string, ModelKey>();
    const open: { id: string; key: string; seq: number | null; amount: bigint }[] = [];
    let nowMs = T0;
    /** The model's period of `k` at `nowMs` (rolled over when over), as the ledger reads it. */
    const current = (k: ModelKey) => {
      const startMs = periodStartMs(k.period, nowMs);
      return k.startMs >= startMs ? { startMs: k.startMs, spent: k.spent, seq: k.seq } : { startMs, spent: 0n, seq: k.seq + 1 };
    };
    for (let step = 0; step < 160; step++) {
      const where = `seed ${seed}, step ${step}`;
      const action = rng.weighted([
        ["hold", 6],
        ["settle", 4],
        ["set", 1],
        ["remove", 0.3],
        ["clock", 1.5],
      ] as const);
      const key = rng.pick(keys);
      if (action === "clock") nowMs += rng.int(0, 40) * HOUR_MS + rng.int(0, 3_599_999);
      if (action === "set") {
        const limit = BigInt(rng.int(1, 12)) * 250_000n;
        const period = rng.pick(["day", "month", "total"] as const);
        await limits.set(key, { limitMicros: limit, period }, nowMs);
        const k = model.get(key);
        if (!k) model.set(key, { limit, period, startMs: periodStartMs(period, nowMs), spent: 0n, seq: 0 });
        else if (k.period !== period) Object.assign(k, { limit, period, startMs: periodStartMs(period, nowMs), spent: 0n, seq: k.seq + 1 });
        else k.limit = limit;
      }
      if (action === "remove") {
        await limits.set(key, null, nowMs);
        const k = model.get(key);
        if (k) k.limit = null;
      }
      if (action === "hold") {
        const amount = BigInt(rng.int(1, 8)) * 100_000n;
        const result = await hold(amount, nowMs, key);
        const k = model.get(key);
        if (!k || k.limit === null) {
          open.push({ id: held(result), key, seq: null, amount });
        } else {
          const c = current(k);
          if (c.spent + amount > k.limit) {
            expect(result, where).to.deep.include({
              ok: false,
              reason: "key_spend_limit_reached",
              spentMicros: c.spent,
              limitMicros: k.limit,
            });
          } else {
            Object.assign(k, { startMs: c.startMs, spent: c.spent + amount, seq: c.seq });
            open.push({ id: held(result), key, seq: c.seq, amount });
          }
        }
      }
      if (action === "settle" && open.length > 0) {
        const [h] = open.splice(rng.int(0, open.length - 1), 1);
        if (rng.chance(0.5)) {
          expect((await ledger.capture(h.id)).ok, where).to.equal(true);
        } else {
          expect((await ledger.release(h.id)).ok, where).to.equal(true);
          const k = model.get(h.key)!;
          if (h.seq !== null && h.seq === k.seq) k.spent -= h.amount;
        }
      }
      const statuses = await limits.statuses(keys, nowMs);
      for (const k of keys) {
        const m = model.get(k);
        if (!m || m.limit === null) {
          expect(statuses.has(k), `${where}: ${k} has no limit`).to.equal(false);
          continue;
        }
        const c = current(m);
        expect(statuses.get(k), `${where}: ${k}`).to.deep.equal({
          limitMicros: m.limit,
          period: m.period,
          spentMicros: c.spent,
          periodStartMs: c.startMs,
          resetsAtMs: periodEndMs(m.period, c.startMs),
        });
      }
      await assertBalanced(db);
    }
    expect(model.size, "the run set some limits").to.be.greaterThan(0);
  });

  if (engine.name === "postgres") {
    describe("on several replicas at once", () => {
      const extra: Database[] = [];
      let replicas: Ledger[];
      beforeEach(async () => {
        replicas = [ledger];
        for (let i = 0; i < 2; i++) {
          const handle = new PostgresDatabase(createPostgresPool({ url: engine.lastUrl(), max: 8, applicationName: `replica-${i + 2}` }));
          extra.push(handle);
          replicas.push(await Ledger.open(handle));
        }
      });
      afterEach(async () => {
        for (const handle of extra.splice(0)) await handle.close();
      });

      it("lets exactly as many concurrent holds for one key through as its limit covers, whichever replica takes them", async () => {
        await setLimit(14n * 700n, "day");
        const results = await Promise.all(Array.from({ length: 60 }, (_, i) => hold(700n, T0, KEY, replicas[i % 3])));
        expect(results.filter((r) => r.ok)).to.have.length(14);
        for (const refused of results.filter((r) => !r.ok)) expect(refused).to.deep.include({ reason: "key_spend_limit_reached" });
        expect(await spentAt(T0)).to.equal(14n * 700n);
        await assertBalanced(db);
      });

      it("queues holds, releases and limit changes of one key on several replicas without a deadlock or a lost count", async () => {
        await setLimit(20n * USD, "day");
        const first = await Promise.all(Array.from({ length: 20 }, (_, i) => hold(USD, T0, KEY, replicas[i % 3])));
        const ids = first.map(held);
        // Releases of the first twenty, new holds, and changes of the limit's period (each restarts the count),
        // all at once on three replicas: every hold passes or is refused for the limit, and the count stays the
        // sum of the holds counted in the current period (the invariant).
        const releases: Promise<unknown>[] = [];
        const holds: Promise<HoldResult>[] = [];
        const changes: Promise<void>[] = [];
        for (let i = 0; i < 30; i++) {
          if (i < 20) releases.push(replicas[i % 3].release(ids[i]));
          holds.push(hold(USD, T0, KEY, replicas[(i + 1) % 3]));
          if (i % 3 === 0) {
            const period = i % 2 === 0 ? "month" : "day";
            changes.push(new SpendLimits(i % 2 === 0 ? db : extra[0]).set(KEY, { limitMicros: 20n * USD, period }, T0));
          }
        }
        await Promise.all([...releases, ...changes]);
        const outcomes = await Promise.all(holds);
        for (const refused of outcomes.filter((r) => !r.ok)) expect(refused).to.deep.include({ reason: "key_spend_limit_reached" });
        expect(outcomes.filter((r) => r.ok).length, "some holds passed once releases made room").to.be.greaterThan(0);
        await assertBalanced(db);
      });
    });
  }
});
