/**
 * The right to write to one SQLite file, shared by the threads that hold a connection to it (the event loop's group
 * commit and the ledger writer's: server/gateway/ledger-writer.ts). SQLite lets one connection write at a time and makes the
 * others wait in its busy handler, which sleeps on the thread that asked: on the event loop that would stop every
 * request for as long as the other thread's batch stays open. So a connection takes this lock before its BEGIN
 * IMMEDIATE and gives it back once its transaction has ended, and SQLite never finds the file locked by the other.
 *
 * A ticket lock over two 32-bit counters in shared memory (the next ticket, the ticket served): first come, first
 * served, so neither thread starves the other. The event loop waits for its turn without blocking (Atomics.waitAsync);
 * a worker thread, which has nothing else to do meanwhile, blocks (Atomics.wait). Whoever holds the lock sees when
 * another waits (`contended`) and ends its batch early for it.
 *
 * A thread that dies holding the lock (or holding a ticket) would leave the other waiting for ever: the owner of the
 * writer thread treats its death as the end of the gateway (as a failed commit is), and once the thread has stopped
 * `abandon`s the lock, which from then on lets the survivor in at once (no other writer is left), so that it can
 * still close its books.
 */
export class WriterLock {
  /** [0]: the next ticket to hand out; [1]: the ticket whose holder may write; [2]: 1 once abandoned. */
  private readonly counters: Int32Array;

  constructor(
    /** The shared memory another thread's WriterLock was built on (`buffer`); a new lock without it. */
    readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(12),
  ) {
    this.counters = new Int32Array(buffer);
  }

  /** Takes the lock, waiting for the tickets before this one without blocking the thread. */
  async acquire(): Promise<void> {
    const ticket = Atomics.add(this.counters, NEXT, 1);
    for (;;) {
      const serving = Atomics.load(this.counters, SERVING);
      if (serving === ticket || this.abandoned) return;
      const wait = waitAsync(this.counters, SERVING, serving);
      if (wait.async) await wait.value;
    }
  }

  /** Takes the lock, blocking the thread until its turn (a worker thread's; never the event loop's). */
  acquireBlocking(): void {
    const ticket = Atomics.add(this.counters, NEXT, 1);
    for (;;) {
      const serving = Atomics.load(this.counters, SERVING);
      if (serving === ticket || this.abandoned) return;
      Atomics.wait(this.counters, SERVING, serving);
    }
  }

  /** Gives the lock to the next ticket. Only its holder calls this, once per acquire. */
  release(): void {
    Atomics.add(this.counters, SERVING, 1);
    Atomics.notify(this.counters, SERVING);
  }

  /**
   * The other thread has stopped for good (it may have died holding the lock or a ticket): whoever waits, and whoever
   * asks from now on, gets in at once.
   */
  abandon(): void {
    Atomics.store(this.counters, ABANDONED, 1);
    // Wakes the waiters, whose loop then sees the flag.
    Atomics.add(this.counters, SERVING, 1);
    Atomics.notify(this.counters, SERVING);
  }

  private get abandoned(): boolean {
    return Atomics.load(this.counters, ABANDONED) === 1;
  }

  /** Whether a thread waits for the lock (asked by its holder, which then ends its batch sooner). */
  get contended(): boolean {
    if (this.abandoned) return false;
    // Tickets handed out beyond the holder's; the counters wrap together, so their difference is read as an int32.
    return ((Atomics.load(this.counters, NEXT) - Atomics.load(this.counters, SERVING)) | 0) > 1;
  }
}

const NEXT = 0;
const SERVING = 1;
const ABANDONED = 2;

/** Atomics.waitAsync (Node 16 and later), which the TypeScript library this project targets does not declare. */
const waitAsync = (
  Atomics as unknown as { waitAsync(array: Int32Array, index: number, value: number): { async: boolean; value: unknown } }
).waitAsync.bind(Atomics);
