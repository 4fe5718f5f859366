import { performance } from "node:perf_hooks";
import type { Db } from "./db";
import type { WalSync } from "./wal-sync";

/**
 * The file's write lock, when another thread's connection writes to the same file (./writer-lock.ts): a batch takes
 * it before its BEGIN and gives it back once its transaction has ended.
 */
export interface SharedWrites {
  lock: { acquire(): Promise<void> | void; release(): void; readonly contended: boolean };
  /**
   * Whether a batch nobody awaits commits at the next turn of the event loop rather than `maxDelayMs` after it began:
   * the event loop's connection, whose few writes should not keep the other thread waiting.
   */
  commitEachTurn: boolean;
}

/** A successful commit: its operations, the responses it released, and how long COMMIT (its fsync) took. */
export interface CommitStats {
  operations: number;
  waiters: number;
  durationMs: number;
}

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** A committed batch whose write-ahead log is not yet known to be on disk, and the responses waiting for it. */
interface Unsynced {
  waiters: Waiter[];
  operations: number;
  startedAt: number;
}

/**
 * Group commit: many operations share one SQLite transaction, and so one fsync.
 *
 * `run(fn)` runs `fn` atomically inside the open batch transaction (as a savepoint, so a throwing
 * operation undoes only itself) and resolves with its result. Operations take turns: SQLite has one
 * writer, and an operation awaiting its own statements must not find another's half-done work in its
 * savepoint, so each waits for the one before to finish (`fn` awaits only its own statements, which
 * better-sqlite3 runs synchronously: a turn lasts microseconds). `durable()` resolves when everything
 * run so far is on disk. A response that reports a charge awaits it, so no client is ever told about
 * money the disk does not have.
 *
 * When the batch commits: on the next turn of the event loop after someone awaits
 * durability (with a walSync whose fsync is in flight, as that fsync completes: the batch
 * would wait for the next fsync anyway, and grows meanwhile), at `maxOps` operations, or
 * `maxDelayMs` after the batch began, whichever comes first; never in the middle of an
 * operation (a flush that comes due while one holds the turn happens as its turn ends,
 * before the next operation's begins). Writes nobody
 * waits for (a hold before its call is forwarded, a failed call's log line) ride along with
 * the next durable commit instead of paying an fsync of their own: losing one in a crash is
 * harmless, since an unwritten hold is a released one.
 *
 * Because operations run one after the other inside the transaction, later operations see
 * earlier ones' writes: a hold taken in this batch is already subtracted when the next call
 * checks the balance.
 *
 * With a `walSync` (./wal-sync.ts, what the gateway gives it on a file), the COMMIT does not wait for the disk: the
 * connection runs at `synchronous=NORMAL`, where SQLite's COMMIT writes the batch's frames to the `-wal` file and
 * returns, and the fsync that makes them durable runs on libuv's thread pool while the event loop goes on. The
 * batch's waiters are answered only when an fsync begun after its COMMIT has completed, so a response still never
 * reports money the disk does not have. One fsync is in flight at a time; the batches committed meanwhile share the
 * next one. Once an fsync has failed, nothing is acknowledged again (a later fsync's success says nothing of the
 * pages the failed one lost): every waiter, and every operation asked for afterwards, is refused, and the owner
 * is told (the gateway stops, and recovery runs at its next start: server/index.ts).
 *
 * With `shared` (another thread writes to the same file: the ledger writer, server/gateway/ledger-writer.ts), a batch holds the
 * file's write lock from its BEGIN to the end of its transaction, and commits as soon as the operation holding the
 * turn ends once the other thread waits for the lock.
 */
export class GroupCommit {
  private waiters: Waiter[] = [];
  private opsInBatch = 0;
  private flushScheduled = false;
  private timer: NodeJS.Timeout | undefined;
  private batches = 0;
  /** An operation holds the writer's turn; the others queue in `turns`. */
  private busy = false;
  private readonly turns: (() => void)[] = [];
  /** A flush was asked for while an operation held the turn: it happens as the turn ends. */
  private flushWhenIdle = false;
  /** Committed batches waiting for the next fsync of the log (walSync only). */
  private unsynced: Unsynced[] = [];
  /** The batches the fsync in flight covers; undefined when none is in flight. */
  private syncing: Unsynced[] | undefined;
  /**
   * Whether a batch committed since the last fsync began: its frames are on disk only once another fsync has run. A
   * batch nobody waits for does not start one (its writes ride along with the next, as under FULL they would ride
   * along with the next COMMIT), but a durable() asked afterwards must.
   */
  private committedSinceSyncBegan = false;
  /** What broke durability for good: an fsync of the log failed. */
  private broken: { error: unknown } | undefined;
  /** Whether this connection holds `shared`'s lock (from a batch's BEGIN to the end of its transaction). */
  private holdsLock = false;

