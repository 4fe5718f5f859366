import path from "node:path";
import { Worker } from "node:worker_threads";
import type { WriterLock } from "../db/writer-lock";
import { startThread } from "../threads";
import type { Charge } from "../ledger/fees";
import type { Budget, HoldInput, HoldResult } from "../ledger/ledger";
import type { HoldBook } from "./ledger-payment";
import type { RecordCall } from "./payment";
import type { CommitStats } from "../db/group-commit";
import type { WriterError, WriterMessage, WriterReply, WriterRequest } from "./ledger-writer-protocol";

/** The thread's entry, bundled for it by ../threads.ts. */
const THREAD_ENTRY = path.join(__dirname, "ledger-writer-thread.ts");
/** How long close() lets the thread finish what it was asked before it is stopped. */
const CLOSE_DEADLINE_MS = 10_000;

type Operation = WriterRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

/**
 * The SQLite ledger writer (SQLITE_LEDGER_WRITER=thread): keyed calls' holds, captures and releases, with their calls'
 * lines, written by a thread of their own on a connection of their own (./ledger-writer-thread.ts), so that their SQL,
 * their COMMITs and the COMMITs' fsyncs leave the event loop to route calls. The same rules run there as on the
 * event loop (LedgerHolds); the two connections take turns on the file through `lock` (../db/writer-lock.ts), which
 * the event loop's group commit takes too. A capture is answered once its COMMIT, synchronous=FULL, is on disk; a
 * release once it is committed (so that the event loop's reads, which see what is committed, see it too).
 *
 * A failure that breaks the thread's books (a commit or fsync that failed, the thread's death) is the gateway's
 * end, as a failed commit on the event loop is: `onFatal` is told, every operation waiting and every one after it
 * is refused, and once the thread has stopped the lock is abandoned, so the event loop can still close its books.
 */
export class SqliteLedgerWriter implements HoldBook {
  /** Told about each of the thread's commits, as the event loop's group commit tells its own (the metrics). */
  onCommit?: (commit: CommitStats) => void;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private broken: Error | undefined;
  private closing = false;
  /**
   * The operations asked for in this turn of the event loop, sent to the thread together at its end: one message, and
   * one wake-up of the thread, for all the calls of a turn (the thread answers in the same way).
   */
  private outbox: WriterRequest[] = [];
  /** Resolves when the thread has closed the file (true: cleanly, so it may serve another) or has stopped (false). */
  private readonly ended: Promise<boolean>;
  private endedAs!: (clean: boolean) => void;

  private constructor(
    private readonly worker: Worker,
    private readonly lock: WriterLock,
    private readonly onFatal: (error: unknown) => void,
    /** Whether the thread may be kept for the next writer once this one has closed it cleanly. */
    private readonly reusable: boolean,
  ) {
    this.ended = new Promise((resolve) => (this.endedAs = resolve));
  }

  private readonly onMessage = (replies: WriterReply[]) => {
    for (const reply of replies) this.answer(reply);
  };
  private readonly onError = (error: Error) => this.fail(error);
  private readonly onExit = (code: number) => {
    this.endedAs(false);
    this.lock.abandon();
    if (!this.closing) this.fail(new Error(`the ledger writer's thread stopped (exit code ${code})`));
  };

  /**
   * Opens the SQLite file `file` (migrated, its open holds recovered) on a thread, an idle one this process's last
   * writers left if there is one, and waits until it is ready.
   */
  static async start(
    file: string,
    lock: WriterLock,
    onFatal: (error: unknown) => void,
    /** A test's stand-in thread (a CommonJS file, never kept idle); ./ledger-writer-thread.ts otherwise. */
    standIn?: string,
  ): Promise<SqliteLedgerWriter> {
    if (standIn) return SqliteLedgerWriter.open(new Worker(standIn), file, lock, onFatal, false);
    // Not tried again on a new thread when opening on an idle one fails: the failed try may hold a ticket of `lock`.
    const worker =
      takeIdleThread() ??
      (await startThread(THREAD_ENTRY).catch((error: unknown) => {
        throw new Error(`the ledger writer's thread could not be built (SQLITE_LEDGER_WRITER=loop runs without it)`, { cause: error });
      }));
    return SqliteLedgerWriter.open(worker, file, lock, onFatal, true);
  }

