import { expect } from "chai";
import { RetryLoop, retryDelayMs, type RetryLoopParameters } from "../../server/chain/retry-loop";

/** Long enough that a test only passes if something other than the timer ends the wait. */
const FOREVER_MS = 60 * 60 * 1000;

class FatalTestError extends Error {}

/**
 * A step driven by a script: call n (from 1) runs `outcome(n)`. Tests wait for "the loop has called the step n
 * times" rather than for a duration, so nothing depends on how fast the machine is.
 */
class ScriptedStep {
  calls = 0;
  private waiters: { calls: number; resolve: () => void }[] = [];

  constructor(private readonly outcome: (call: number) => number | Promise<number> = (call) => call) {}

  readonly run = async (): Promise<number> => {
    this.calls++;
    for (const waiter of this.waiters.filter((w) => w.calls <= this.calls)) waiter.resolve();
    this.waiters = this.waiters.filter((w) => w.calls > this.calls);
    return this.outcome(this.calls);
  };

  /** Resolves once the step has been called at least `calls` times. */
  reached(calls: number): Promise<void> {
    if (this.calls >= calls) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ calls, resolve }));
  }
}

type Recorded = { retries: { failures: number; delayMs: number; error: unknown }[]; fatal: unknown[] };

function buildLoop(
  step: ScriptedStep,
  overrides: Partial<RetryLoopParameters<number>> = {},
): { loop: RetryLoop<number>; recorded: Recorded } {
  const recorded: Recorded = { retries: [], fatal: [] };
  const loop = new RetryLoop<number>({
    step: step.run,
    isFatal: (error) => error instanceof FatalTestError,
    onRetry: (error, failures, delayMs) => recorded.retries.push({ failures, delayMs, error }),
    onFatal: (error) => recorded.fatal.push(error),
    ...overrides,
  });
  return { loop, recorded };
}