  private readonly savepoint;

  /** Told about each successful commit: its operations, the responses it released, and how long COMMIT (its fsync) took. */
  onCommit?: (commit: CommitStats) => void;
  /**
   * Called just before each COMMIT, which may block for its fsync (synchronous=FULL): the ledger writer's thread sends
   * the answers it has already decided (holds answered before their batch commits) rather than hold them through it.
   * It must not throw (a failure of its own is its own to handle); one that does is ignored, never the commit's.
   */
  beforeCommit?: () => void;

  constructor(
    private readonly db: Db,
    private readonly maxOps = 512,
    /** Told about a failed commit; the batch's operations are rolled back and their waiters rejected. */
    private readonly onCommitError: (error: unknown) => void = () => {},
    private readonly maxDelayMs = 10,
    /** Durability by an fsync of the log off the event loop (the connection is set to synchronous=NORMAL); without it COMMIT syncs (FULL). */
    private readonly walSync?: WalSync,
    /** Another thread writes to the file too: the lock both take. */
    private readonly shared?: SharedWrites,
  ) {
    if (walSync) db.pragma("synchronous = NORMAL");
    // Prepared once: better-sqlite3's db.transaction() builds four wrapper functions per
    // call, which on the call path cost more than the SQL they wrap.
    this.savepoint = {
      begin: db.prepare("SAVEPOINT op"),
      release: db.prepare("RELEASE op"),
      rollback: db.prepare("ROLLBACK TO op"),
    };
  }

  /** Runs `fn` as one operation of the batch, when its turn comes; resolves with its result. */
  async run<T>(fn: () => Promise<T> | T): Promise<T> {
    if (this.broken) throw this.broken.error;
    await this.takeTurn();
    let result: T;
    try {
      result = await this.runNow(fn);
    } catch (error) {
      this.endTurn();
      throw error;
    }
    // A flush asked for during the turn commits as it ends, before this operation's caller can have called
    // durable(): if that commit fails, the failure must reach the caller here (as at maxOps), or durable()
    // would find no batch open and report a write the disk does not have.
    const failure = this.endTurn();
    if (failure) throw failure.error;
    return result;
  }

  /** Waits for the operations queued so far to end, then commits the batch (before closing the connection). */
  async drain(): Promise<void> {
    await this.takeTurn();
    this.flushWhenIdle = true;
    const failure = this.endTurn();
    try {
      if (failure) throw failure.error;
      await this.durable();
    } finally {
      this.walSync?.close();
    }
  }

  private async takeTurn(): Promise<void> {
    if (this.busy) await new Promise<void>((resolve) => this.turns.push(resolve));
    else this.busy = true;
  }

  /** Hands the writer's turn on, committing first when a flush was asked for meanwhile; returns that commit's failure. */
  private endTurn(): { error: unknown } | undefined {
    let failure: { error: unknown } | undefined;
    if (this.holdsLock && this.shared!.lock.contended) this.flushWhenIdle = true;
    if (this.flushWhenIdle) {
      this.flushWhenIdle = false;
      failure = this.commitBatch();
    }
    // An operation whose failure made SQLite end the whole transaction (runNow) leaves nothing to commit.
    this.releaseLockIfEnded();
    const next = this.turns.shift();
    if (next) next();
    else this.busy = false;
    return failure;
  }

  /** Gives `shared`'s lock back once this connection's transaction has ended (committed, or rolled back by anyone). */
  private releaseLockIfEnded(): void {
    if (!this.holdsLock || this.db.inTransaction) return;
    this.holdsLock = false;
    this.shared!.lock.release();
  }

  private async runNow<T>(fn: () => Promise<T> | T): Promise<T> {
    if (!this.db.inTransaction) {
      if (this.shared && !this.holdsLock) {
        await this.shared.lock.acquire();
        this.holdsLock = true;
      }
      this.db.exec("BEGIN IMMEDIATE");
      this.opsInBatch = 0;
      if (this.shared?.commitEachTurn) this.scheduleFlush();
      else this.timer ??= setTimeout(() => this.flush(), this.maxDelayMs);
    }
    this.savepoint.begin.run();
    let result: T;
    try {
      result = await fn();
    } catch (error) {
      if (this.db.inTransaction) {
        this.savepoint.rollback.run();
        this.savepoint.release.run();
      } else {
        // Some failures (a full disk, an I/O error) make SQLite roll back the whole
        // transaction, not only this operation's savepoint: the batch's earlier operations
        // are gone, so whoever awaits their durability must hear it.
        this.fail(error);
      }
      throw error;
    }
    this.savepoint.release.run();
    if (++this.opsInBatch >= this.maxOps) {
      // This operation's caller cannot have called durable() yet, so if the commit fails
      // the failure must reach it here, or it would report a write the disk does not have.
      const failure = this.commitBatch();
      if (failure) throw failure.error;
    }
    return result;
  }

