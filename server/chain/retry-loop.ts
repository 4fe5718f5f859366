/**
 * The background loop shared by the settler and the deposit indexer: run one async step, wait, repeat.
 *
 * A step that succeeds is followed by a wait of `intervalMs` (or none, when the owner says more work is
 * waiting). A step that fails is retried after a doubling backoff, capped, so a broken RPC is not hammered. A
 * step that fails in a way the owner calls fatal ends the loop for good: retrying cannot fix it and someone
 * must look. The loop never throws; its owner reports failures through `onRetry` and `onFatal`.
 *
 * The owner keeps its own public API (its messages, its checks on `intervalMs`) and delegates to this.
 */

export type RetryLoopParameters<T> = {
  /** One unit of work. The loop awaits it; steps never overlap. */
  step: () => Promise<T>;
  /** Whether an error from `step` ends the loop instead of being retried. */
  isFatal: (error: unknown) => boolean;
  /** Told about a failure that will be retried, after `delayMs`. A throw here is ignored. */
  onRetry: (error: unknown, failures: number, delayMs: number) => void;
  /** Told about the error that ended the loop. A throw here is ignored. */
  onFatal: (error: unknown) => void;
  /** When it says yes after a successful step, the next step runs at once instead of after the interval. */
  runAgainAtOnce?: (result: T) => boolean;
  /**
   * Ends a wait early once `check()` says there is work, asked every `everyMs` while waiting. Not asked
   * during a retry backoff: waking then would defeat the backoff. A throw from `check` counts as no.
   */
  wakeWhen?: { check: () => boolean; everyMs: number };
};

/** How often the loop runs and how it backs off; fixed for one `start`. */
export type RetryLoopStartParameters = {
  /** The wait after a successful step. */
  intervalMs: number;
  /** The wait after the first failure in a row; it doubles with each further one. */
  retryFirstMs: number;
  /** The longest wait after failures. */
  retryMaxMs: number;
  /** The shortest wait after a failure (wins over `retryMaxMs`). Default 0. */
  retryMinMs?: number;
};

/** The wait after `failures` failures in a row: `firstMs` doubled per further failure, at most `maxMs`, at least `minMs`. */
export function retryDelayMs(failures: number, parameters: { firstMs: number; maxMs: number; minMs?: number }): number {
  const { firstMs, maxMs, minMs = 0 } = parameters;
  return Math.max(minMs, Math.min(firstMs * 2 ** (failures - 1), maxMs));
}

/** What a loop has been doing lately, for readiness checks (GET /readyz). */
export interface LoopHealth {
  /** Whether `start` was ever called. */
  started: boolean;
  running: boolean;
  /**
   * Whether the last run ended because its owner called `stop` (the gateway closing, or a replica that no longer
   * leads settlement), as opposed to running still or ending in a fatal error.
   */
  stoppedOnRequest: boolean;
  /** The message of the error that ended the last run, if one did. */
  fatal?: string;
  /** When the loop (re)started and when its last step succeeded, in ms since the epoch. */
  startedAtMs?: number;
  lastSuccessAtMs?: number;
  /** Steps failed in a row since the last success. */
  failures: number;
}

/** Runs a step repeatedly between `start` and `stop`, with an interval, a doubling backoff, a wake-up and a fatal stop. */
export class RetryLoop<T> {
  private readonly parameters: RetryLoopParameters<T>;
  private loop: Promise<void> | undefined;
  private stopRequested = false;
  private wake: (() => void) | undefined;
  private fatal: unknown;
  private startedAtMs: number | undefined;
  private lastSuccessAtMs: number | undefined;
  private failures = 0;

  constructor(parameters: RetryLoopParameters<T>) {
    this.parameters = parameters;
  }

  /** Starts the loop. Throws if it is running already; the owner checks first to give its own message. */
  start(parameters: RetryLoopStartParameters): void {
    if (this.loop) throw new Error("the loop is already running");
    this.stopRequested = false;
    this.fatal = undefined;
    this.startedAtMs = Date.now();
    this.failures = 0;
    const loop = this.run(parameters);
    this.loop = loop;
    void loop.finally(() => {
      if (this.loop === loop) this.loop = undefined;
    });
  }

  /** Ends the loop; resolves once the step in progress (if any) has finished. */
  async stop(): Promise<void> {
    this.stopRequested = true;
    this.wake?.();
    await this.loop;
  }

  /** Resolves when the loop ends, by `stop()` or by a fatal error (at once if it is not running). */
  async whenStopped(): Promise<void> {
    await this.loop;
  }

  /** Ends the wait in progress, even a retry backoff, so the next step runs now. Does nothing during a step. */
  nudge(): void {
    this.wake?.();
  }

  get running(): boolean {
    return this.loop !== undefined;
  }

  get health(): LoopHealth {
    return {
      started: this.startedAtMs !== undefined,
      running: this.running,
      stoppedOnRequest: this.stopRequested && !this.running && this.fatal === undefined,
      fatal: this.fatal === undefined ? undefined : this.fatal instanceof Error ? this.fatal.message : String(this.fatal),
      startedAtMs: this.startedAtMs,
      lastSuccessAtMs: this.lastSuccessAtMs,
      failures: this.failures,
    };
  }

  /** The error that ended the last run, if one did; cleared by `start`. */
  get fatalError(): unknown {
    return this.fatal;
  }

  private async run(parameters: RetryLoopStartParameters): Promise<void> {
    const { intervalMs } = parameters;
    const { step, isFatal, runAgainAtOnce } = this.parameters;
    let failures = 0;
    while (!this.stopRequested) {
      let delayMs = intervalMs;
      try {
        const result = await step();
        failures = 0;
        this.failures = 0;
        this.lastSuccessAtMs = Date.now();
        if (runAgainAtOnce?.(result)) delayMs = 0;
      } catch (error) {
        if (isFatal(error)) {
          this.fatal = error;
          this.tell(() => this.parameters.onFatal(error));
          return;
        }
        failures++;
        this.failures = failures;
        delayMs = retryDelayMs(failures, { firstMs: parameters.retryFirstMs, maxMs: parameters.retryMaxMs, minMs: parameters.retryMinMs });
        this.tell(() => this.parameters.onRetry(error, failures, delayMs));
      }
      await this.waitForWork(delayMs, failures > 0);
    }
  }

  /** Sleeps `delayMs`, waking early on stop, a nudge, or (outside a backoff) when `wakeWhen` sees work. */
  private waitForWork(delayMs: number, backingOff: boolean): Promise<void> {
    if (this.stopRequested || delayMs <= 0) return Promise.resolve();
    const { wakeWhen } = this.parameters;
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout;
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      this.wake = done;
      if (!wakeWhen) {
        timer = setTimeout(done, delayMs);
        return;
      }
      const deadline = Date.now() + delayMs;
      const workWaiting = () => {
        try {
          return wakeWhen.check();
        } catch {
          return false; // The next step will meet (and report) whatever broke the check.
        }
      };
      const check = () => {
        const left = deadline - Date.now();
        if (left <= 0 || (!backingOff && workWaiting())) return done();
        timer = setTimeout(check, Math.min(left, wakeWhen.everyMs));
      };
      timer = setTimeout(check, Math.min(delayMs, wakeWhen.everyMs));
    });
  }

  /** Calls an owner's callback; a broken logger must not stop the loop. */
  private tell(callback: () => void): void {
    try {
      callback();
    } catch {
      // Ignored on purpose, see above.
    }
  }
}
