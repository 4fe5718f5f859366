import { expect } from "chai";
import { ERROR_CODES, type ErrorCode } from "../../server/errors";
import { ERROR_STATUS } from "../../server/http/errors";
import {
  HOUR_MS,
  LATENCY_BOUNDS_US,
  QUALITY_MIN_CALLS,
  type QualityResult,
  SELLER_FAULTS,
  addCount,
  bucketBoundMs,
  emptyTotals,
  faultOf,
  latencyBucket,
  percentileMs,
  summaryOf,
} from "../../server/gateway/quality";
import { QualityRecorder } from "../../server/gateway/quality-recorder";
import { QualityStore } from "../../server/gateway/quality-store";
import type { Database } from "../../server/db/sql";
import { describeEachEngine } from "../helpers/engines";

/** 2026-11-27 12:00 UTC, and the hour after. */
const NOON_MS = Date.UTC(2026, 10, 27, 12);
const DAY_MS = 24 * HOUR_MS;

describe("skill quality's rules (server/gateway/quality.ts)", () => {
  it("puts a latency in the bucket whose bound is the first at or above it", () => {
    expect(latencyBucket(0)).to.equal(0);
    expect(latencyBucket(1000)).to.equal(0);
    expect(latencyBucket(1001)).to.equal(1);
    expect(bucketBoundMs(latencyBucket(101_000))).to.equal(125);
    expect(bucketBoundMs(latencyBucket(100_000))).to.equal(100);
    expect(bucketBoundMs(latencyBucket(340_000))).to.equal(400);
    // Past the last bound: the overflow bucket, said as the last bound.
    expect(latencyBucket(200_000_000)).to.equal(LATENCY_BOUNDS_US.length);
    expect(bucketBoundMs(LATENCY_BOUNDS_US.length)).to.equal(125_000);
    // Ten a decade, log-scale, strictly increasing.
    for (let i = 1; i < LATENCY_BOUNDS_US.length; i++) expect(LATENCY_BOUNDS_US[i]).to.be.greaterThan(LATENCY_BOUNDS_US[i - 1]);
    expect(LATENCY_BOUNDS_US.slice(10, 20).map((b) => b / 1000)).to.deep.equal([10, 12.5, 16, 20, 25, 32, 40, 50, 63, 80]);
  });

  it("takes percentiles by nearest rank, as the bound of the bucket holding that call", () => {
    // 10 calls: 9 within 100 ms, 1 within 2 s.
    const histogram = new Map([
      [latencyBucket(90_000), 9],
      [latencyBucket(1_900_000), 1],
    ]);
    expect(percentileMs(histogram, 50)).to.equal(100);
    expect(percentileMs(histogram, 90)).to.equal(100);
    expect(percentileMs(histogram, 95)).to.equal(2000);
    expect(percentileMs(new Map(), 50)).to.equal(null);
  });

  it("counts against the seller exactly the failures that are a call's 502s", () => {
    const codes = Object.keys(ERROR_CODES) as ErrorCode[];
    const of502 = codes.filter((code) => ERROR_STATUS[code] === 502).sort();
    expect([...SELLER_FAULTS].sort()).to.deep.equal(of502);
    expect(faultOf("skill_rejected_input")).to.equal("buyer");
    expect(faultOf("invalid_input")).to.equal("buyer");
    expect(faultOf("insufficient_balance")).to.equal("buyer");
    expect(faultOf("rate_limited")).to.equal("buyer");
    expect(faultOf("internal_error")).to.equal("gateway");
  });

  it("rates successes over successes and the seller's failures, and says nothing below the threshold", () => {
    const totals = emptyTotals();
    const add = (result: QualityResult, calls: number, latencyUs = 50_000) =>
      addCount(totals, {
        result,
        bucket: latencyBucket(latencyUs),
        calls,
        chargedMicros: result === "success" ? BigInt(calls) * 1000n : 0n,
      });
    add("success", QUALITY_MIN_CALLS - 2);
    add("skill_error", 1);
    add("invalid_input", 50, 0);
    add("insufficient_balance", 7, 0);
    // 19 rated calls: too few.
    expect(summaryOf(totals)).to.equal(null);
    add("skill_timeout", 1, 2_000_000);
    // 18 successes of 20: 0.9; the buyer's 57 failures are not counted, nor are their latencies.
    expect(summaryOf(totals)).to.deep.equal({ calls: 20, successRate: 0.9, p50Ms: 50, p95Ms: 50 });
    expect(totals.calls).to.equal(77);
    expect(totals.chargedMicros).to.equal(18_000n);
  });

  it("rounds the success rate down, never up to 100%", () => {
    const totals = emptyTotals();
    addCount(totals, { result: "success", bucket: 0, calls: 9_999, chargedMicros: 0n });
    addCount(totals, { result: "skill_error", bucket: 0, calls: 1, chargedMicros: 0n });
    expect(summaryOf(totals)?.successRate).to.equal(0.9999);
    addCount(totals, { result: "success", bucket: 0, calls: 10_000, chargedMicros: 0n });
    expect(summaryOf(totals)?.successRate).to.equal(0.9999);
  });
});

