import path from "node:path";
import { Worker } from "node:worker_threads";
import { threadScript } from "../threads";
import type { ProblemReport } from "./schema-guard";

/**
 * Worker threads that validate inputs against the sellers' schemas whose cost cannot be bounded
 * ahead of time (see ./schema-guard.ts `runsInProcess`): schemas with `$ref`s, whose shared
 * subschemas can make validation exponential in the input's depth (`anyOf: [B, B]` with B
 * referring back), or big schemas against big inputs. Each job runs on a worker under a
 * deadline; a worker that overruns it is terminated and replaced, so a hostile schema costs
 * its own caller a refusal and the gateway a thread restart, never its event loop. A worker
 * also has a heap limit: a validation that would exhaust memory ends that worker, not the
 * gateway.
 *
 * One job at a time per worker, so an overrun is always the job's own; jobs wait in one queue
 * and their deadline counts from when they were asked for, queueing included: a job still
 * queued once no worker could take it in time (all busy, or starting) is refused then (for a
 * validation, its deadline plus the compile budget a worker new to its schema would add).
 */

export type RemoteValidation =
  | { kind: "problems"; problems: string[] }
  /** The schema does not compile under the gateway's rules (a seller's mistake). */
  | { kind: "invalid_schema"; message: string }
  /** Validation did not finish within its deadline or its memory. */
  | { kind: "too_costly"; message: string };

export interface ValidationPoolOptions {
  /** Worker threads (default 1). */
  size?: number;
  /** How long one validation may take, waiting included. */
  validateTimeoutMs: number;
  /** Added to the deadline when the worker must compile the schema first. */
  compileTimeoutMs: number;
  /** Heap of each worker. */
  memoryMb?: number;
  /** The workers' TypeScript entry, bundled for them (./validation-worker.ts; a test's file that does not build). */
  entry?: string;
  log?: (message: string, error?: unknown) => void;
}

interface Job {
  id: number;
  kind: "validate" | "compile";
  key: string;
  schema: string;
  input?: unknown;
  /** How problems are named: an input's (where in it), or an answer's (the first, by schema path only). */
  report: ProblemReport;
  deadlineAtMs: number;
  /** Refuses the job if it is still queued once no worker could take it in time. */
  expiry?: NodeJS.Timeout;
  resolve: (outcome: RemoteValidation) => void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job?: Job;
  timer?: NodeJS.Timeout;
  /** Schema keys this worker has compiled (it may have dropped some since; it then compiles again). */
  seen: Set<string>;
}

/** The workers' entry, bundled for them by ../threads.ts when the pool first has a job. */
const WORKER_ENTRY = path.join(__dirname, "validation-worker.ts");

