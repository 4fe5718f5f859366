import { expect } from "chai";
import { createPublicClient, http } from "viem";
import { RetryLoop } from "../../server/chain/retry-loop";
import { checkReadiness } from "../../server/ops/readiness";
import { startStack } from "../helpers/gateway";
import { describeEachEngine } from "../helpers/engines";
import { useRedisServer } from "../helpers/redis";

/** A real retry loop whose steps do what `step` says; started, and given a moment to run. */
async function loopThat(step: () => Promise<void>, isFatal = (_e: unknown) => true): Promise<RetryLoop<void>> {
  const loop = new RetryLoop<void>({ step, isFatal, onRetry: () => {}, onFatal: () => {} });
  loop.start({ intervalMs: 10_000, retryFirstMs: 10_000, retryMaxMs: 10_000 });
  await new Promise((resolve) => setTimeout(resolve, 20));
  return loop;
}

describeEachEngine("readiness (GET /readyz)", (engine) => {
  /** A fresh database of the suite's engine, closed after the test. */
  const openDb = () => engine.open();
  const loops: RetryLoop<void>[] = [];
  afterEach(async () => {
    await Promise.all(loops.splice(0).map((loop) => loop.stop()));
  });
  const track = (loop: RetryLoop<void>) => {
    loops.push(loop);
    return loop;
  };

  it("is ready when the ledger commits and the loops have stepped lately", async () => {
    const indexer = track(await loopThat(async () => {}));
    const result = await checkReadiness({ database: await openDb(), indexer, settler: indexer, maxLagMs: 60_000 });
    expect(result.ready).to.equal(true);
    expect(result.checks.ledger).to.deep.equal({ ok: true, detail: "commits" });
  });

  it("is not ready when the settler has halted, and names why", async () => {
    const settler = track(
      await loopThat(async () => {
        throw new Error("on-chain totals differ from the ledger's");
      }),
    );
    const logged: string[] = [];
    const result = await checkReadiness({
      database: await openDb(),
      settler,
      maxLagMs: 60_000,
      log: (message) => logged.push(message),
    });
    expect(result.ready).to.equal(false);
    // The reason goes to the log, not to whoever asked.
    expect(logged).to.deep.equal(["readiness: the settler has halted: on-chain totals differ from the ledger's"]);
    expect(result.checks.settler).to.deep.equal({ ok: false, detail: "settler halted (see the gateway's log)" });
  });

  it("is not ready when the indexer lags beyond the bound (every poll failing)", async () => {
    const indexer = track(
      await loopThat(
        async () => {
          throw new Error("RPC timeout");
        },
        () => false,
      ),
    );
    const later = Date.now() + 120_000;
    const result = await checkReadiness({ database: await openDb(), indexer, maxLagMs: 60_000, now: () => later });
    expect(result.ready).to.equal(false);
    expect(result.checks.indexer.detail).to.match(
      /^deposit indexer lags: no successful step for 12\d s \(1 failures in a row; bound 60 s\)$/,
    );
  });

  it("treats a loop never started in this process as no fault", async () => {
    const idle = new RetryLoop<void>({ step: async () => {}, isFatal: () => false, onRetry: () => {}, onFatal: () => {} });
    const result = await checkReadiness({ database: await openDb(), settler: idle, maxLagMs: 60_000 });
    expect(result.checks.settler).to.deep.equal({ ok: true, detail: "not started in this process" });
  });

  it("treats a loop stopped on purpose (a replica that lost the settlement lease) as no fault", async () => {
    const demoted = await loopThat(async () => {});
    await demoted.stop();
    const result = await checkReadiness({ database: await openDb(), indexer: demoted, settler: demoted, maxLagMs: 60_000 });
    expect(result.ready).to.equal(true);
    expect(result.checks.settler).to.deep.equal({ ok: true, detail: "stopped: not run by this process now" });
  });

  it("is not ready when the ledger cannot commit", async () => {
    const database = await openDb();
    await database.close();
    const logged: string[] = [];
    const result = await checkReadiness({ database, maxLagMs: 60_000, log: (message) => logged.push(message) });
    expect(result.ready).to.equal(false);
    expect(result.checks.ledger.ok).to.equal(false);
    expect(result.checks.ledger).to.deep.equal({ ok: false, detail: "cannot commit" });
    expect(logged).to.deep.equal(["readiness: the ledger cannot commit"]);
  });

  it("is not ready when the chain does not answer", async () => {
    const publicClient = createPublicClient({ transport: http("http://127.0.0.1:1", { retryCount: 0 }) });
    const result = await checkReadiness({ database: await openDb(), publicClient, maxLagMs: 60_000 });
    expect(result.ready).to.equal(false);
    expect(result.checks.chain).to.deep.equal({ ok: false, detail: "unreachable (no block number within 3000 ms)" });
  });

  it("answers 200 on /readyz and keeps /healthz as liveness, in the spec's envelope", async () => {
    const stack = await startStack({ engine: engine.name });
    try {
      const ready = await stack.get("/readyz", null);
      expect(ready.status).to.equal(200);
      expect(ready.body).to.deep.equal({ success: true, data: { status: "ready", checks: { ledger: { ok: true, detail: "commits" } } } });
      expect((await stack.get("/healthz", null)).body).to.deep.equal({ success: true, data: { status: "ok" } });
    } finally {
      await stack.close();
    }
  });

  it("answers 503 not_ready with the reason when the chain is unreachable", async () => {
    const publicClient = createPublicClient({ transport: http("http://127.0.0.1:1", { retryCount: 0 }) }) as never;
    const stack = await startStack({
      engine: engine.name,
      gateway: { chain: { publicClient, escrowAddress: "0x0000000000000000000000000000000000000001", chainId: 8453, deployBlock: 0n } },
    });
    try {
      const res = await stack.get("/readyz", null);
      expect(res.status).to.equal(503);
      expect(res.body).to.include({ success: false, code: "not_ready" });
      expect(res.body.error).to.equal("Not ready: chain: unreachable (no block number within 3000 ms)");
      expect(res.body.checks.ledger).to.deep.equal({ ok: true, detail: "commits" });
    } finally {
      await stack.close();
    }
  });

  it("is ready when Redis answers, and names the check", async () => {
    let pings = 0;
    const redis = { ping: async () => (++pings, "PONG") };
    const result = await checkReadiness({ database: await openDb(), redis, maxLagMs: 60_000 });
    expect(result.ready).to.equal(true);
    expect(pings).to.equal(1);
    expect(result.checks).to.deep.equal({ ledger: { ok: true, detail: "commits" }, redis: { ok: true, detail: "answers" } });
  });

  it("is not ready when Redis refuses, and logs why without telling the asker", async () => {
    const redis = { ping: () => Promise.reject(new Error("NOAUTH Authentication required")) };
    const logged: string[] = [];
    const result = await checkReadiness({ database: await openDb(), redis, maxLagMs: 60_000, log: (message) => logged.push(message) });
    expect(result.ready).to.equal(false);
    expect(result.checks.redis).to.deep.equal({ ok: false, detail: "unreachable" });
    expect(result.checks.ledger).to.deep.equal({ ok: true, detail: "commits" });
    expect(logged).to.deep.equal(["readiness: Redis does not answer"]);
  });

  it("is not ready when Redis does not answer in time", async () => {
    const redis = { ping: () => new Promise<never>(() => {}) };
    const started = Date.now();
    const result = await checkReadiness({ database: await openDb(), redis, maxLagMs: 60_000, chainTimeoutMs: 100 });
    expect(Date.now() - started).to.be.below(2_000);
    expect(result.ready).to.equal(false);
    expect(result.checks.redis).to.deep.equal({ ok: false, detail: "unreachable" });
  });

  it("leaves Redis out of the checks when the gateway uses none", async () => {
    const result = await checkReadiness({ database: await openDb(), maxLagMs: 60_000 });
    expect(Object.keys(result.checks)).to.deep.equal(["ledger"]);
  });

  describe("with REDIS_URL", () => {
    const redis = useRedisServer();

    it("answers 200 with a redis check while Redis answers, and 503 once it is gone, /healthz still 200", async function () {
      this.timeout(30_000);
      const stack = await startStack({ engine: engine.name, config: { redisUrl: redis.server.url } });
      try {
        const ready = await stack.get("/readyz", null);
        expect(ready.status).to.equal(200);
        expect(ready.body.data.checks).to.deep.equal({ ledger: { ok: true, detail: "commits" }, redis: { ok: true, detail: "answers" } });
        await redis.server.stop();
        // Past the one-second cache of the last answer.
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        const gone = await stack.get("/readyz", null);
        expect(gone.status, JSON.stringify(gone.body)).to.equal(503);
        expect(gone.body).to.include({ success: false, code: "not_ready" });
        expect(gone.body.error).to.equal("Not ready: redis: unreachable");
        expect(gone.body.checks.ledger).to.deep.equal({ ok: true, detail: "commits" });
        // Liveness stays up: the process answers, whatever Redis does.
        expect((await stack.get("/healthz", null)).body).to.deep.equal({ success: true, data: { status: "ok" } });
      } finally {
        await stack.close();
      }
    });
  });
});
