import type { Sql } from "../sql";
import { advisoryLockKey } from "./advisory";

/**
 * The gateway replicas sharing one PostgreSQL database (table gateway_replicas, migration 0002). Each replica
 * joins at start, renews its heartbeat while it runs, and leaves when it stops; the database's own clock times
 * them all, so replicas whose clocks disagree still agree on who is alive.
 *
 * Two things depend on it:
 * - a second replica is refused unless every replica shares its limits and caches through Redis (REDIS_URL):
 *   without it, "100 calls a minute per key" would be 100 per replica, and a revoked key would live on in the
 *   others' caches;
 * - a hold left open by a replica that died is released (Ledger.recoverOpenHolds({ ofReplicas })), and only
 *   then: a live replica's call may still capture its hold.
 */

/** Serializes joins, so two replicas starting together cannot both find themselves alone. */
const JOIN_LOCK = advisoryLockKey("skill-gateway:replicas-join");

/** The database's clock in ms since the epoch (clock_timestamp: the time now, not the transaction's start). */
const NOW_MS = "CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)";

export class ReplicaRefusedError extends Error {
  override name = "ReplicaRefusedError";
}

export interface ReplicaRow {
  id: string;
  startedAt: bigint;
  heartbeatAt: bigint;
  redis: boolean;
}

export class Replicas {
  constructor(
    private readonly db: { transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> } & Sql,
    /** A replica whose heartbeat is older than this is dead. */
    private readonly deadAfterMs: number,
  ) {}

  /**
   * Registers replica `id`. Refused (ReplicaRefusedError) when another live replica runs and either of the two
   * has no Redis, or when a live replica already has this id.
   */
  async join(id: string, options: { redis: boolean }): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.run("SELECT pg_advisory_xact_lock(?)", [JOIN_LOCK]);
      const others = await this.live(tx);
      if (others.some((r) => r.id === id)) {
        throw new ReplicaRefusedError(`a live gateway replica is already named "${id}": give each replica its own REPLICA_ID`);
      }
      if (others.length > 0 && (!options.redis || others.some((r) => !r.redis))) {
        const names = others.map((r) => `"${r.id}"${r.redis ? "" : " (without Redis)"}`).join(", ");
        throw new ReplicaRefusedError(
          `another gateway replica runs on this database (${names}). Several replicas must share their rate limits, ` +
            `daily caps and caches: set REDIS_URL on every replica (or stop the other one).`,
        );
      }
      await tx.run(
        `INSERT INTO gateway_replicas (id, started_at, heartbeat_at, redis) VALUES (?, ${NOW_MS}, ${NOW_MS}, ?)
         ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, redis = excluded.redis`,
        [id, options.redis ? 1 : 0],
      );
    });
  }

  /** Says replica `id` is alive; false when its row is gone (another replica found it dead), so it must stop. */
  async heartbeat(id: string): Promise<boolean> {
    return (await this.db.run(`UPDATE gateway_replicas SET heartbeat_at = ${NOW_MS} WHERE id = ?`, [id])) === 1;
  }

  async leave(id: string): Promise<void> {
    await this.db.run("DELETE FROM gateway_replicas WHERE id = ?", [id]);
  }

  /** The replicas alive now (heartbeat within deadAfterMs), oldest first. */
  async live(sql: Sql = this.db): Promise<ReplicaRow[]> {
    const rows = await sql.all<{ id: string; started_at: bigint; heartbeat_at: bigint; redis: bigint }>(
      `SELECT id, started_at, heartbeat_at, redis FROM gateway_replicas WHERE heartbeat_at > ${NOW_MS} - ? ORDER BY started_at, id`,
      [this.deadAfterMs],
    );
    return rows.map((r) => ({ id: r.id, startedAt: r.started_at, heartbeatAt: r.heartbeat_at, redis: r.redis === 1n }));
  }

  /**
   * Removes the replicas that stopped renewing their heartbeat, and returns their ids, in the caller's
   * transaction: the caller releases their open holds in the same one (Ledger.recoverOpenHolds).
   */
  async removeDead(tx: Sql): Promise<string[]> {
    const rows = await tx.all<{ id: string }>(`DELETE FROM gateway_replicas WHERE heartbeat_at <= ${NOW_MS} - ? RETURNING id`, [
      this.deadAfterMs,
    ]);
    return rows.map((r) => r.id).sort();
  }

  /** Ids named by open holds that belong to no registered replica (a replica removed, or one that never registered). */
  async orphanedHolders(tx: Sql): Promise<string[]> {
    const rows = await tx.all<{ replica_id: string }>(
      `SELECT DISTINCT h.replica_id FROM holds h
       WHERE h.status = 'open' AND h.replica_id IS NOT NULL
         AND NOT EXISTS (SELECT 1 FROM gateway_replicas r WHERE r.id = h.replica_id)
       ORDER BY h.replica_id`,
    );
    return rows.map((r) => r.replica_id);
  }
}
