import { performance } from "node:perf_hooks";
import { expect } from "chai";
import { QUALITY_MIN_CALLS } from "../../server/gateway/quality";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, signedIn } from "../helpers/session";

/**
 * Quality in plain view (issue 27 §3): a known mix of calls to a skill whose backend answers after the delay each call
 * asks for gives exactly the figures the roll-up's rules say, in GET /v1/skills, GET /v1/skills/:id and the seller's
 * GET /v1/seller/skills/:id/stats, and the same figures after a restart.
 *
 * The gateway measures a call from performance.now() when it arrives to performance.now() once its line is committed.
 * While the mix is sent, that clock stands still except when the backend "waits" (TestBackend.wait): each call's
 * latency is then exactly the delay it asked for, whatever else the machine is doing, and its bucket is known.
 */

const INPUT_SCHEMA = {
  type: "object",
  properties: { delay_ms: { type: "integer" }, status: { type: "integer" }, text: { type: "string" } },
};
/** The skill promises a `text`: an answer without one is the seller's failure (skill_bad_output). */
const OUTPUT_SCHEMA = { type: "object", required: ["text"] };

/** The mix: what each call asks of the backend, how many of them, and what it ends as. */
const MIX: { input: Record<string, unknown>; times: number; status: number }[] = [
  // 16 successes in 340 ms (the bucket above 320 ms, at most 400), 4 in 1,100 ms (above 1,000, at most 1,250).
  { input: { delay_ms: 340, text: "ok" }, times: 16, status: 200 },
  { input: { delay_ms: 1100, text: "ok" }, times: 4, status: 200 },
  // The seller's failures, in 90 ms (at most 100): two 500s (skill_error), one answer without its text (skill_bad_output).
  { input: { delay_ms: 90, status: 500, text: "x" }, times: 2, status: 502 },
  { input: { delay_ms: 90 }, times: 1, status: 502 },
  // The buyer's: input the schema refuses (invalid_input), input the backend refuses (skill_rejected_input).
  { input: { delay_ms: "soon" }, times: 3, status: 400 },
  { input: { delay_ms: 1, status: 422 }, times: 2, status: 400 },
];

/**
 * What the mix must give. Rated (successes and the seller's failures): 16 + 4 + 2 + 1 = 23, 20 of them successes:
 * 20/23 = 0.869565..., rounded down to 0.8695. By nearest rank, p50 is the 12th fastest of 23 (3 within 100 ms, then
 * 16 within 400: the 12th is in the 400 ms bucket) and p95 the ⌈21.85⌉ = 22nd (past those 19: the 1,250 ms bucket).
 */
const EXPECTED_QUALITY = { calls_7d: 23, success_rate_7d: 0.8695, p50_ms_7d: 400, p95_ms_7d: 1250 };

/** Stops performance.now() but for what `advance` adds; returns that advance, and the real clock back. */
function virtualClock(): { advance: (ms: number) => Promise<void>; restore: () => void } {
  const real = performance.now;
  const startMs = real.call(performance);
  let addedMs = 0;
  performance.now = () => startMs + addedMs;
  return {
    advance: async (ms) => {
      addedMs += ms;
    },
    restore: () => {
      performance.now = real;
    },
  };
}