  /** Opens `file` on `worker` and waits until it is ready; a thread that fails to is stopped, and the lock abandoned. */
  private static async open(
    worker: Worker,
    file: string,
    lock: WriterLock,
    onFatal: (error: unknown) => void,
    reusable: boolean,
  ): Promise<SqliteLedgerWriter> {
    const writer = new SqliteLedgerWriter(worker, lock, onFatal, reusable);
    // An idle thread is unreferenced: the process waits for it while it opens the file, as for a new one.
    worker.ref();
    await new Promise<void>((resolve, reject) => {
      const done = (error?: Error) => {
        worker.off("message", first).off("error", done).off("exit", exit);
        if (error) reject(error);
        else resolve();
      };
      // The thread's first reply is its answer to the open; anything sent with it is the writer's.
      const first = ([reply, ...rest]: WriterReply[]) => {
        done(
          reply?.kind === "ready"
            ? undefined
            : asError(reply?.kind === "fatal" ? reply.error : { name: "Error", message: "unexpected message" }),
        );
        if (reply?.kind === "ready") writer.onMessage(rest);
      };
      const exit = (code: number) => done(new Error(`the ledger writer's thread stopped before it was ready (exit code ${code})`));
      worker.once("message", first).once("error", done).once("exit", exit);
      worker.postMessage([{ op: "open", file, lock: lock.buffer }] satisfies WriterMessage[]);
    }).catch(async (error: unknown) => {
      await worker.terminate();
      lock.abandon();
      throw error;
    });
    worker.on("message", writer.onMessage).on("error", writer.onError).on("exit", writer.onExit);
    // The thread keeps the process alive only while it has work (an operation waiting, or a close).
    worker.unref();
    return writer;
  }

  /** The ids of the threads kept idle for the next writer of this process, the next one to be taken last. */
  static idleThreadIds(): number[] {
    return idleThreads.map((idle) => idle.worker.threadId);
  }

  /** The thread's id (a test sees that a closed writer's thread serves the next writer). */
  get threadId(): number {
    return this.worker.threadId;
  }

  hold(input: HoldInput): Promise<HoldResult> {
    return this.ask({ op: "hold", input }) as Promise<HoldResult>;
  }

  settle(holdId: string, key: { apiKeyId: string; nowMs: number }, record: RecordCall, captured?: Charge): Promise<Budget> {
    return this.ask({ op: "settle", holdId, key, write: record.write, ...(captured ? { captured } : {}) }) as Promise<Budget>;
  }

  async void(holdId: string, record: RecordCall): Promise<void> {
    await this.ask({ op: "void", holdId, write: record.write });
  }

  async release(holdId: string): Promise<void> {
    await this.ask({ op: "release", holdId });
  }

  /**
   * Resolves once every operation answered so far is committed, so that a read on the event loop's connection sees it
   * (a hold is answered before its batch commits). Once the thread is closed or broken there is nothing more to wait
   * for: what it committed is all it will.
   */
  async caughtUp(): Promise<void> {
    if (this.broken || this.closing) return;
    await this.ask({ op: "caught_up" });
  }

  /**
   * Lets the operations asked so far finish, commits, and closes the thread's connection (the thread is stopped at the
   * latest after CLOSE_DEADLINE_MS); a thread that closed it cleanly is kept idle for the next writer of the process.
   */
  async close(): Promise<void> {
    if (this.closing) {
      await this.ended;
      return;
    }
    this.closing = true;
    this.worker.ref();
    // After every operation asked for: the thread answers them all before it closes.
    this.send();
    this.worker.postMessage([{ op: "close" }] satisfies WriterMessage[]);
    let stopped = false;
    const deadline = setTimeout(() => {
      stopped = true;
      void this.worker.terminate();
    }, CLOSE_DEADLINE_MS);
    // A thread stopped at the deadline is not clean, even if its "closed" came as it stopped.
    const clean = (await this.ended) && !stopped;
    clearTimeout(deadline);
    const broken = this.broken !== undefined;
    this.fail(new Error("the ledger writer is closed"), false);
    if (!clean) return;
    // The file is closed and nothing failed: the thread is done with this file's lock (as if it had stopped), and
    // waits for the next writer of this process, or is stopped.
    this.worker.off("message", this.onMessage).off("error", this.onError).off("exit", this.onExit);
    this.lock.abandon();
    // The thread answers every operation before "closed" (./ledger-writer-thread.ts): no answer of this writer's can
    // reach the next.
    if (this.reusable && !broken) keepIdleThread(this.worker);
    else await this.worker.terminate();
  }

