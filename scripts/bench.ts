/**
 * The call-path benchmark (`npm run bench`). In one run, against the same local backend,
 * at 50 concurrent connections, it measures:
 *   1. the backend called directly,
 *   2. a bare Node HTTP proxy in front of it (the baseline),
 *   3. the gateway: auth, rate limit, hold, forward, capture, with every charge durable
 *      (SQLite synchronous=FULL) before its response is sent.
 *      Each request's JSON log line is written (asynchronously) to a file beside the ledger, as in production.
 *   4. the gateway on PostgreSQL (DATABASE_URL) with its limits in Redis (REDIS_URL): one replica,
 *   5. then two replicas sharing the load (the connections split between them), on one database and one Redis,
 *      every charge durable (synchronous_commit on) before its 200; a throwaway PostgreSQL 15 and Redis
 *      (Debian's binaries, as the tests use them) are started for the run, and these rows are skipped, saying
 *      so, when the binaries are absent.
 * It prints throughput, latency percentiles, the gateway's throughput as a ratio of the
 * bare proxy's, the latency the gateway adds, and on PostgreSQL the database round trips and
 * transactions per call. Each server runs in its own process (./bench/servers.ts); the load generator
 * (undici, one request in flight per connection, ./bench/common.ts) runs in this one.
 *
 *   BENCH_SECONDS (default 8)  BENCH_CONNECTIONS (default 50)  BENCH_PROFILE (a folder)  BENCH_POSTGRES=0 (skip 4, 5)
 */
import { postgresUnavailableReason, startPostgres } from "../server/devstack/postgres-server";
import { redisServerBinary, startRedisServer } from "../server/devstack/redis-server";
import { CONNECTIONS, type Run, SECONDS, type Started, WARMUP_MS, ask, load, start, stopAll } from "./bench/common";
import type { GatewaySpec } from "./bench/servers";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";

/** Starts a gateway child (./bench/servers.ts). */
const startGateway = (spec: GatewaySpec) => start("gateway", JSON.stringify(spec));

/** What the PostgreSQL scenarios measured, and what they say about it. */
interface PostgresRuns {
  rows: Run[];
  notes: string[];
}

/**
 * The gateway on PostgreSQL with its limits in Redis: one replica, then two sharing the load, each on a fresh
 * database of one throwaway server. Skipped (with a note) without the binaries or with BENCH_POSTGRES=0.
 */
async function postgresRuns(backendUrl: string, input: string, dir: string, children: ChildProcess[]): Promise<PostgresRuns> {
  const missing =
    process.env.BENCH_POSTGRES === "0"
      ? "BENCH_POSTGRES=0"
      : (postgresUnavailableReason() ?? (redisServerBinary() ? null : "redis-server is not installed"));
  if (missing) return { rows: [], notes: [`PostgreSQL scenarios skipped: ${missing}`] };
  const server = await startPostgres({ database: "bench_one" });
  const redis = await startRedisServer();
  const body = JSON.stringify({ skill_id: "echo", input: JSON.parse(input) });
  const fmt = (n: number, d = 2) => n.toFixed(d);
  try {
    const rows: Run[] = [];
    const notes: string[] = [];
    for (const replicas of [1, 2]) {
      const database = `bench_${replicas}`;
      await server.createDatabase(database);
      const url = server.urlFor(database);
      const started: Started[] = [];
      const spec = { backendUrl, databaseUrl: url, redisUrl: redis.url };
      const first = await startGateway({ ...spec, dbPath: path.join(dir, `unused-${replicas}.db`), replicaId: "bench-1" });
      started.push(first);
      for (let i = 2; i <= replicas; i++)
        started.push(
          await startGateway({ ...spec, dbPath: path.join(dir, "unused.db"), replicaId: `bench-${i}`, seededKey: first.msg.key }),
        );
      for (const s of started) children.push(s.child);
      let before: { statements: number; transactions: number }[] = [];
      let walBefore = 0n;
      const run = await load(
        `gateway on PostgreSQL + Redis, ${replicas} replica${replicas === 1 ? "" : "s"} (durable charges)`,
        started.map((s) => `${s.msg.url}/v1/call`),
        body,
        { authorization: `Bearer ${first.msg.key}` },
        {
          beforeMeasure: async () => {
            before = await Promise.all(started.map((s) => traffic(s.child)));
            walBefore = await walSyncs(url);
          },
        },
      );
      const after = await Promise.all(started.map((s) => traffic(s.child)));
      const walFlushes = Number((await walSyncs(url)) - walBefore);
      rows.push(run);
      const calls = run.ok + run.failed;
      const statements = after.reduce((n, t, i) => n + t.statements - before[i].statements, 0);
      const transactions = after.reduce((n, t, i) => n + t.transactions - before[i].transactions, 0);
      notes.push(
        `PostgreSQL, ${replicas} replica(s): ${fmt(statements / calls, 1)} statements and ${fmt(transactions / calls, 1)} transactions per call ` +
          `(${fmt((statements + 2 * transactions) / calls, 1)} round trips with BEGIN/COMMIT), ${fmt(transactions / SECONDS, 0)} transactions/s, ` +
          `${walFlushes} WAL flushes (${fmt(run.ok / Math.max(1, walFlushes), 1)} durable charges per flush: PostgreSQL's own group commit); ` +
          `synchronous_commit=on for every charge`,
      );
      for (const s of started) s.child.send("exit");
    }
    return { rows, notes };
  } finally {
    await redis.stop();
    await server.stop();
  }
}

