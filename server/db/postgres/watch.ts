import pg from "pg";
import { type DatabaseUnavailableError, databaseUnavailable, isDatabaseUnavailable } from "../sql";

/**
 * Whether this replica's PostgreSQL answers, and the error every database operation fails with when it does not.
 *
 * A server that is down refuses connections at once, but one that has stopped answering (paused, swapping, cut off
 * behind a silent network) leaves each query waiting for ever: the server's own statement and lock timeouts do not run
 * while it is stopped, and the pool's connection timeout covers only the wait for a connection. A call would hang for
 * as long as the server does. So a watch pings the server every `intervalMs` on a connection of its own, and a ping
 * unanswered for `timeoutMs` marks the database unavailable: the operations waiting on it fail at once with 503
 * `database_unavailable` (their connections are given up, so the server rolls their transactions back when it reads
 * again), and every new one fails at once until a probe (a new connection and a `SELECT 1`) is answered.
 *
 * Only the pings decide, never the length of the gateway's own queries: a long query on a server that answers is left
 * alone (the server's statement_timeout bounds it). And a ping is late, not lost, while the server answers the
 * gateway's other operations: a server busy enough to keep one ping waiting (a loaded machine, a checkpoint) is still
 * serving, and failing every call at once would turn its slowness into an outage. The database is unavailable when
 * nothing sent to it, the ping included, has been answered for `timeoutMs`: what a stopped server looks like.
 */

export interface PostgresWatchOptions {
  url: string;
  /** Shown in pg_stat_activity for the watch's own connection. */
  applicationName: string;
  /** A ping (a `SELECT 1` on the watch's open connection) unanswered this long makes the database unavailable. */
  timeoutMs: number;
  /**
   * How long opening the watch's connection may take (a fork and an authentication on the server) before the database
   * counts as unavailable; CONNECT_TIMEOUT_MS by default, never less than timeoutMs. While the database is unavailable,
   * the probe's connection waits this long, so a server that comes back is found as soon as it accepts it.
   */
  connectTimeoutMs?: number;
  /** How long between pings while the database answers, and between probes while it does not; timeoutMs / 2 by default. */
  intervalMs?: number;
  /** Told when the database becomes unavailable, and when it answers again. */
  log?: (message: string, error?: unknown) => void;
}

/** Errors of a Node socket that mean the server cannot be reached. */
const SOCKET_FAILURES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);
/**
 * SQLSTATEs of a server that cannot serve: a broken connection (class 08), an operator's or a crash's shutdown
 * (57P01, 57P02), a server still starting (57P03), no connection slot left (53300).
 */
const SERVER_UNAVAILABLE = /^(08...|57P01|57P02|57P03|53300)$/;
/** What pg and pg-pool say, without a code, when a connection breaks or cannot be made in time. */
const DRIVER_FAILURES =
  /^(Connection terminated( unexpectedly| due to connection timeout)?|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error and is not queryable)$/;

/**
 * Whether `error` says the database could not be reached or lost the connection (as opposed to refusing a statement:
 * a constraint, a serialization failure, a statement or lock timeout of a server that answers).
 */
export function isConnectionFailure(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (isDatabaseUnavailable(error)) return true;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && (SOCKET_FAILURES.has(code) || SERVER_UNAVAILABLE.test(code))) return true;
  return DRIVER_FAILURES.test(error.message);
}

/**
 * `error` as the gateway reports it: a connection failure becomes `database_unavailable` (saying whether what was sent
 * may have committed); anything else is kept.
 */
export function asDatabaseError(error: unknown, mayHaveCommitted: boolean): unknown {
  if (!isConnectionFailure(error)) return error;
  if (isDatabaseUnavailable(error) && error.mayHaveCommitted === mayHaveCommitted) return error;
  return databaseUnavailable(isDatabaseUnavailable(error) ? error.cause : error, { mayHaveCommitted });
}

/** The watch's answer to "is the database there?", for the operations it guards. */
export interface DatabaseGuard {
  /** Throws `database_unavailable` at once while the database is unavailable. */
  check(): void;
  /** `work`, or `database_unavailable` as soon as the database is found unavailable while it waits. */
  guard<T>(work: Promise<T>): Promise<T>;
}

/** A guard that never intervenes: a database without a watch (tests that open a pool of their own). */
export const UNWATCHED: DatabaseGuard = {
  check() {},
  guard: (work) => work,
};

/** The default of PostgresWatchOptions.connectTimeoutMs: the pool's own connection timeout (./pool.ts). */
export const CONNECT_TIMEOUT_MS = 5_000;

