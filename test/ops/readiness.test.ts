import { expect } from "chai";
import { createPublicClient, http } from "viem";
import { RetryLoop } from "../../server/chain/retry-loop";
import { checkReadiness } from "../../server/ops/readiness";
import { makeLedger } from "../helpers/ledger";
import { startStack } from "../helpers/gateway";

/** A real retry loop whose steps do what `step` says; started, and given a moment to run. */
async function loopThat(step: () => Promise<void>, isFatal = (_e: unknown) => true): Promise<RetryLoop<void>> {
  const loop = new RetryLoop<void>({ step, isFatal, onRetry: () => {}, onFatal: () => {} });
  loop.start({ intervalMs: 10_000, retryFirstMs: 10_000, retryMaxMs: 10_000 });
  await new Promise((resolve) => setTimeout(resolve, 20));
  return loop;
}

describe("readiness (GET /readyz)", () => {
  const loops: RetryLoop<void>[] = [];
  afterEach(async () => {
    await Promise.all(loops.splice(0).map((loop) => loop.stop()));
  });
  const track = (loop: RetryLoop<void>) => {
    loops.push(loop);
    return loop;
  };

  it("is ready when the ledger commits and the loops have stepped lately", async () => {
    const { ledger } = makeLedger();
    const indexer = track(await loopThat(async () => {}));
    const result = await checkReadiness({ commit: ledger.commit, indexer, settler: indexer, maxLagMs: 60_000 });
    expect(result.ready).to.equal(true);
    expect(result.checks.ledger).to.deep.equal({ ok: true, detail: "commits" });
  });

  it("is not ready when the settler has halted, and names why", async () => {
    const { ledger } = makeLedger();
    const settler = track(
      await loopThat(async () => {
        throw new Error("on-chain totals differ from the ledger's");
      }),
    );
    const logged: string[] = [];
    const result = await checkReadiness({ commit: ledger.commit, settler, maxLagMs: 60_000, log: (message) => logged.push(message) });
    expect(result.ready).to.equal(false);
    // The reason goes to the log, not to whoever asked.
    expect(logged).to.deep.equal(["readiness: the settler has halted: on-chain totals differ from the ledger's"]);
    expect(result.checks.settler).to.deep.equal({ ok: false, detail: "settler halted (see the gateway's log)" });
  });

  it("is not ready when the indexer lags beyond the bound (every poll failing)", async () => {
    const { ledger } = makeLedger();
    const indexer = track(
      await loopThat(
        async () => {
          throw new Error("RPC timeout");
        },
        () => false,
      ),
    );
    const later = Date.now() + 120_000;
    const result = await checkReadiness({ commit: ledger.commit, indexer, maxLagMs: 60_000, now: () => later });
    expect(result.ready).to.equal(false);
    expect(result.checks.indexer.detail).to.match(
      /^deposit indexer lags: no successful step for 12\d s \(1 failures in a row; bound 60 s\)$/,
    );
  });

  it("treats a loop never started in this process as no fault", async () => {
    const { ledger } = makeLedger();
    const idle = new RetryLoop<void>({ step: async () => {}, isFatal: () => false, onRetry: () => {}, onFatal: () => {} });
    const result = await checkReadiness({ commit: ledger.commit, settler: idle, maxLagMs: 60_000 });
    expect(result.checks.settler).to.deep.equal({ ok: true, detail: "not started in this process" });
  });

  it("is not ready when the ledger cannot commit", async () => {
    const { ledger, db } = makeLedger();
    db.close();
    const result = await checkReadiness({ commit: ledger.commit, maxLagMs: 60_000 });
    expect(result.ready).to.equal(false);
    expect(result.checks.ledger.ok).to.equal(false);
    expect(result.checks.ledger).to.deep.equal({ ok: false, detail: "cannot commit" });
  });

  it("is not ready when the chain does not answer", async () => {
    const { ledger } = makeLedger();
    const publicClient = createPublicClient({ transport: http("http://127.0.0.1:1", { retryCount: 0 }) });
    const result = await checkReadiness({ commit: ledger.commit, publicClient, maxLagMs: 60_000 });
    expect(result.ready).to.equal(false);
    expect(result.checks.chain).to.deep.equal({ ok: false, detail: "unreachable (no block number within 3000 ms)" });
  });

  it("answers 200 on /readyz and keeps /healthz as liveness, in the spec's envelope", async () => {
    const stack = await startStack();
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
});