  /** Resolves once every operation run so far is committed to disk. */
  durable(): Promise<void> {
    if (this.broken) return Promise.reject(this.broken.error);
    if (!this.db.inTransaction) return this.logSynced();
    // While an fsync is in flight, a batch committed now would wait for the next one anyway: it stays open, taking
    // in more operations, and commits as that fsync completes (syncLog), one COMMIT where there would have been
    // several. Not while another thread may wait for the file: the batch commits at the next turn of the loop.
    if (this.syncing === undefined || this.shared) this.scheduleFlush();
    else this.flushScheduled = true;
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** Commits the open batch at the next turn of the event loop (unless a commit is already due by then). */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  /** Resolves once every batch committed so far is on disk: at once without a walSync (COMMIT synced it). */
  private logSynced(): Promise<void> {
    const walSync = this.walSync;
    if (!walSync || (this.syncing === undefined && !this.committedSinceSyncBegan)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject };
      // The fsync in flight covers everything committed before it began; a later commit needs the next one.
      const group = this.syncing !== undefined && !this.committedSinceSyncBegan ? this.syncing.at(-1) : this.unsynced.at(-1);
      if (group) group.waiters.push(waiter);
      else this.unsynced.push({ waiters: [waiter], operations: 0, startedAt: performance.now() });
      if (this.syncing === undefined) this.syncLog(walSync);
    });
  }

  /** Runs `fn` and resolves with its result once it is durable. */
  async runDurable<T>(fn: () => Promise<T> | T): Promise<T> {
    const result = await this.run(fn);
    await this.durable();
    return result;
  }

  /** Commits the open batch now, or as the running operation ends if one holds the turn. */
  flush(): void {
    if (this.busy) this.flushWhenIdle = true;
    else this.commitBatch();
  }

  /** Commits the open batch; on failure rolls it back, rejects its waiters and returns the error. */
  private commitBatch(): { error: unknown } | undefined {
    try {
      return this.commitOpenBatch();
    } finally {
      this.releaseLockIfEnded();
    }
  }

  private commitOpenBatch(): { error: unknown } | undefined {
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
    try {
      this.beforeCommit?.();
    } catch {
      // Not the commit's failure (see beforeCommit).
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
    const waiters = this.waiters;
    this.waiters = [];
    if (this.broken) {
      // Committed after an fsync failed: no fsync can vouch for it any more.
      for (const w of waiters) w.reject(this.broken.error);
      return undefined;
    }
    if (this.walSync) {
      this.committedSinceSyncBegan = true;
      if (waiters.length === 0) {
        this.onCommit?.({ operations: this.opsInBatch, waiters: 0, durationMs: performance.now() - startedAt });
        return undefined;
      }
      this.unsynced.push({ waiters, operations: this.opsInBatch, startedAt });
      if (this.syncing === undefined) this.syncLog(this.walSync);
      return undefined;
    }
    this.onCommit?.({ operations: this.opsInBatch, waiters: waiters.length, durationMs: performance.now() - startedAt });
    for (const w of waiters) w.resolve();
    return undefined;
  }

  /** Syncs the log for the batches committed so far, then answers their waiters; the batches committed meanwhile get the next fsync. */
  private syncLog(walSync: WalSync): void {
    const groups = this.unsynced;
    this.unsynced = [];
    this.syncing = groups;
    this.committedSinceSyncBegan = false;
    walSync.sync().then(
      () => {
        this.syncing = undefined;
        const syncedAt = performance.now();
        for (const group of groups) {
          this.onCommit?.({ operations: group.operations, waiters: group.waiters.length, durationMs: syncedAt - group.startedAt });
          for (const w of group.waiters) w.resolve();
        }
        if (this.broken) return;
        // The batch left open for this fsync's end (durable()) commits now, and its COMMIT starts the next fsync.
        if (this.flushScheduled) this.flush();
        if (this.unsynced.length > 0 && this.syncing === undefined) this.syncLog(walSync);
      },
      (cause: unknown) => {
        this.syncing = undefined;
        const error = new Error("the ledger's write-ahead log could not be synced to disk: nothing is acknowledged any more", { cause });
        this.broken = { error };
        const waiters = [...groups, ...this.unsynced].flatMap((group) => group.waiters);
        this.unsynced = [];
        this.waiters.push(...waiters);
        this.fail(error);
      },
    );
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
