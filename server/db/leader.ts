import { performance } from "node:perf_hooks";
import pg from "pg";
import { advisoryLockKey } from "./postgres/advisory";

/**
 * One leader among the gateway's replicas, for the work that must run once (the deposit indexer, the
 * settler, the wallet sweeper, voucher expiry): the replica holding a PostgreSQL session-level advisory lock
 * on a connection of its own. The lock lives exactly as long as that connection's server session, so a
 * replica that dies (its connection closes) or whose session is ended frees it, and PostgreSQL, not a clock
 * shared between machines, decides who holds it.
 *
 * Being elected and staying leader:
 * - A contender tries pg_try_advisory_lock every `pollMs` on its connection (reconnecting when needed).
 * - On getting it, it waits `leaseMs` before it calls onElected and isLeader turns true. The replica that held
 *   the lock before may not have heard yet that its session is gone (a paused process, a message in flight);
 *   it stops counting itself leader at most `leaseMs` after the last check it passed (below), and that check
 *   was sent before its session ended, so the two leaderships never overlap.
 * - The leader checks every `pollMs` that its session still holds the lock. isLeader is true only while the
 *   last check that passed was sent less than `leaseMs` ago (a monotonic clock): a leader whose checks stop
 *   coming back (server gone, network cut, process paused) stops counting itself leader on its own, before
 *   anyone else can be elected. A failed check, a lapsed lease or the connection's error ends the leadership
 *   at once: onLost is called, the connection closed (which frees the lock if the server still had it), and
 *   the replica goes back to contending, after a pause of `leaseMs`: a healthy replica (which tries every
 *   `pollMs`) takes over rather than the one that just failed.
 *
 * Takeover bound, once the leader's session has ended (the process died, its backend was terminated): at most
 * `pollMs` for a contender's next try, plus `leaseMs` of waiting, plus a round trip. A leader cut off by the
 * network ends its session only when the server notices: the lock connection's session asks for TCP
 * keepalives after max(5 s, 2 × leaseMs) idle, then 3 probes 1 s apart, and a TCP user timeout 2 s past that
 * (sessionSettings below). The server cannot free the lock sooner than that idle time after the last check it
 * received, which is longer than the cut-off leader's lease: it has stopped leading by then. With the defaults
 * (pollMs 1 s, leaseMs 3 s) such a takeover takes about 8 s plus the new leader's 3 s wait.
 */

export interface LeadershipOptions {
  /** postgres:// URL of the database the replicas share. The leadership opens its own connection. */
  url: string;
  /** The name of what is led (e.g. "settlement"); replicas with the same name compete for one lock. */
  key: string;
  /** How often a contender tries the lock and the leader checks it holds it. Default 1000 ms. */
  pollMs?: number;
  /**
   * How long a leader stays leader after its last passed check, and how long a new leader waits before
   * acting. More than pollMs plus a check's round trip; default 3 × pollMs.
   */
  leaseMs?: number;
  /** Called when this replica becomes leader (after the lease wait). */
  onElected?: () => void;
  /** Called when this replica stops being leader without being asked to (stop() does not call it). */
  onLost?: (reason: Error) => void;
  /** Told of connection failures while contending (the replica keeps trying). */
  onError?: (err: Error) => void;
  /** Shown in pg_stat_activity. */
  applicationName?: string;
}

type State = "stopped" | "contending" | "waiting" | "leading";

/**
 * The TCP settings of the lock connection's server session: the server notices a vanished leader no sooner
 * than twice its lease (see the class comment), and not much later either.
 */
function sessionSettings(leaseMs: number): string {
  const idleSec = Math.max(5, Math.ceil((2 * leaseMs) / 1000));
  const userTimeoutMs = (idleSec + 3 + 2) * 1000;
  return `SET tcp_keepalives_idle = ${idleSec}; SET tcp_keepalives_interval = 1; SET tcp_keepalives_count = 3; SET tcp_user_timeout = ${userTimeoutMs}`;
}