describeEachEngine("skill quality from a known mix of calls", (engine) => {
  let stack: TestStack;
  let seller: TestSession;
  beforeEach(async () => {
    stack = await startStack({ engine: engine.name });
    seller = await signedIn(stack, "seller@example.com");
    await stack.addSkill("timed", "/delay", {
      sellerAccountId: seller.accountId,
      inputSchema: INPUT_SCHEMA,
      outputSchema: OUTPUT_SCHEMA,
      timeoutMs: 5_000,
    });
  });
  afterEach(async () => {
    await stack.close();
  });

  /**
   * Sends the mix, one call after another (calls in parallel would wait for each other on the buyer's balance, and
   * their latencies with them), checking each ends as it should; then a call of a buyer without the money.
   */
  const sendMix = async () => {
    const clock = virtualClock();
    const wait = stack.backend.wait;
    stack.backend.wait = clock.advance;
    try {
      for (const { input, times, status } of MIX) {
        for (let i = 0; i < times; i++) {
          const res = await stack.post("/v1/call", { skill_id: "timed", input });
          expect(res.status, JSON.stringify({ input, body: res.body })).to.equal(status);
        }
      }
      const poor = await stack.addBuyer("0");
      const refused = await stack.post("/v1/call", { skill_id: "timed", input: { delay_ms: 1, text: "x" } }, { key: poor.key });
      expect(refused.body.code).to.equal("insufficient_balance");
    } finally {
      clock.restore();
      stack.backend.wait = wait;
    }
  };

  it("says null until the skill has enough calls to say, and its figures from the threshold on", async () => {
    for (let i = 0; i < QUALITY_MIN_CALLS - 1; i++) {
      expect((await stack.post("/v1/call", { skill_id: "timed", input: { delay_ms: 0, text: "ok" } })).status).to.equal(200);
    }
    stack.gw.quality.refresh();
    expect((await stack.get("/v1/skills/timed", null)).body.data.quality).to.equal(null);
    expect((await stack.post("/v1/call", { skill_id: "timed", input: { delay_ms: 0, text: "ok" } })).status).to.equal(200);
    stack.gw.quality.refresh();
    expect((await stack.get("/v1/skills/timed", null)).body.data.quality).to.include({ calls_7d: QUALITY_MIN_CALLS, success_rate_7d: 1 });
  });

  it("gives the figures the mix makes (success rate over the skill's own calls, p50 and p95 from the buckets), and again after a restart", async () => {
    await sendMix();
    stack.gw.quality.refresh();
    const one = await stack.get("/v1/skills/timed", null);
    expect(one.status).to.equal(200);
    expect(one.body.data.quality).to.deep.equal(EXPECTED_QUALITY);
    const list = await stack.get("/v1/skills", null);
    const listed = list.body.data.find((s: { slug: string }) => s.slug === "timed");
    expect(listed.quality).to.deep.equal(EXPECTED_QUALITY);
    // A skill nobody called has nothing to say.
    expect(list.body.data.find((s: { slug: string }) => s.slug === "fail").quality).to.equal(null);

    const stats = await seller.request("GET", "/v1/seller/skills/timed/stats?days=3");
    expect(stats.status).to.equal(200);
    const today = new Date().toISOString().slice(0, 10);
    const totals = {
      calls: 29,
      successes: 20,
      seller_failures: 3,
      buyer_failures: 6,
      gateway_failures: 0,
      success_rate: 0.8695,
      p50_ms: 400,
      p95_ms: 1250,
      p99_ms: 1250,
      revenue: 0.02,
      revenue_base_units: "20000",
    };
    expect(stats.body.data).to.deep.include({ slug: "timed", to: today, quality: EXPECTED_QUALITY, totals });
    expect(stats.body.data.days).to.have.length(3);
    expect(stats.body.data.days[2]).to.deep.equal({ date: today, ...totals });
    expect(stats.body.data.days[0]).to.include({ calls: 0, success_rate: null, p50_ms: null, revenue: 0 });
    expect(stats.body.data.failures).to.deep.equal([
      { code: "invalid_input", fault: "buyer", calls: 3 },
      { code: "skill_error", fault: "seller", calls: 2 },
      { code: "skill_rejected_input", fault: "buyer", calls: 2 },
      { code: "insufficient_balance", fault: "buyer", calls: 1 },
      { code: "skill_bad_output", fault: "seller", calls: 1 },
    ]);
    expect(stats.body.data).to.include({ output_contract_failures: 1, charge_header_failures: 0 });

    // The roll-up is in the database: a restarted gateway reads the same figures.
    const { dbPath, databaseUrl } = stack;
    await stack.gw.close();
    const restarted = await startStack({ engine: engine.name, dbPath, config: engine.name === "postgres" ? { databaseUrl } : {} });
    try {
      expect((await restarted.get("/v1/skills/timed", null)).body.data.quality).to.deep.equal(EXPECTED_QUALITY);
      const again = await restarted.get("/v1/skills", null);
      expect(again.body.data.find((s: { slug: string }) => s.slug === "timed").quality).to.deep.equal(EXPECTED_QUALITY);
    } finally {
      await restarted.close();
      await stack.backend.close();
      stack = { close: async () => {} } as TestStack;
    }
  });

  it("shows a skill's stats to its own seller only: 404 to another seller, 401 without a session", async () => {
    const other = await signedIn(stack, "other@example.com");
    const refused = await other.request("GET", "/v1/seller/skills/timed/stats");
    expect(refused.status).to.equal(404);
    expect(refused.body).to.include({ success: false, code: "not_found" });
    expect((await other.request("GET", "/v1/seller/skills/no-such-skill/stats")).status).to.equal(404);
    expect((await stack.get("/v1/seller/skills/timed/stats", null)).status).to.equal(401);
    // The buyer's API key is not a seller's session.
    expect((await stack.get("/v1/seller/skills/timed/stats")).status).to.equal(401);
    const bad = await seller.request("GET", "/v1/seller/skills/timed/stats?days=31");
    expect(bad.status).to.equal(400);
    expect(bad.body.code).to.equal("invalid_request");
  });
});
