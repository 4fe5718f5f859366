import type { PublicClient } from "viem";
import type { LoopHealth } from "../chain/retry-loop";
import type { Database } from "../db/sql";

/**
 * Readiness (GET /readyz): whether this gateway should be sent traffic and trusted with money
 * now. /healthz only says the process answers; this says the parts behind it work:
 *
 *   ledger    a real (empty) transaction commits durably (SQLite's group commit, or PostgreSQL)
 *   redis     with REDIS_URL: Redis answers PING within chainTimeoutMs (the shared limits live there)
 *   chain     the chain's JSON-RPC answers eth_blockNumber within chainTimeoutMs
 *   indexer   the deposit indexer has not halted, and its last successful poll is recent
 *   settler   the settler has not halted, and its last successful step is recent
 *
 * "Recent" is maxLagMs (READY_MAX_LAG_MS). A loop that was never started (a gateway run
 * without its money path's loops, in tests or by a script) is reported as such, not as a fault, and
 * so is one stopped on purpose: a replica that led settlement and lost the lease (to a database that
 * stopped answering for longer than it) runs its loops no more, and serves calls as a follower.
 *
 * The details are for anyone who asks (a load balancer, a person), so they name what failed,
 * never the internals: a SQLite or RPC error, a halted settler's reason, go to `log` instead.
 */

export interface ReadinessCheck {
  ok: boolean;
  detail: string;
}

export interface Readiness {
  ready: boolean;
  checks: Record<string, ReadinessCheck>;
}

export interface ReadinessDeps {
  database: Database;
  /** With REDIS_URL: the connection of the shared limits. */
  redis?: { ping(): Promise<unknown> };
  publicClient?: PublicClient;
  indexer?: { health: LoopHealth };
  settler?: { health: LoopHealth };
  maxLagMs: number;
  chainTimeoutMs?: number;
  now?: () => number;
  /** Told the internal reason of each failing check. */
  log?: (message: string, error?: unknown) => void;
}

export async function checkReadiness(deps: ReadinessDeps): Promise<Readiness> {
  const now = deps.now?.() ?? Date.now();
  const log = deps.log ?? (() => {});
  const timeoutMs = deps.chainTimeoutMs ?? 3_000;
  const [ledger, chain, redis] = await Promise.all([
    checkLedger(deps.database, log),
    checkChain(deps.publicClient, timeoutMs, log),
    deps.redis ? checkRedis(deps.redis, timeoutMs, log) : undefined,
  ]);
  const checks: Record<string, ReadinessCheck> = { ledger };
  if (redis) checks.redis = redis;
  if (chain) checks.chain = chain;
  if (deps.indexer) checks.indexer = checkLoop("deposit indexer", deps.indexer.health, deps.maxLagMs, now, log);
  if (deps.settler) checks.settler = checkLoop("settler", deps.settler.health, deps.maxLagMs, now, log);
  return { ready: Object.values(checks).every((check) => check.ok), checks };
}

async function checkLedger(database: Database, log: NonNullable<ReadinessDeps["log"]>): Promise<ReadinessCheck> {
  try {
    await database.transaction(async () => undefined, { durable: true });
    return { ok: true, detail: "commits" };
  } catch (error) {
    log("readiness: the ledger cannot commit", error);
    return { ok: false, detail: "cannot commit" };
  }
}

async function checkRedis(
  redis: NonNullable<ReadinessDeps["redis"]>,
  timeoutMs: number,
  log: NonNullable<ReadinessDeps["log"]>,
): Promise<ReadinessCheck> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([redis.ping(), timeout]);
    return { ok: true, detail: "answers" };
  } catch (error) {
    log("readiness: Redis does not answer", error);
    return { ok: false, detail: "unreachable" };
  } finally {
    clearTimeout(timer);
  }
}

async function checkChain(
  client: PublicClient | undefined,
  timeoutMs: number,
  log: NonNullable<ReadinessDeps["log"]>,
): Promise<ReadinessCheck | undefined> {
  if (!client) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    const block = await Promise.race([client.getBlockNumber({ cacheTime: 0 }), timeout]);
    return { ok: true, detail: `block ${block}` };
  } catch (error) {
    log("readiness: the chain's RPC did not answer", error);
    return { ok: false, detail: `unreachable (no block number within ${timeoutMs} ms)` };
  } finally {
    clearTimeout(timer);
  }
}

function checkLoop(
  name: string,
  health: LoopHealth,
  maxLagMs: number,
  now: number,
  log: NonNullable<ReadinessDeps["log"]>,
): ReadinessCheck {
  if (health.fatal !== undefined) {
    log(`readiness: the ${name} has halted: ${health.fatal}`);
    return { ok: false, detail: `${name} halted (see the gateway's log)` };
  }
  if (!health.started) return { ok: true, detail: "not started in this process" };
  if (health.stoppedOnRequest) return { ok: true, detail: "stopped: not run by this process now" };
  if (!health.running) return { ok: false, detail: `${name} stopped` };
  const since = health.lastSuccessAtMs ?? health.startedAtMs ?? now;
  const lagMs = now - since;
  if (lagMs > maxLagMs) {
    return {
      ok: false,
      detail: `${name} lags: no successful step for ${Math.round(lagMs / 1000)} s (${health.failures} failures in a row; bound ${Math.round(maxLagMs / 1000)} s)`,
    };
  }
  return { ok: true, detail: health.lastSuccessAtMs ? `last step ${Math.round(lagMs / 1000)} s ago` : "starting" };
}