export class Leadership {
  private readonly url: string;
  private readonly lockKey: bigint;
  private readonly pollMs: number;
  private readonly leaseMs: number;
  private readonly options: LeadershipOptions;
  private state: State = "stopped";
  private client: pg.Client | undefined;
  /** Monotonic ms until which this replica may count itself leader (or, while waiting, may be elected). */
  private leaseUntilMs = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Fires when a leader's lease runs out, so onLost is not later than the lease even while a check hangs. */
  private lapseTimer: NodeJS.Timeout | undefined;
  /** The tick running now, so stop() can wait for it. */
  private running: Promise<void> | undefined;
  /** Monotonic ms before which a replica that lost leadership does not contend again. */
  private contendAfterMs = 0;
  /** Bumped on every connection change, so a late answer from an old connection is ignored. */
  private generation = 0;

  constructor(options: LeadershipOptions) {
    this.options = options;
    this.url = options.url;
    this.lockKey = advisoryLockKey(`skill-gateway:leader:${options.key}`);
    this.pollMs = options.pollMs ?? 1000;
    this.leaseMs = options.leaseMs ?? 3 * this.pollMs;
    if (!(this.pollMs > 0) || !(this.leaseMs > this.pollMs)) {
      throw new RangeError(`Leadership needs pollMs > 0 and leaseMs > pollMs (got pollMs ${this.pollMs}, leaseMs ${this.leaseMs})`);
    }
  }

  /** True while this replica leads: elected, and its last check of the lock passed less than leaseMs ago. */
  get isLeader(): boolean {
    return this.state === "leading" && performance.now() < this.leaseUntilMs;
  }

  /** The longest a takeover takes once the leader's session has ended, before a round trip. */
  get takeoverBoundMs(): number {
    return this.pollMs + this.leaseMs;
  }

  /** Starts contending; resolves after the first try (so a lone replica is waiting for its lease by then). */
  async start(): Promise<void> {
    if (this.state !== "stopped") return;
    this.state = "contending";
    await this.tick();
  }

  /** Stops leading or contending: the lock is released (its connection closed). Does not call onLost. */
  async stop(): Promise<void> {
    if (this.state === "stopped") return;
    this.state = "stopped";
    clearTimeout(this.timer);
    clearTimeout(this.lapseTimer);
    this.timer = undefined;
    // Closing first makes a check in flight fail now rather than when it times out.
    await this.closeClient();
    await this.running?.catch(() => {});
  }

  private schedule(): void {
    if (this.state === "stopped") return;
    clearTimeout(this.timer);
    // A replica waiting out its lease is elected as soon as the wait is over, not up to pollMs later.
    const delayMs = this.state === "waiting" ? Math.min(this.pollMs, Math.max(0, this.leaseUntilMs - performance.now())) : this.pollMs;
    this.timer = setTimeout(() => void this.tick(), delayMs);
  }

  private armLapseTimer(): void {
    clearTimeout(this.lapseTimer);
    this.lapseTimer = setTimeout(
      () => {
        if (this.state === "leading" && performance.now() >= this.leaseUntilMs) {
          void this.lose(new Error(`leadership lease lapsed: no check of the lock passed in ${this.leaseMs} ms`));
        }
      },
      Math.max(0, this.leaseUntilMs - performance.now()) + 1,
    );
  }

  private tick(): Promise<void> {
    const run = this.step().finally(() => {
      if (this.running === run) this.running = undefined;
      this.schedule();
    });
    this.running = run;
    return run;
  }