  private ask(operation: Operation): Promise<unknown> {
    if (this.broken) return Promise.reject(this.broken);
    if (this.closing) return Promise.reject(new Error("the ledger writer is closed"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      if (this.outbox.push({ id, ...operation } as WriterRequest) === 1) setImmediate(this.send);
    });
  }

  /**
   * Sends the operations asked for so far, in the order asked, in one message. Should the batch not be sendable (an
   * operation that cannot be copied to the thread), each is sent alone, and one that cannot be is refused, leaving
   * nothing waiting. Once the writer is broken there is nothing to send: fail() refused every operation waiting.
   */
  private readonly send = () => {
    const batch = this.outbox;
    if (batch.length === 0) return;
    this.outbox = [];
    if (this.broken) return;
    try {
      this.worker.postMessage(batch satisfies WriterMessage[]);
      return;
    } catch {
      // Below, one at a time.
    }
    for (const request of batch) {
      try {
        this.worker.postMessage([request] satisfies WriterMessage[]);
      } catch (error) {
        const waiting = this.pending.get(request.id);
        this.pending.delete(request.id);
        waiting?.reject(error instanceof Error ? error : new Error(String(error)));
      }
    }
    if (this.pending.size === 0 && !this.closing) this.worker.unref();
  };

  private answer(reply: WriterReply): void {
    if (reply.kind === "fatal") return this.fail(asError(reply.error));
    if (reply.kind === "commit") return this.onCommit?.(reply.stats);
    if (reply.kind === "ready") return;
    if (reply.kind === "closed") return this.endedAs(true);
    const waiting = this.pending.get(reply.id);
    if (!waiting) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0 && !this.closing) this.worker.unref();
    if (reply.kind === "done") waiting.resolve(reply.value);
    else waiting.reject(asError(reply.error));
  }

  /**
   * The thread's books are broken (or it is closed): what waits is refused, and so is everything after. A thread still
   * running after a fatal failure is stopped (its exit abandons the lock).
   */
  private fail(error: Error, fatal = true): void {
    if (this.broken) return;
    this.broken = error;
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
    if (!fatal) return;
    void this.worker.terminate();
    this.onFatal(error);
  }
}

/**
 * Threads whose writer closed them cleanly, each stopped after IDLE_THREAD_MS unless the next writer of the process
 * takes it first. Starting a thread costs about 70 ms of CPU on a 2-core host before it does anything (Node's own
 * start of a thread), and about 30 ms more to load the writer: a gateway starts one, a test suite hundreds.
 */
const idleThreads: { worker: Worker; timer: NodeJS.Timeout; exited: () => void }[] = [];
/** The most threads kept idle at once. */
const MAX_IDLE_THREADS = 2;
/** How long an idle thread is kept. */
const IDLE_THREAD_MS = 30_000;
/** An idle thread's failure stops it; nothing waits on it. */
const ignore = () => {};

function keepIdleThread(worker: Worker): void {
  // A thread that has stopped (its id is -1 once its exit is handled, as when its "closed" came as it was stopped) is
  // never kept: a message to it would go nowhere, unanswered.
  if (worker.threadId === -1) return;
  if (idleThreads.length >= MAX_IDLE_THREADS) {
    void worker.terminate();
    return;
  }
  worker.unref();
  const exited = () => forgetIdleThread(worker);
  const timer = setTimeout(() => {
    forgetIdleThread(worker);
    void worker.terminate();
  }, IDLE_THREAD_MS);
  timer.unref();
  worker.on("error", ignore).once("exit", exited);
  idleThreads.push({ worker, timer, exited });
}

/**
 * The thread kept idle last (the likeliest still warm), taken from the pool: the caller opens a file on it. (One that
 * stopped is out of the pool once its exit is heard; one whose exit is not heard yet fails the open that takes it.)
 */
function takeIdleThread(): Worker | undefined {
  const worker = idleThreads.at(-1)?.worker;
  if (worker) forgetIdleThread(worker);
  return worker;
}

function forgetIdleThread(worker: Worker): void {
  const index = idleThreads.findIndex((idle) => idle.worker === worker);
  if (index === -1) return;
  const [idle] = idleThreads.splice(index, 1);
  clearTimeout(idle!.timer);
  worker.off("error", ignore).off("exit", idle!.exited);
}

/** An error from the thread, as it was thrown there: its name, message and code (a SQLite error's). */
function asError(described: WriterError): Error {
  const error = new Error(described.message) as Error & { code?: string };
  error.name = described.name;
  if (described.code !== undefined) error.code = described.code;
  return error;
}
