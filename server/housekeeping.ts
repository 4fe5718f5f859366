/**
 * The gateway's housekeeping: named tasks, each run every `everyMs` by a timer that never keeps the process alive.
 * Each module's factory returns its own tasks (what they do, how often); the composition root starts them together
 * and stops them at close. A task's failure is logged with its name and tried again at its next turn: housekeeping
 * never throws out of a timer.
 */
export interface HousekeepingTask {
  /** What the task does, as the log line of a failure says it ("purging expired idempotency keys"). */
  name: string;
  everyMs: number;
  run: () => Promise<unknown>;
}

export interface Housekeeping {
  /** Starts more tasks (the ones that run only while this replica leads, say); returns a stop for them alone. */
  add(tasks: readonly HousekeepingTask[]): () => void;
  /** Stops every task's timer (a run in progress finishes on its own). */
  stop(): void;
}

/** Starts `tasks`; each failure goes to `log` as "<name> failed". */
export function startHousekeeping(tasks: readonly HousekeepingTask[], log: (message: string, error?: unknown) => void): Housekeeping {
  const timers = new Set<NodeJS.Timeout>();
  const add = (more: readonly HousekeepingTask[]) => {
    const started = more.map((task) => {
      const timer = setInterval(() => {
        task.run().catch((error) => log(`${task.name} failed`, error));
      }, task.everyMs);
      timer.unref();
      timers.add(timer);
      return timer;
    });
    return () => {
      for (const timer of started) {
        clearInterval(timer);
        timers.delete(timer);
      }
    };
  };
  add(tasks);
  return {
    add,
    stop() {
      for (const timer of timers) clearInterval(timer);
      timers.clear();
    },
  };
}