  private async step(): Promise<void> {
    if (this.state === "stopped") return;
    // A lapsed lease ends a leadership even if the check below would pass: a check that came back late
    // cannot extend a lease another replica may already be waiting out.
    if (this.state === "leading" && performance.now() >= this.leaseUntilMs) {
      await this.lose(new Error(`leadership lease lapsed: no check of the lock passed in ${this.leaseMs} ms`));
      return;
    }
    if (this.state === "contending" && performance.now() < this.contendAfterMs) return;
    try {
      if (this.state === "contending") await this.tryAcquire();
      else await this.check();
    } catch (err) {
      if (this.state === "leading") await this.lose(err as Error);
      else {
        if (this.state === "waiting") this.state = "contending";
        this.options.onError?.(err as Error);
        await this.closeClient();
      }
    }
  }

  private async connect(): Promise<pg.Client> {
    if (this.client !== undefined) return this.client;
    const generation = ++this.generation;
    const client = new pg.Client({
      connectionString: this.url,
      application_name: this.options.applicationName ?? `skill-gateway leader:${this.options.key}`,
      keepAlive: true,
      connectionTimeoutMillis: Math.max(this.pollMs, 1000),
      // A check that takes longer than the lease is no use: give up on it and on the connection.
      query_timeout: this.leaseMs,
    });
    // The server ending the session (pg_terminate_backend, a restart, the connection cut) arrives here, often
    // before the next check: a leader stops at once.
    client.on("error", (err) => void this.onConnectionLost(generation, err));
    client.on("end", () => void this.onConnectionLost(generation, new Error("the leadership connection closed")));
    this.client = client;
    try {
      await client.connect();
      await client.query(sessionSettings(this.leaseMs));
    } catch (err) {
      await this.closeClient();
      throw err;
    }
    return client;
  }

  private async onConnectionLost(generation: number, err: Error): Promise<void> {
    if (generation !== this.generation || this.state === "stopped") return;
    if (this.state === "leading") await this.lose(err);
    else {
      this.state = "contending";
      await this.closeClient();
    }
  }

  private async tryAcquire(): Promise<void> {
    const client = await this.connect();
    const { rows } = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1) AS locked", [this.lockKey]);
    if (!rows[0].locked || this.state !== "contending") return;
    // Ours from now on; usable only after a lease's wait (see the class comment), counted from the answer:
    // the lock was granted after the previous holder's session ended, so after its last check was sent.
    this.state = "waiting";
    this.leaseUntilMs = performance.now() + this.leaseMs;
  }

  /** Checks that this session still holds the lock; elects or extends the lease when it does. */
  private async check(): Promise<void> {
    const client = await this.connect();
    const sentAt = performance.now();
    // A one-BIGINT advisory lock shows in pg_locks as classid (high 32 bits), objid (low 32 bits), objsubid 1.
    // Asking by this session's pid also catches a connection pooler that swapped the session underneath.
    const unsigned = BigInt.asUintN(64, this.lockKey);
    const { rows } = await client.query<{ held: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
         AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1) AS held`,
      [unsigned >> 32n, unsigned & 0xffffffffn],
    );
    if (!rows[0].held) throw new Error("the leadership lock is no longer held by this session");
    const state = this.state as State;
    if (state === "waiting") {
      if (performance.now() < this.leaseUntilMs) return;
      this.state = "leading";
      this.leaseUntilMs = sentAt + this.leaseMs;
      this.armLapseTimer();
      this.options.onElected?.();
    } else if (state === "leading") {
      this.leaseUntilMs = Math.max(this.leaseUntilMs, sentAt + this.leaseMs);
      this.armLapseTimer();
    }
  }

  private async lose(reason: Error): Promise<void> {
    if (this.state !== "leading") return;
    this.state = "contending";
    this.leaseUntilMs = 0;
    this.contendAfterMs = performance.now() + this.leaseMs;
    clearTimeout(this.lapseTimer);
    await this.closeClient();
    this.options.onLost?.(reason);
  }

  private async closeClient(): Promise<void> {
    const client = this.client;
    if (client === undefined) return;
    this.client = undefined;
    this.generation++;
    await client.end().catch(() => {});
  }
}
