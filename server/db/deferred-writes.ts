import { isDatabaseUnavailable } from "./sql";

/**
 * A write kept for later. It may say `not_yet`: what it undoes is not there (yet), e.g. a hold whose own COMMIT was
 * sent to the database before it stopped answering, and which the server may still commit once it reads again.
 */
export type DeferredWrite = () => Promise<"done" | "not_yet" | void>;

/** How long a write that says `not_yet` is tried again once the database answers: longer than a COMMIT waits in a socket. */
export const NOT_YET_PATIENCE_MS = 10_000;

/**
 * Writes that must happen but that the database did not take when they were due, because it did not answer
 * (`database_unavailable`): a call's hold to release, its idempotency key to give up. Each is tried again every
 * `retryMs` until the database takes it. A write kept here is idempotent and harmless when something else got there
 * first (a release of a hold that was captured after all changes nothing).
 *
 * They live in this process only: if it dies first, what a dead replica leaves is the settlement leader's to release
 * (server/replication.ts), and a single gateway's next start releases every open hold; and a write still `not_yet`
 * NOT_YET_PATIENCE_MS after the database answered is dropped, for the leader's sweep of what is older than any call
 * (a hold, an idempotency key) to end.
 */
export class DeferredWrites {
  private readonly pending = new Map<string, { write: DeferredWrite; answeredAtMs?: number }>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<number> | undefined;
  private closed = false;

  constructor(
    private readonly options: {
      /** How long between attempts; 250 ms by default. */
      retryMs?: number;
      /** Told about a write that failed otherwise than by the database not answering: it is not tried again. */
      log?: (message: string, error?: unknown) => void;
    } = {},
  ) {}

  /** How many writes wait. */
  get size(): number {
    return this.pending.size;
  }

  /** Keeps `write` under `key` (a later one under the same key replaces it) and tries it at the next attempt. */
  defer(key: string, write: DeferredWrite): void {
    if (this.closed) return;
    this.pending.set(key, { write });
    this.schedule();
  }

  /** Tries every waiting write once, now; resolves with how many still wait. */
  flush(): Promise<number> {
    this.flushing ??= this.attempt().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  /** Stops trying; what still waits is left to the recoveries named above. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush().then((left) => {
        if (left > 0) this.schedule();
      });
    }, this.options.retryMs ?? 250);
    this.timer.unref();
  }

  private async attempt(): Promise<number> {
    for (const [key, entry] of [...this.pending]) {
      if (this.closed) break;
      try {
        if ((await entry.write()) === "not_yet") {
          entry.answeredAtMs ??= Date.now();
          if (Date.now() - entry.answeredAtMs < NOT_YET_PATIENCE_MS) continue;
        }
      } catch (error) {
        // The database still does not answer: the rest would fail the same way.
        if (isDatabaseUnavailable(error)) break;
        this.options.log?.(`a deferred write (${key}) failed; it is not tried again`, error);
      }
      // Taken, failed for good, or past its patience; unless a newer write replaced it meanwhile.
      if (this.pending.get(key) === entry) this.pending.delete(key);
    }
    return this.pending.size;
  }
}