/** How many times the server has flushed its WAL to disk (pg_stat_wal.wal_sync), on a connection of its own. */
async function walSyncs(url: string): Promise<bigint> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return BigInt((await client.query<{ n: string }>("SELECT wal_sync::text AS n FROM pg_stat_wal")).rows[0].n);
  } finally {
    await client.end();
  }
}

/** A gateway child's PostgreSQL traffic so far. */
function traffic(child: ChildProcess): Promise<{ statements: number; transactions: number }> {
  return ask(child, "stats");
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-bench-"));
  const children: ChildProcess[] = [];
  try {
    const backend = await start("backend");
    children.push(backend.child);
    const proxy = await start("proxy", backend.msg.url);
    children.push(proxy.child);
    const gateway = await startGateway({ backendUrl: backend.msg.url, dbPath: path.join(dir, "bench.db") });
    children.push(gateway.child);

    const input = JSON.stringify({ hello: "world", n: 42 });
    console.log(
      `call-path benchmark: ${CONNECTIONS} connections, ${SECONDS} s per scenario after ${WARMUP_MS} ms warm-up, ${os.cpus().length} cores, Node ${process.version}\n`,
    );
    const direct = await load("backend, direct", `${backend.msg.url}/echo`, input, {});
    const bare = await load("bare Node proxy", `${proxy.msg.url}/echo`, input, {});
    const gw = await load(
      "gateway (durable charges)",
      `${gateway.msg.url}/v1/call`,
      JSON.stringify({ skill_id: "echo", input: JSON.parse(input) }),
      {
        authorization: `Bearer ${gateway.msg.key}`,
      },
    );

    const stats = await ask<{ captured: number; batches: number; synchronous: number }>(gateway.child, "stats");
    // The SQLite gateway's CPU is given back before the PostgreSQL runs.
    gateway.child.send("exit");

    const postgres = await postgresRuns(backend.msg.url, input, dir, children);

    const rows = [direct, bare, gw, ...postgres.rows];
    const fmt = (n: number, d = 2) => n.toFixed(d);
    console.log("| scenario | req/s | ratio to bare proxy | p50 ms | p90 ms | p99 ms | non-200 |");
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const r of rows)
      console.log(
        `| ${r.name} | ${fmt(r.requestsPerSec, 0)} | ${fmt(r.requestsPerSec / bare.requestsPerSec)} | ${fmt(r.p50Ms)} | ${fmt(r.p90Ms)} | ${fmt(r.p99Ms)} | ${r.failed} |`,
      );
    console.log("");
    const ratio = gw.requestsPerSec / bare.requestsPerSec;
    console.log(`gateway throughput / bare proxy throughput: ${fmt(ratio)} (target >= 0.70)`);
    console.log(
      `latency the gateway adds over the bare proxy: p50 ${fmt(gw.p50Ms - bare.p50Ms, 3)} ms (target < 1 ms), p99 ${fmt(gw.p99Ms - bare.p99Ms, 3)} ms`,
    );
    console.log(
      `latency the gateway adds over the direct backend: p50 ${fmt(gw.p50Ms - direct.p50Ms, 3)} ms, p99 ${fmt(gw.p99Ms - direct.p99Ms, 3)} ms`,
    );
    console.log(
      `durability: synchronous=${stats.synchronous === 2 ? "FULL" : stats.synchronous}, ${stats.captured} charges captured in ${stats.batches} commits ` +
        `(${fmt(stats.captured / Math.max(1, stats.batches), 1)} per commit), every one on disk before its 200 was sent`,
    );
    for (const line of postgres.notes) console.log(line);
  } finally {
    stopAll(children);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
