import { RedisStore } from "rate-limit-redis";
import type { Store } from "express-rate-limit";
import type { Config } from "./config";
import type { ApiKeys } from "./identity/api-keys";
import type { SkillRegistry } from "./catalog/skills";
import { Leadership } from "./db/leader";
import type { Database } from "./db/sql";
import { Replicas } from "./db/postgres/replicas";
import { PostgresDatabase } from "./db/postgres/database";
import { createPostgresPool } from "./db/postgres/pool";
import { type Redis, openRedis } from "./db/redis";
import { InvalidationBus } from "./db/redis-bus";
import { RedisDailyCap, RedisRateLimiter } from "./gateway/redis-rate-limit";
import type { CountSince } from "./gateway/rate-limit";
import type { Ledger } from "./ledger/ledger";
import type { IdempotencyKeys } from "./gateway/idempotency";
import type { RateLimitName } from "./http/rate-limits";

/**
 * What a gateway shares with other replicas, and what only one of them runs (docs/design.md §11,
 * docs/scaling.md). On the embedded default (SQLite, no REDIS_URL) none of this exists: one process owns
 * everything. With DATABASE_URL the replica registers in the database (refused if another replica runs
 * and either lacks Redis), renews its heartbeat, and contends for the settlement lease; with REDIS_URL its
 * limits live in Redis and its caches listen for invalidations.
 */

/** Shared limits and invalidation, when REDIS_URL is set. */
export interface SharedState {
  /** The limits' connection (commands fail fast while Redis is down). */
  redis: Redis;
  limiter: RedisRateLimiter;
  dailyCap: RedisDailyCap;
  bus: InvalidationBus;
  /** A store of express-rate-limit (a request budget of the Express app: server/http/rate-limits.ts) in Redis. */
  rateLimitStore(limit: RateLimitName): Store;
  close(): Promise<void>;
}