describeEachEngine("the quality roll-up (QualityRecorder on QualityStore)", (engine) => {
  let db: Database;
  let nowMs: number;
  let recorder: QualityRecorder;
  beforeEach(async () => {
    db = await engine.open();
    nowMs = NOON_MS + 30 * 60_000;
    recorder = new QualityRecorder(new QualityStore(db), { now: () => nowMs, flushMs: 3_600_000 });
  });
  afterEach(async () => {
    await recorder.close();
  });

  it("adds counts from two recorders (two replicas) into the same hourly rows", async () => {
    const other = new QualityRecorder(new QualityStore(db), { now: () => nowMs, flushMs: 3_600_000 });
    for (let i = 0; i < 15; i++) recorder.count({ skillId: "s1", result: "success", latencyMs: 40, chargedMicros: 1_000n });
    for (let i = 0; i < 10; i++) other.count({ skillId: "s1", result: "success", latencyMs: 40, chargedMicros: 1_000n });
    other.count({ skillId: "s1", result: "skill_error", latencyMs: 3, chargedMicros: 0n });
    await Promise.all([recorder.flush(), other.flush()]);
    await other.close();
    const rows = await db.all<{ result: string; calls: bigint; charged_micros: bigint }>(
      "SELECT result, calls, charged_micros FROM skill_quality WHERE skill_id = 's1' ORDER BY result",
    );
    expect(rows.map((r) => [r.result, Number(r.calls), r.charged_micros])).to.deep.equal([
      ["skill_error", 1, 0n],
      ["success", 25, 25_000n],
    ]);
    expect((await recorder.summaries()).get("s1")).to.deep.equal({ calls: 26, successRate: 0.9615, p50Ms: 40, p95Ms: 40 });
  });

  it("counts the last 168 hours in the public figures, and leaves older hours to the seller's stats", async () => {
    const atMs = (hoursAgo: number) => NOON_MS - hoursAgo * HOUR_MS;
    for (let i = 0; i < 20; i++) recorder.count({ skillId: "s1", result: "success", latencyMs: 10, chargedMicros: 0n }, atMs(167));
    for (let i = 0; i < 5; i++) recorder.count({ skillId: "s1", result: "skill_unreachable", latencyMs: 1, chargedMicros: 0n }, atMs(168));
    const figures = await recorder.summaries();
    expect(figures.get("s1")).to.deep.equal({ calls: 20, successRate: 1, p50Ms: 10, p95Ms: 10 });
    const stats = await recorder.stats("s1", 8);
    expect(stats.totals.calls).to.equal(25);
    expect(stats.days).to.have.length(8);
    expect(stats.days[7].dayMs).to.equal(Math.floor(nowMs / DAY_MS) * DAY_MS);
  });

  it("reuses the public figures until they are refreshed, and reads the flushed counts then", async () => {
    for (let i = 0; i < 20; i++) recorder.count({ skillId: "s1", result: "success", latencyMs: 10, chargedMicros: 0n });
    expect((await recorder.summaries()).get("s1")?.calls).to.equal(20);
    recorder.count({ skillId: "s1", result: "success", latencyMs: 10, chargedMicros: 0n });
    expect((await recorder.summaries()).get("s1")?.calls).to.equal(20);
    recorder.refresh();
    expect((await recorder.summaries()).get("s1")?.calls).to.equal(21);
  });

  it("keeps showing the figures read last while the database does not answer", async () => {
    for (let i = 0; i < 20; i++) recorder.count({ skillId: "s1", result: "success", latencyMs: 10, chargedMicros: 0n });
    const figures = await recorder.summaries();
    const store = new QualityStore(db);
    store.sinceBySkill = () => Promise.reject(new Error("the database did not answer"));
    const logged: string[] = [];
    const failing = new QualityRecorder(store, { now: () => nowMs, flushMs: 3_600_000, log: (message) => logged.push(message) });
    try {
      expect(await failing.summaries()).to.deep.equal(new Map());
      expect(logged).to.have.length(1);
      // Another recorder that had read figures before keeps them.
      recorder.refresh();
      (recorder as unknown as { store: QualityStore }).store.sinceBySkill = store.sinceBySkill;
      expect(await recorder.summaries()).to.deep.equal(figures);
    } finally {
      await failing.close();
    }
  });

  it("prunes the hours past the retention once an hour", async () => {
    recorder.count({ skillId: "s1", result: "success", latencyMs: 10, chargedMicros: 0n }, NOON_MS - 40 * DAY_MS);
    recorder.count({ skillId: "s1", result: "success", latencyMs: 10, chargedMicros: 0n }, NOON_MS - 2 * DAY_MS);
    await recorder.flush();
    expect(Number(await db.value<bigint>("SELECT COUNT(*) FROM skill_quality"))).to.equal(1);
  });
});