export class PostgresWatch implements DatabaseGuard {
  private readonly intervalMs: number;
  private readonly connectTimeoutMs: number;
  /** Why the database is unavailable, and since when; undefined while it answers. */
  private outage: { sinceMs: number; error: DatabaseUnavailableError } | undefined;
  /** The operations waiting now: each fails when the database is found unavailable. */
  private readonly waiting = new Set<(error: DatabaseUnavailableError) => void>();
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  /** When (performance.now()) the server last answered one of the operations guarded: a ping waits while it answers. */
  private lastAnswerMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: PostgresWatchOptions) {
    this.intervalMs = options.intervalMs ?? Math.max(10, Math.floor(options.timeoutMs / 2));
    this.connectTimeoutMs = Math.max(options.timeoutMs, options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS);
  }

  /** Whether the last ping or probe was answered. */
  get available(): boolean {
    return this.outage === undefined;
  }

  /** Since when (ms since the epoch) the database has been unavailable, or undefined. */
  get unavailableSinceMs(): number | undefined {
    return this.outage?.sinceMs;
  }

  check(): void {
    if (this.outage) throw databaseUnavailable(this.outage.error.cause);
  }

  guard<T>(work: Promise<T>): Promise<T> {
    if (this.outage) {
      // Whatever it comes to is nobody's now; it must not be an unhandled rejection.
      work.catch(() => {});
      return Promise.reject(databaseUnavailable(this.outage.error.cause));
    }
    return new Promise<T>((resolve, reject) => {
      const fail = (error: DatabaseUnavailableError) => reject(error);
      this.waiting.add(fail);
      work.then(
        (value) => {
          this.heard();
          this.waiting.delete(fail);
          resolve(value);
        },
        (error: unknown) => {
          // A statement the server refused was answered; a broken connection was not.
          if (!isConnectionFailure(error)) this.heard();
          this.waiting.delete(fail);
          reject(error);
        },
      );
    });
  }

  /** Starts pinging; the first ping is answered (or not) before this resolves. */
  async start(): Promise<void> {
    await this.step();
  }

  /** Stops pinging and closes the watch's connection. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    const closed = this.dropClient();
    // An unavailable server may never say goodbye, nor finish accepting a probe: waiting would hang the gateway's close.
    if (!this.available) return;
    await this.running?.catch(() => {});
    await closed;
  }

  /** One ping (or, while unavailable, one probe), then the next after intervalMs. */
  private async step(): Promise<void> {
    if (this.stopped) return;
    this.running = this.ping().then((failure) => {
      // A ping cut short by stop() says nothing about the server.
      if (this.stopped) return;
      if (failure === undefined) this.answered();
      else this.unanswered(failure);
    });
    await this.running;
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.step(), this.intervalMs);
    this.timer.unref();
  }

  /**
   * SELECT 1 on the watch's connection, opened first if there is none: undefined when the server answered in time,
   * else why not. A connection that failed, or that the server left unanswered, is not used again; one found broken
   * (closed while idle: a server restarted, a backend terminated) is replaced at once, and only the new one's answer
   * counts.
   */
  private async ping(): Promise<Error | undefined> {
    const reused = this.client !== undefined;
    const failure = await this.pingOnce();
    if (failure === undefined || !reused || failure instanceof PingTimeout) return failure;
    return this.pingOnce();
  }

  private async pingOnce(): Promise<Error | undefined> {
    let client = this.client;
    if (!client) {
      client = new pg.Client({
        connectionString: this.options.url,
        application_name: this.options.applicationName,
        connectionTimeoutMillis: this.connectTimeoutMs,
        keepAlive: true,
      });
      // A connection broken while idle says so here; the next ping finds it broken.
      client.on("error", () => {});
      this.client = client;
      const connected = await within(client.connect(), this.connectTimeoutMs);
      if (connected !== "answered") {
        this.dropClient();
        return connected === "timed_out"
          ? new PingTimeout(`PostgreSQL did not accept a connection within ${this.connectTimeoutMs} ms`)
          : connected;
      }
    }
    const startedAtMs = Date.now();
    const answer = await this.pingAnswer(client.query("SELECT 1"));
    if (answer === "answered") return undefined;
    this.dropClient();
    return answer === "timed_out"
      ? new PingTimeout(
          `PostgreSQL answered neither a ping nor anything else for ${this.options.timeoutMs} ms (ping sent ${Date.now() - startedAtMs} ms ago)`,
        )
      : answer;
  }

  /**
   * How the ping `work` ends: "timed_out" only once neither it nor any guarded operation has been answered for
   * timeoutMs. While other operations are answered the server is busy, not stopped, and the ping is waited for.
   */
  private async pingAnswer(work: Promise<unknown>): Promise<"answered" | "timed_out" | Error> {
    const sentMs = performance.now();
    let waitMs = this.options.timeoutMs;
    for (;;) {
      const answer = await within(work, waitMs);
      if (answer !== "timed_out" || this.stopped) return answer;
      const silentMs = performance.now() - Math.max(sentMs, this.lastAnswerMs);
      if (silentMs >= this.options.timeoutMs) return "timed_out";
      waitMs = Math.max(1, this.options.timeoutMs - silentMs);
    }
  }

  private heard(): void {
    this.lastAnswerMs = performance.now();
  }

  private answered(): void {
    if (!this.outage) return;
    const downMs = Date.now() - this.outage.sinceMs;
    this.outage = undefined;
    this.options.log?.(`PostgreSQL answers again after ${downMs} ms unavailable`);
  }

  private unanswered(failure: Error): void {
    if (this.outage) return;
    this.outage = { sinceMs: Date.now(), error: databaseUnavailable(failure) };
    this.options.log?.("PostgreSQL does not answer: database operations fail with database_unavailable until it does", failure);
    const waiting = [...this.waiting];
    this.waiting.clear();
    for (const fail of waiting) fail(databaseUnavailable(failure));
  }

  /**
   * Closes the watch's connection; the promise says when it is closed. With a query waiting, end() destroys the socket
   * at once; a connection still opening is closed when the server next reads, so nobody waits for that.
   */
  private dropClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    return client?.end().catch(() => {}) ?? Promise.resolve();
  }
}

/** A ping or a connection the server left unanswered (as opposed to one it refused or broke). */
class PingTimeout extends Error {
  override name = "PingTimeout";
}

/**
 * Whether `work` settles within `timeoutMs`: "answered", its error, or "timed_out". A timer that fires late because
 * the event loop was busy does not count an answer already in the socket as missing: the decision waits for the
 * loop's next I/O phase, where that answer is read.
 */
async function within(work: Promise<unknown>, timeoutMs: number): Promise<"answered" | "timed_out" | Error> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"timed_out">((resolve) => {
    timer = setTimeout(() => setImmediate(() => resolve("timed_out")), timeoutMs);
  });
  try {
    return await Promise.race([
      work.then(
        () => "answered" as const,
        (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
