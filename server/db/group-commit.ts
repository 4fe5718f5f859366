import { performance } from "node:perf_hooks";
import type { Db } from "./db";

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit: many operations share one SQLite transaction, and so one fsync.
 *
 * `run(fn)` executes `fn` at once, atomically, inside the open batch transaction (as a
 * savepoint, so a throwing operation undoes only itself) and returns its result.
 * `durable()` resolves when everything run so far is on disk. A response that reports a
 * charge awaits it, so no client is ever told about money the disk does not have.
 *
 * When the batch commits: on the next turn of the event loop after someone awaits
 * durability, at `maxOps` operations, or `maxDelayMs` after the batch began, whichever
 * comes first. Writes nobody waits for (a hold before its call is forwarded, a failed
 * call's log line) ride along with the next durable commit instead of paying an fsync of
 * their own: losing one in a crash is harmless, since an unwritten hold is a released one.
 *
 * Because the process is single-threaded and each operation runs to completion inside
 * the transaction, later operations see earlier ones' writes: a hold taken in this batch
 * is already subtracted when the next call checks the balance.
 */
export class GroupCommit {
  private waiters: Waiter[] = [];
  private opsInBatch = 0;
  private flushScheduled = false;
  private timer: NodeJS.Timeout | undefined;
  private batches = 0;
  private depth = 0;

  private readonly savepoint;

  /** Told about each successful commit: its operations, the responses it released, and how long COMMIT (its fsync) took. */
  onCommit?: (commit: { operations: number; waiters: number; durationMs: number }) => void;

  constructor(
    private readonly db: Db,
    private readonly maxOps = 512,
    /** Told about a failed commit; the batch's operations are rolled back and their waiters rejected. */
    private readonly onCommitError: (error: unknown) => void = () => {},
    private readonly maxDelayMs = 10,
  ) {
    // Prepared once: better-sqlite3's db.transaction() builds four wrapper functions per
    // call, which on the call path cost more than the SQL they wrap.
    this.savepoint = {
      begin: db.prepare("SAVEPOINT op"),
      release: db.prepare("RELEASE op"),
      rollback: db.prepare("ROLLBACK TO op"),
    };
  }

  run<T>(fn: () => T): T {
    if (!this.db.inTransaction) {
      this.db.exec("BEGIN IMMEDIATE");
      this.opsInBatch = 0;
      this.timer ??= setTimeout(() => this.flush(), this.maxDelayMs);
    }
    // Each operation is a savepoint, so a throwing one undoes only itself. Operations may
    // nest (a capture inside a call's completion); only the outermost one may end the
    // batch, never a savepoint half-way through an enclosing operation.
    this.depth++;
    let result: T;
    try {
      result = this.inSavepoint(fn);
    } catch (error) {
      // Some failures (a full disk, an I/O error) make SQLite roll back the whole
      // transaction, not only this operation's savepoint: the batch's earlier operations
      // are gone, so whoever awaits their durability must hear it.
      if (this.depth === 1 && !this.db.inTransaction) this.fail(error);
      throw error;
    } finally {
      this.depth--;
    }
    if (this.depth === 0 && ++this.opsInBatch >= this.maxOps) {
      // This operation's caller cannot have called durable() yet, so if the commit fails
      // the failure must reach it here, or it would report a write the disk does not have.
      const failure = this.commitBatch();
      if (failure) throw failure.error;
    }
    return result;
  }

  private inSavepoint<T>(fn: () => T): T {
    this.savepoint.begin.run();
    let result: T;
    try {
      result = fn();
    } catch (error) {
      // After an error that ended the whole transaction there is no savepoint to undo.
      if (this.db.inTransaction) {
        this.savepoint.rollback.run();
        this.savepoint.release.run();
      }
      throw error;
    }
    this.savepoint.release.run();
    return result;
  }

  /** Resolves once every operation run so far is committed to disk. */
  durable(): Promise<void> {
    if (!this.db.inTransaction) return Promise.resolve();
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** Runs `fn` and resolves with its result once it is durable. */
  async runDurable<T>(fn: () => T): Promise<T> {
    const result = this.run(fn);
    await this.durable();
    return result;
  }

  /** Commits the open batch now. */
  flush(): void {
    if (this.depth > 0) throw new Error("GroupCommit.flush called inside an operation");
    this.commitBatch();
  }

  /** Commits the open batch; on failure rolls it back, rejects its waiters and returns the error. */
  private commitBatch(): { error: unknown } | undefined {
    this.flushScheduled = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.db.inTransaction) {
      // Waiters exist only while a batch is open, so if there are some, their batch ended
      // without our COMMIT: SQLite rolled it back itself (a full disk, an I/O error). What
      // they wait for is not on disk, and they must hear it.
      if (this.waiters.length === 0) return undefined;
      const error = new Error("the ledger batch was rolled back before it could commit");
      this.fail(error);
      return { error };
    }
    const startedAt = performance.now();
    try {
      this.db.exec("COMMIT");
      this.batches++;
    } catch (error) {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
      this.fail(error);
      return { error };
    }
    this.onCommit?.({ operations: this.opsInBatch, waiters: this.waiters.length, durationMs: performance.now() - startedAt });
    this.settleWaiters();
    return undefined;
  }

  private settleWaiters(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.resolve();
  }

  /** The open batch is lost: its waiters are rejected and the owner is told. */
  private fail(error: unknown): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.reject(error);
    this.onCommitError(error);
  }

  /** How many batches have committed (for benchmarks and tests). */
  get committedBatches(): number {
    return this.batches;
  }
}