export async function openSharedState(
  config: Config,
  countSince: CountSince,
  log: (message: string, error?: unknown) => void,
): Promise<SharedState> {
  const redis = await openRedis({
    url: config.redisUrl,
    name: `skill-gateway:${config.replicaId}:limits`,
    // The call path never waits for a Redis that is down: the call is refused (503) instead.
    failFast: true,
    commandTimeoutMs: 1_000,
    // Every call checks its limits here: the calls of one turn share a write.
    autoPipelining: true,
    onError: (error) => log("redis (limits)", error),
  });
  let bus: InvalidationBus;
  try {
    bus = await InvalidationBus.open({ url: config.redisUrl, onError: (error) => log("redis (invalidation bus)", error) });
  } catch (error) {
    redis.disconnect();
    throw error;
  }
  return {
    redis,
    limiter: new RedisRateLimiter(redis),
    dailyCap: new RedisDailyCap(redis, countSince),
    bus,
    rateLimitStore: (limit) =>
      new RedisStore({
        // Counted per key or session, or per address: the prefix says which.
        prefix: limit === "credential" ? "sg:credential:" : `sg:ip:${limit}:`,
        sendCommand: (command: string, ...args: string[]) => redis.call(command, ...args) as Promise<number>,
      }),
    async close() {
      await bus.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** Longer than any call can last (a skill's timeout is at most 300 s): a hold or key in progress longer is orphaned. */
const ORPHANED_AFTER_MS = 15 * 60_000;

/**
 * How long after its last heartbeat a replica counts as dead: its holds may then be released, and a replica
 * that finds itself declared dead stops. Generous (5 leases, at least 10 s): a live replica taken for dead
 * costs its calls in flight, while a dead one's holds waiting a few seconds more costs nothing but their
 * reservation.
 */
export function replicaDeadAfterMs(config: Config): number {
  return Math.max(5 * config.leaderLeaseMs, 10_000);
}

/**
 * This replica in the database's registry: joined at start, alive while it beats, gone at close. The
 * heartbeat has a connection of its own, so a replica whose pool is saturated by calls still says it lives.
 */
export class ReplicaMembership {
  private timer: NodeJS.Timeout | undefined;
  readonly registry: Replicas;

  private constructor(
    private readonly connection: PostgresDatabase,
    private readonly config: Config,
    private readonly onEvicted: (error: Error) => void,
    private readonly log: (message: string, error?: unknown) => void,
  ) {
    this.registry = new Replicas(connection, replicaDeadAfterMs(config));
  }

  /** Joins (or is refused: ReplicaRefusedError) and starts beating every leaderLeaseMs / 2. */
  static async join(
    config: Config,
    onEvicted: (error: Error) => void,
    log: (message: string, error?: unknown) => void,
  ): Promise<ReplicaMembership> {
    const connection = new PostgresDatabase(
      createPostgresPool({
        url: config.databaseUrl,
        applicationName: `skill-gateway:${config.replicaId}:registry`,
        max: 1,
        onIdleError: (error) => log("the replica registry's connection closed while idle", error),
      }),
    );
    const membership = new ReplicaMembership(connection, config, onEvicted, log);
    try {
      await membership.registry.join(config.replicaId, { redis: config.redisUrl !== "" });
    } catch (error) {
      await connection.close();
      throw error;
    }
    membership.timer = setInterval(() => void membership.beat(), Math.max(100, Math.floor(config.leaderLeaseMs / 2)));
    membership.timer.unref();
    return membership;
  }

  private async beat(): Promise<void> {
    try {
      if (!(await this.registry.heartbeat(this.config.replicaId))) {
        // Another replica found this one dead (a pause longer than the dead-after time) and may have released
        // its open holds: its calls in flight can no longer be captured. It stops rather than carry on.
        clearInterval(this.timer);
        this.onEvicted(new Error(`replica ${this.config.replicaId} was removed from the registry as dead`));
      }
    } catch (error) {
      this.log("the replica heartbeat failed; retrying", error);
    }
  }

  async leave(): Promise<void> {
    clearInterval(this.timer);
    await this.registry.leave(this.config.replicaId).catch((error) => this.log("leaving the replica registry failed", error));
    await this.connection.close();
  }
}

/**
 * What runs on exactly one replica: the deposit indexer, the settler, voucher expiry and the wallet sweeper
 * (`start`/`stop` of the money path and wallets), plus the release of holds and idempotency keys left open by
 * dead replicas. A PostgreSQL advisory-lock lease (./db/leader.ts) elects the replica; when the leader dies its
 * lock goes with its connection, and another replica takes over after the lease.
 */
export class SettlementLeadership {
  private readonly leadership: Leadership;
  private sweeper: NodeJS.Timeout | undefined;
  private leading = false;

  constructor(
    private readonly p: {
      config: Config;
      db: Database;
      ledger: Ledger;
      idempotency: IdempotencyKeys;
      membership: ReplicaMembership;
      /** Starts and stops the leader's loops (money path, wallet sweeper). */
      start(): void;
      stop(): Promise<void>;
      log: (message: string, error?: unknown) => void;
    },
  ) {
    const leaseMs = p.config.leaderLeaseMs;
    this.leadership = new Leadership({
      url: p.config.databaseUrl,
      key: "settlement",
      pollMs: Math.max(50, Math.floor(leaseMs / 3)),
      leaseMs,
      // server/devstack/cluster.ts finds the leader by this name.
      applicationName: `skill-gateway:${p.config.replicaId}:leader`,
      onElected: () => this.elected(),
      onLost: (reason) => {
        p.log("lost the settlement lease; stopping the leader's loops", reason);
        void this.demote();
      },
      onError: (error) => p.log("contending for the settlement lease", error),
    });
  }

  /** Whether this replica leads now. */
  get isLeader(): boolean {
    return this.leading && this.leadership.isLeader;
  }

  start(): void {
    this.leadership.start().catch((error) => this.p.log("contending for the settlement lease", error));
  }

  async stop(): Promise<void> {
    await this.leadership.stop();
    await this.demote();
  }

  private elected(): void {
    this.leading = true;
    this.p.log(`replica ${this.p.config.replicaId} leads settlement`);
    // Re-elected before the loops of its last term stopped: they start again once that stop is done.
    void this.stopping.then(() => {
      if (!this.leading) return;
      this.p.start();
      void this.releaseDeadReplicas();
      this.sweeper = setInterval(() => void this.releaseDeadReplicas(), this.p.config.leaderLeaseMs);
      this.sweeper.unref();
    });
  }

  /** The stop of the last term's loops, which a new term waits for. */
  private stopping: Promise<void> = Promise.resolve();

  private demote(): Promise<void> {
    if (!this.leading) return this.stopping;
    this.leading = false;
    clearInterval(this.sweeper);
    this.stopping = this.stopping.then(() => this.p.stop()).catch((error) => this.p.log("stopping the leader's loops failed", error));
    return this.stopping;
  }

  /**
   * Releases the open holds of replicas that stopped beating (and of holds naming no registered replica), and
   * removes those replicas, in one transaction; gives up the idempotency keys left in progress longer than
   * any call can take.
   */
  async releaseDeadReplicas(): Promise<{ replicas: string[]; holds: number; idempotencyKeys: number }> {
    try {
      const { replicas, holds } = await this.p.db.transaction(
        async (tx) => {
          const dead = await this.p.membership.registry.removeDead(tx);
          const orphaned = await this.p.membership.registry.orphanedHolders(tx);
          const replicas = [...new Set([...dead, ...orphaned])];
          const ofDead = replicas.length > 0 ? await this.p.ledger.recoverOpenHolds({ ofReplicas: replicas }, tx) : 0;
          // A call lasts at most its skill's timeout (<= 300 s) plus the request's own: a hold open longer, even on a
          // live replica, is one whose release failed with its call (the database unreachable at that moment).
          const stale = await this.p.ledger.recoverOpenHolds({ takenBefore: Date.now() - ORPHANED_AFTER_MS }, tx);
          return { replicas, holds: ofDead + stale };
        },
        { durable: true },
      );
      const idempotencyKeys = await this.p.idempotency.recoverInProgress({ before: Date.now() - ORPHANED_AFTER_MS });
      if (holds > 0 || idempotencyKeys > 0 || replicas.length > 0) {
        this.p.log(
          `released ${holds} hold(s) and ${idempotencyKeys} idempotency key(s) of stopped replicas (${replicas.join(", ") || "none"})`,
        );
      }
      return { replicas, holds, idempotencyKeys };
    } catch (error) {
      this.p.log("releasing the holds of stopped replicas failed; retrying", error);
      return { replicas: [], holds: 0, idempotencyKeys: 0 };
    }
  }
}

/**
 * With Redis: a key revoked or a skill changed here reaches the other replicas' caches within the message's flight;
 * their caches' time-to-live is the backstop when Redis is down.
 */
export function shareCacheChanges(
  shared: SharedState,
  keys: Pick<ApiKeys, "onRevoked" | "onChanged" | "forget" | "forgetAll">,
  skills: Pick<SkillRegistry, "onChanged" | "invalidate">,
  log: (message: string, error?: unknown) => void,
): void {
  const announce = (message: Parameters<typeof shared.bus.publish>[0]) =>
    shared.bus.publish(message).catch((error) => log(`announcing ${message.kind} to the other replicas failed`, error));
  keys.onRevoked = (keyId) => void announce({ kind: "key_revoked", keyId });
  keys.onChanged = (keyId) => void announce({ kind: "key_changed", keyId });
  skills.onChanged = (skillId) => void announce({ kind: "skill_changed", skillId });
  shared.bus.onMessage((message) => (message.kind === "skill_changed" ? skills.invalidate() : keys.forget(message.keyId)));
  shared.bus.onMissed(() => {
    keys.forgetAll();
    skills.invalidate();
  });
}