/** Lets pending timers of 0-1 ms and promise callbacks run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 5));

describe("retryDelayMs", () => {
  const table: [failures: number, parameters: { firstMs: number; maxMs: number; minMs?: number }, expectedMs: number][] = [
    [1, { firstMs: 1_000, maxMs: 60_000 }, 1_000],
    [2, { firstMs: 1_000, maxMs: 60_000 }, 2_000],
    [6, { firstMs: 1_000, maxMs: 60_000 }, 32_000],
    [7, { firstMs: 1_000, maxMs: 60_000 }, 60_000],
    [2_000, { firstMs: 1_000, maxMs: 60_000 }, 60_000],
    // The indexer's shape: first retry at twice the interval, never below the interval.
    [1, { firstMs: 2 * 500, maxMs: 30_000, minMs: 500 }, 1_000],
    [1, { firstMs: 2 * 500, maxMs: 100, minMs: 500 }, 500],
  ];
  for (const [failures, parameters, expectedMs] of table) {
    it(`waits ${expectedMs} ms after ${failures} failure(s) with ${JSON.stringify(parameters)}`, () => {
      expect(retryDelayMs(failures, parameters)).to.equal(expectedMs);
    });
  }
});

describe("RetryLoop", () => {
  it("runs the step again after each interval until stopped, and not after", async () => {
    const step = new ScriptedStep();
    const { loop } = buildLoop(step);
    loop.start({ intervalMs: 1, retryFirstMs: 1, retryMaxMs: 1 });
    expect(loop.running).to.equal(true);
    await step.reached(5);
    await loop.stop();
    const calls = step.calls;
    await settle();
    expect(step.calls).to.equal(calls);
    expect(loop.running).to.equal(false);
    expect(loop.fatalError).to.equal(undefined);
  });

  it("lets the step in progress finish before stop resolves", async () => {
    let finish!: () => void;
    let finished = false;
    const step = new ScriptedStep(
      () =>
        new Promise<number>((resolve) => {
          finish = () => {
            finished = true;
            resolve(0);
          };
        }),
    );
    const { loop } = buildLoop(step);
    loop.start({ intervalMs: FOREVER_MS, retryFirstMs: 1, retryMaxMs: 1 });
    await step.reached(1);
    const stopped = loop.stop();
    await settle();
    expect(loop.running).to.equal(true);
    finish();
    await stopped;
    expect(finished).to.equal(true);
    expect(step.calls).to.equal(1);
  });

  it("ends on a fatal error, remembers it and tells the owner once", async () => {
    const fatal = new FatalTestError("cannot go on");
    const step = new ScriptedStep((call) => {
      if (call === 3) throw fatal;
      return call;
    });
    const { loop, recorded } = buildLoop(step);
    loop.start({ intervalMs: 1, retryFirstMs: 1, retryMaxMs: 1 });
    await loop.whenStopped();
    await settle();
    expect(step.calls).to.equal(3);
    expect(loop.running).to.equal(false);
    expect(loop.fatalError).to.equal(fatal);
    expect(recorded.fatal).to.deep.equal([fatal]);
    expect(recorded.retries).to.deep.equal([]);
  });

  it("doubles the wait per failure in a row, up to the cap, and starts over after a success", async () => {
    const outcomes = ["fail", "fail", "fail", "fail", "ok", "fail", "fatal"];
    const step = new ScriptedStep((call) => {
      const outcome = outcomes[call - 1];
      if (outcome === "fail") throw new Error(`failure ${call}`);
      if (outcome === "fatal") throw new FatalTestError("done");
      return call;
    });
    const { loop, recorded } = buildLoop(step);
    loop.start({ intervalMs: 1, retryFirstMs: 1, retryMaxMs: 4 });
    await loop.whenStopped();
    expect(recorded.retries.map(({ failures, delayMs }) => [failures, delayMs])).to.deep.equal([
      [1, 1],
      [2, 2],
      [3, 4],
      [4, 4],
      [1, 1],
    ]);
    expect((recorded.retries[0].error as Error).message).to.equal("failure 1");
  });

  it("never waits less than retryMinMs after a failure", async () => {
    const step = new ScriptedStep((call) => {
      if (call < 3) throw new Error("down");
      throw new FatalTestError("done");
    });
    const { loop, recorded } = buildLoop(step);
    loop.start({ intervalMs: 3, retryFirstMs: 6, retryMaxMs: 1, retryMinMs: 3 });
    await loop.whenStopped();
    expect(recorded.retries.map((r) => r.delayMs)).to.deep.equal([3, 3]);
  });

  it("runs again at once when the owner says more work waits", async () => {
    const step = new ScriptedStep();
    const { loop } = buildLoop(step, { runAgainAtOnce: (result) => result < 4 });
    loop.start({ intervalMs: FOREVER_MS, retryFirstMs: 1, retryMaxMs: 1 });
    await step.reached(4);
    await settle();
    expect(step.calls).to.equal(4);
    await loop.stop();
  });

  it("wakes early from an interval when nudged", async () => {
    const step = new ScriptedStep();
    const { loop } = buildLoop(step);
    loop.start({ intervalMs: FOREVER_MS, retryFirstMs: 1, retryMaxMs: 1 });
    await step.reached(1);
    await settle();
    expect(step.calls).to.equal(1);
    loop.nudge();
    await step.reached(2);
    await loop.stop();
  });

  it("wakes early from a retry backoff when nudged", async () => {
    const step = new ScriptedStep((call) => {
      if (call === 1) throw new Error("down");
      return call;
    });
    const { loop, recorded } = buildLoop(step);
    loop.start({ intervalMs: FOREVER_MS, retryFirstMs: FOREVER_MS, retryMaxMs: FOREVER_MS });
    await step.reached(1);
    await settle();
    expect(recorded.retries).to.have.length(1);
    loop.nudge();
    await step.reached(2);
    await loop.stop();
  });

  it("wakes early once wakeWhen sees work, and does not ask it during a backoff", async () => {
    let workWaiting = false;
    let asked = 0;
    const step = new ScriptedStep((call) => {
      if (call === 1) throw new Error("down");
      return call;
    });
    const { loop } = buildLoop(step, {
      wakeWhen: {
        check: () => {
          asked++;
          return workWaiting;
        },
        everyMs: 1,
      },
    });
    workWaiting = true;
    loop.start({ intervalMs: FOREVER_MS, retryFirstMs: FOREVER_MS, retryMaxMs: FOREVER_MS });
    await step.reached(1);
    await settle();
    // Backing off after the failure: work is waiting, but the check is not even asked.
    expect(asked).to.equal(0);
    expect(step.calls).to.equal(1);
    workWaiting = false;
    loop.nudge();
    await step.reached(2);
    // Waiting out the interval after a success: the check is asked, and says no until there is work.
    while (asked === 0) await settle();
    expect(step.calls).to.equal(2);
    workWaiting = true;
    await step.reached(3);
    await loop.stop();
  });

  it("treats a throwing wakeWhen check as no work", async () => {
    let asked = 0;
    const step = new ScriptedStep();
    const { loop } = buildLoop(step, {
      wakeWhen: {
        check: () => {
          asked++;
          throw new Error("disk gone");
        },
        everyMs: 1,
      },
    });
    loop.start({ intervalMs: FOREVER_MS, retryFirstMs: 1, retryMaxMs: 1 });
    while (asked < 3) await settle();
    expect(step.calls).to.equal(1);
    expect(loop.running).to.equal(true);
    await loop.stop();
  });

  it("keeps running when the owner's callbacks throw", async () => {
    const step = new ScriptedStep((call) => {
      if (call < 3) throw new Error("down");
      if (call === 3) return call;
      throw new FatalTestError("done");
    });
    const loop = new RetryLoop<number>({
      step: step.run,
      isFatal: (error) => error instanceof FatalTestError,
      onRetry: () => {
        throw new Error("broken logger");
      },
      onFatal: () => {
        throw new Error("broken logger");
      },
    });
    loop.start({ intervalMs: 1, retryFirstMs: 1, retryMaxMs: 1 });
    await loop.whenStopped();
    expect(step.calls).to.equal(4);
    expect(loop.fatalError).to.be.instanceOf(FatalTestError);
  });

  it("refuses a second start while running, and can start again after a stop, clearing the fatal error", async () => {
    const step = new ScriptedStep((call) => {
      if (call === 1) throw new FatalTestError("first run ends");
      return call;
    });
    const { loop } = buildLoop(step);
    loop.start({ intervalMs: FOREVER_MS, retryFirstMs: 1, retryMaxMs: 1 });
    await loop.whenStopped();
    await settle();
    expect(loop.fatalError).to.be.instanceOf(FatalTestError);

    loop.start({ intervalMs: FOREVER_MS, retryFirstMs: 1, retryMaxMs: 1 });
    expect(loop.fatalError).to.equal(undefined);
    expect(() => loop.start({ intervalMs: 1, retryFirstMs: 1, retryMaxMs: 1 })).to.throw("already running");
    await step.reached(2);
    await loop.stop();
    expect(loop.running).to.equal(false);
  });

  it("resolves whenStopped and stop at once when it never started", async () => {
    const { loop } = buildLoop(new ScriptedStep());
    await loop.whenStopped();
    await loop.stop();
    expect(loop.running).to.equal(false);
  });
});