export class ValidationPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  /** The workers' script, once built (asked for at the first job); until then jobs wait in the queue. */
  private script: string | undefined;
  private building = false;

  constructor(private readonly options: ValidationPoolOptions) {}

  /** Validates `input` against the schema (JSON text) known by `key`; `report: "output"` for a skill's answer. */
  validate(key: string, schema: string, input: unknown, report: ProblemReport = "input"): Promise<RemoteValidation> {
    return this.enqueue({ kind: "validate", key, schema, input, report });
  }

  /** Compiles the schema on a worker (a listing's check): problems [] when it compiles. */
  compile(key: string, schema: string, report: ProblemReport = "input"): Promise<RemoteValidation> {
    return this.enqueue({ kind: "compile", key, schema, report });
  }

  /** Refuses every job, queued or on a worker, and ends the workers; nothing starts again afterwards. */
  async close(): Promise<void> {
    this.closed = true;
    const shuttingDown = tooCostly("the gateway is shutting down");
    for (const job of this.queue.splice(0)) {
      clearTimeout(job.expiry);
      job.resolve(shuttingDown);
    }
    const slots = this.slots.splice(0);
    for (const slot of slots) {
      const job = slot.job;
      this.finish(slot);
      job?.resolve(shuttingDown);
    }
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }

  private enqueue(job: Omit<Job, "id" | "deadlineAtMs" | "resolve">): Promise<RemoteValidation> {
    if (this.closed) return Promise.resolve(tooCostly("the gateway is shutting down"));
    return new Promise((resolve) => {
      const budgetMs = this.options.validateTimeoutMs + (job.kind === "compile" ? this.options.compileTimeoutMs : 0);
      const queued: Job = { ...job, id: this.nextId++, deadlineAtMs: Date.now() + budgetMs, resolve };
      // The latest a worker could still take it: one that has not compiled its schema gives a validation the compile
      // budget on top (dispatch). Until then it waits in the queue, whatever the workers are doing.
      const latestMs = budgetMs + (job.kind === "compile" ? 0 : this.options.compileTimeoutMs);
      queued.expiry = setTimeout(() => this.expire(queued), latestMs);
      queued.expiry.unref();
      this.queue.push(queued);
      this.dispatch();
    });
  }

  /** A job no worker took by its deadline: refused where it waits. */
  private expire(job: Job): void {
    const index = this.queue.indexOf(job);
    if (index === -1) return;
    this.queue.splice(index, 1);
    job.resolve(noCapacity(this.options.validateTimeoutMs));
    this.holdProcessOpen();
  }

  private dispatch(): void {
    if (this.closed) return;
    if (this.script === undefined) return this.build();
    while (this.slots.length < (this.options.size ?? 1)) this.slots.push(this.spawn(this.script));
    for (const slot of this.slots) {
      // An idle worker takes the first job still within its deadline; the expired ones before it are refused.
      while (slot.ready && !slot.job && this.queue.length > 0) {
        const job = this.queue.shift()!;
        clearTimeout(job.expiry);
        this.start(slot, job);
      }
    }
    // After the refusals above: a pool left with nothing to do must not keep its process alive.
    this.holdProcessOpen();
  }

  /** Hands a job to an idle worker, or refuses it if its deadline has passed. */
  private start(slot: Slot, job: Job): void {
    const now = Date.now();
    // A worker that has not compiled this schema yet gets the compile budget on top.
    const deadlineAtMs = slot.seen.has(job.key)
      ? job.deadlineAtMs
      : job.deadlineAtMs + (job.kind === "compile" ? 0 : this.options.compileTimeoutMs);
    if (deadlineAtMs <= now) {
      job.resolve(noCapacity(this.options.validateTimeoutMs));
      return;
    }
    slot.job = job;
    slot.timer = setTimeout(() => this.overrun(slot), deadlineAtMs - now);
    try {
      slot.worker.postMessage({ id: job.id, kind: job.kind, key: job.key, schema: job.schema, input: job.input, report: job.report });
    } catch (error) {
      // A value the structured clone cannot copy (nested past its stack: a backend's answer can be): that job's
      // refusal, never a throw out of a worker's message handler.
      this.finish(slot);
      this.options.log?.(`schema validation refused (the value could not be sent to a worker) for schema ${job.key}`, error);
      job.resolve(tooCostly("the value could not be sent to a validation worker"));
    }
  }

  /**
   * Workers keep the process alive only while there is work: an idle pool must not stop a
   * gateway or a script from exiting, and a script awaiting a validation must not exit first.
   */
  private holdProcessOpen(): void {
    const busy = this.queue.length > 0 || this.slots.some((slot) => slot.job !== undefined);
    for (const slot of this.slots) {
      if (busy) slot.worker.ref();
      else slot.worker.unref();
    }
  }

  /**
   * Builds the workers' script, then dispatches what waits. A build that fails (an install without esbuild's binary)
   * is logged; the jobs waiting are refused at their deadlines, as when no worker can take them, and the next job
   * tries again.
   */
  private build(): void {
    if (this.building) return;
    this.building = true;
    threadScript(this.options.entry ?? WORKER_ENTRY).then(
      (script) => {
        this.building = false;
        this.script = script;
        this.dispatch();
      },
      (error: unknown) => {
        this.building = false;
        this.options.log?.("the schema validation workers could not be built", error);
      },
    );
  }

  private spawn(script: string): Slot {
    const memoryMb = this.options.memoryMb ?? 64;
    const worker = new Worker(script, {
      eval: true,
      resourceLimits: { maxOldGenerationSizeMb: memoryMb, maxYoungGenerationSizeMb: Math.max(4, Math.floor(memoryMb / 4)) },
    });
    worker.unref();
    const slot: Slot = { worker, ready: false, seen: new Set() };
    worker.on("message", (message: { kind: string; id?: number; problems?: string[]; message?: string }) => {
      if (message.kind === "ready") {
        slot.ready = true;
        this.dispatch();
        return;
      }
      const job = slot.job;
      if (!job || job.id !== message.id) return;
      this.finish(slot);
      slot.seen.add(job.key);
      job.resolve(
        message.kind === "problems"
          ? { kind: "problems", problems: message.problems ?? [] }
          : { kind: "invalid_schema", message: message.message ?? "invalid schema" },
      );
      this.dispatch();
      this.holdProcessOpen();
    });
    // An error or exit not asked for (out of memory, a crash): the job in hand fails, a new worker takes over.
    const lost = (error?: unknown) => {
      if (!this.slots.includes(slot)) return;
      this.replace(slot, "the validation worker stopped", error);
    };
    worker.on("error", lost);
    worker.on("exit", () => lost());
    return slot;
  }

  private overrun(slot: Slot): void {
    this.replace(slot, `validation took longer than ${this.options.validateTimeoutMs} ms`);
  }

  /** Ends a worker and its job (refused as too costly), and starts another in its place. */
  private replace(slot: Slot, reason: string, error?: unknown): void {
    const job = slot.job;
    this.finish(slot);
    const index = this.slots.indexOf(slot);
    if (index !== -1) this.slots.splice(index, 1);
    void slot.worker.terminate();
    if (job) {
      this.options.log?.(`schema validation refused (${reason}) for schema ${job.key}`, error);
      job.resolve(tooCostly(reason));
    }
    if (!this.closed) this.dispatch();
  }

  private finish(slot: Slot): void {
    clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.job = undefined;
  }
}

function noCapacity(validateTimeoutMs: number): RemoteValidation {
  return tooCostly(`no validation capacity within ${validateTimeoutMs} ms`);
}

function tooCostly(reason: string): RemoteValidation {
  return { kind: "too_costly", message: reason };
}
