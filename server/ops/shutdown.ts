import { Worker } from "node:worker_threads";

/**
 * How long a process (npm start, npm run start:cluster, npm run serve) may take to stop once asked: long enough for
 * requests in flight to finish (a call waits on its backend for at most SKILL_TIMEOUT_MS's default, 10 s) and the
 * ledger to close; past it, what has not stopped is named in the log and the process exits anyway. A load run once
 * left `npm start` up for 40 minutes after SIGTERM, awaiting a part that never answered.
 */
export const SHUTDOWN_DEADLINE_MS = 15_000;

/**
 * How long past the deadline the watchdog waits before it kills the process itself: the time the last step's log line
 * and process.exit need when the main thread still runs. The watchdog is for a main thread that does not.
 */
export const SHUTDOWN_WATCHDOG_GRACE_MS = 2_000;

/** One part of a process to stop, in the order given. */
export interface ShutdownStep {
  name: string;
  stop: () => Promise<unknown> | unknown;
}

export interface ShutdownOutcome {
  /** The steps that stopped within the deadline. */
  stopped: string[];
  /** The steps that failed, each with its error's message. */
  failed: { name: string; message: string }[];
  /** The steps still running at the deadline, and those never started because none was left. */
  unfinished: string[];
}

export interface ShutdownOptions {
  deadlineMs?: number;
  /** Where the lines about the shutdown go (a step that failed or did not stop). */
  log?: (line: string) => void;
  /** Starts the watchdog thread (default true; a unit test of the steps alone turns it off). */
  watchdog?: boolean;
}

/**
 * The watchdog: a thread of its own, so that it still runs when the main thread is blocked (the 40-minute hang had the
 * main thread in a futex wait, where no timer of its event loop could fire). It is told each step as it starts; past
 * the deadline and its grace it writes which step the process was in to stderr and kills the process with SIGKILL.
 */
const WATCHDOG_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const fs = require("node:fs");
let step = "(none yet)";
parentPort.on("message", (message) => { step = String(message); });
setTimeout(() => {
  fs.writeSync(2, "shutdown: still running " + workerData.afterMs + " ms after it was asked to stop, in step " + JSON.stringify(step) + "; killing it (SIGKILL)\\n");
  process.kill(process.pid, "SIGKILL");
}, workerData.afterMs);
`;

/**
 * Stops the steps in turn, each bounded by what is left of the deadline, and says which did not stop. A step that fails
 * is logged and the next one runs; at the deadline, the step still running and every step after it are logged as not
 * stopped. Never throws and never takes much longer than the deadline, so its caller can always exit.
 */
export async function shutDown(steps: readonly ShutdownStep[], options: ShutdownOptions = {}): Promise<ShutdownOutcome> {
  const deadlineMs = options.deadlineMs ?? SHUTDOWN_DEADLINE_MS;
  const log = options.log ?? ((line: string) => console.error(line));
  const watchdog =
    options.watchdog === false
      ? undefined
      : new Worker(WATCHDOG_SOURCE, { eval: true, workerData: { afterMs: deadlineMs + SHUTDOWN_WATCHDOG_GRACE_MS } });
  watchdog?.unref();
  const outcome: ShutdownOutcome = { stopped: [], failed: [], unfinished: [] };
  const endsAt = Date.now() + deadlineMs;
  try {
    for (const [index, step] of steps.entries()) {
      const leftMs = endsAt - Date.now();
      if (leftMs <= 0) {
        outcome.unfinished.push(...steps.slice(index).map((s) => s.name));
        break;
      }
      watchdog?.postMessage(step.name);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<"late">((resolve) => {
        timer = setTimeout(() => resolve("late"), leftMs);
      });
      try {
        const result = await Promise.race([Promise.resolve().then(step.stop), late]);
        if (result === "late") {
          outcome.unfinished.push(...steps.slice(index).map((s) => s.name));
          break;
        }
        outcome.stopped.push(step.name);
      } catch (error) {
        outcome.failed.push({ name: step.name, message: error instanceof Error ? error.message : String(error) });
      } finally {
        clearTimeout(timer);
      }
    }
  } finally {
    for (const { name, message } of outcome.failed) log(`shutdown: ${name} failed to stop: ${message}`);
    if (outcome.unfinished.length > 0) {
      log(`shutdown: not stopped within ${deadlineMs} ms: ${outcome.unfinished.join(", ")}; exiting without them`);
    }
  }
  return outcome;
}

/**
 * Makes SIGINT and SIGTERM stop the process: the steps, bounded by the deadline (shutDown), then exit, 0 when every
 * step stopped and 1 otherwise. A second signal while stopping exits at once.
 */
export function exitOnStopSignals(
  steps: () => readonly ShutdownStep[],
  options: ShutdownOptions & { onSignal?: (signal: NodeJS.Signals) => void } = {},
): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      (options.log ?? console.error)(`shutdown: ${signal} again while stopping; exiting now`);
      process.exit(1);
    }
    stopping = true;
    options.onSignal?.(signal);
    void shutDown(steps(), options).then((outcome) => process.exit(outcome.failed.length + outcome.unfinished.length === 0 ? 0 : 1));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}
