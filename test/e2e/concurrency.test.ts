import { expect } from "chai";
import { assertBalanced } from "../../server/ledger/invariants";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";

describeEachEngine("concurrent calls against a balance that runs out", (engine) => {
  let stack: TestStack;
  afterEach(async () => {
    await stack?.close();
  });

  /**
   * The buyer's available and held balances read in one statement, so both come from the same moment (two
   * reads could straddle a hold and see its amount twice).
   */
  const buyerBalances = async () => {
    const rows = await stack.gw.db.all<{ bucket: string; balance: bigint }>(
      `SELECT bucket, balance FROM ${stack.gw.db.dialect.balances} WHERE account_id = ? AND bucket IN ('available', 'held')`,
      [stack.buyerId],
    );
    const of = (bucket: string) => rows.find((r) => r.bucket === bucket)?.balance ?? 0n;
    return { availableMicros: of("available"), heldMicros: of("held") };
  };

  it("lets exactly as many calls through as the balance covers, and never goes below zero", async () => {
    stack = await startStack({ engine: engine.name, buyerUsd: "0.05", config: { rateLimitPerMin: 10_000 } });
    const startMicros = await stack.available();
    const negatives: bigint[] = [];
    let watching = true;
    const watcher = (async () => {
      let reads = 0;
      while (watching) {
        const { availableMicros, heldMicros } = await buyerBalances();
        reads++;
        if (availableMicros < 0n || heldMicros < 0n || availableMicros + heldMicros > startMicros) negatives.push(availableMicros);
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      return reads;
    })();

    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => stack.post("/v1/call", { skill_id: "echo", input: { i } })));
    watching = false;
    expect(await watcher).to.be.greaterThan(0);

    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 402);
    expect(ok).to.have.length(50);
    expect(refused).to.have.length(150);
    for (const r of refused) expect(r.body.code).to.equal("insufficient_balance");
    expect(negatives).to.deep.equal([]);
    expect(await stack.gw.ledger.balance(stack.buyerId)).to.deep.equal({ availableMicros: 0n, heldMicros: 0n });
    expect(await stack.earned()).to.equal(45_000n);
    expect(await stack.fees()).to.equal(5_000n);
    expect(stack.backend.hits.get("/echo")).to.equal(50);
    await assertBalanced(stack.gw.db);
  });

  it("lets exactly as many calls through as the key's spending limit covers, the balance untouched beyond them", async () => {
    // The spending period's clock stands still, so the run cannot straddle a midnight.
    const nowMs = Date.parse("2026-11-22T12:00:00Z");
    stack = await startStack({ engine: engine.name, buyerUsd: "10", config: { rateLimitPerMin: 10_000 }, gateway: { now: () => nowMs } });
    // 0.05 USD a day: fifty calls of echo at 0.001.
    const limited = await stack.gw.keys.create(stack.buyerId, { spendLimit: { limitMicros: 50_000n, period: "day" }, nowMs });
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => stack.post("/v1/call", { skill_id: "echo", input: { i } }, { key: limited.key })),
    );
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 402);
    expect(ok).to.have.length(50);
    expect(refused).to.have.length(150);
    for (const r of refused) {
      expect(r.body.code).to.equal("key_spend_limit_reached");
      expect(r.body.error).to.match(
        /^This key's spending limit of \$0\.05 per day is reached \(\$0\.05 spent, this call costs \$0\.001\); it resets at 2026-11-23T00:00:00Z\.$/,
      );
    }
    expect(stack.backend.hits.get("/echo")).to.equal(50);
    expect(await stack.gw.ledger.balance(stack.buyerId)).to.deep.equal({ availableMicros: 10_000_000n - 50_000n, heldMicros: 0n });
    expect(await stack.earned()).to.equal(45_000n);
    expect(await stack.fees()).to.equal(5_000n);
    expect((await stack.gw.keys.spendLimits([limited.record.id], nowMs)).get(limited.record.id)?.spentMicros).to.equal(50_000n);
    // The account's other key is not held back by this one's limit.
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status).to.equal(200);
    await assertBalanced(stack.gw.db);
  });

  it("keeps the books exact over many calls at mixed prices, some failing", async () => {
    stack = await startStack({ engine: engine.name, buyerUsd: "100", config: { rateLimitPerMin: 10_000 } });
    const prices = { a: 1n, b: 7n, c: 12_345n, d: 499_999n };
    for (const [slug, price] of Object.entries(prices)) await stack.addSkill(slug, "/echo", { priceMicros: price });
    const plan = Array.from({ length: 400 }, (_, i) => ["a", "b", "c", "d", "fail"][(i * 7) % 5]);
    const results = await Promise.all(plan.map((slug) => stack.post("/v1/call", { skill_id: slug, input: {} })));

    let charged = 0n;
    let fees = 0n;
    plan.forEach((slug, i) => {
      if (slug === "fail") return expect(results[i].status).to.equal(502);
      expect(results[i].status).to.equal(200);
      const price = prices[slug as keyof typeof prices];
      charged += price;
      fees += price / 10n;
    });
    expect(await stack.available()).to.equal(100_000_000n - charged);
    expect(await stack.fees()).to.equal(fees);
    expect(await stack.earned()).to.equal(charged - fees);
    await assertBalanced(stack.gw.db);
  });

  it("charges the fee on top in on_top mode: the seller gets the price, the caller pays 110%", async () => {
    stack = await startStack({ engine: engine.name, config: { feeMode: "on_top", rateLimitPerMin: 10_000 } });
    const results = await Promise.all(Array.from({ length: 30 }, () => stack.post("/v1/call", { skill_id: "echo", input: {} })));
    for (const r of results) expect(r.body.metadata.price_paid).to.equal(0.0011);
    expect(await stack.available()).to.equal(10_000_000n - 30n * 1_100n);
    expect(await stack.earned()).to.equal(30n * 1_000n);
    expect(await stack.fees()).to.equal(30n * 100n);
    await assertBalanced(stack.gw.db);
  });
});
