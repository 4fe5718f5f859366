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
 * transactions per call. Each server runs in its own process; the load generator (undici, one
 * request in flight per connection) runs in this one.
 *
 *   BENCH_SECONDS (default 8)  BENCH_CONNECTIONS (default 50)  BENCH_PROFILE (a folder)  BENCH_POSTGRES=0 (skip 4, 5)
 */
import { SqliteDatabase } from "../server/db/sqlite-database";
import { postgresTraffic } from "../server/db/postgres/database";
import { postgresUnavailableReason, startPostgres } from "../server/devstack/postgres-server";
import { redisServerBinary, startRedisServer } from "../server/devstack/redis-server";
import { type ChildProcess, fork } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { Pool } from "undici";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const WARMUP_MS = 1_500;

// ---------- the three servers, each run as a child process of this script ----------

function listen(server: http.Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

/** The skill backend: echoes the JSON it is sent. */
async function runBackend(): Promise<void> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      res.writeHead(200, { "content-type": "application/json", "content-length": body.length }).end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  process.send!({ url: await listen(server) });
}

/** The baseline: the least a proxy can do, streaming each request to the backend over keep-alive. */
async function runProxy(backendUrl: string): Promise<void> {
  const target = new URL(backendUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const server = http.createServer((req, res) => {
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: "/echo",
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": req.headers["content-length"] ?? "0" },
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, { "content-type": "application/json", "content-length": up.headers["content-length"] ?? "0" });
        up.pipe(res);
      },
    );
    upstream.on("error", () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 60_000;
  process.send!({ url: await listen(server) });
}

/**
 * The real gateway, on a real SQLite file with synchronous=FULL, or (given a database URL) on PostgreSQL with
 * its limits in Redis, as replica `replicaId`. The first replica of a database seeds it; the others are given
 * the seeded key.
 */
async function runGateway(
  backendUrl: string,
  dbPath: string,
  databaseUrl = "",
  redisUrl = "",
  replicaId = "",
  seededKey = "",
): Promise<void> {
  const { loadConfig } = await import("../server/config");
  const { startGateway } = await import("../server/index");
  const { createLogger } = await import("../server/ops/log");
  const pino = (await import("pino")).default;
  // Each request's log line is written as in production (JSON, asynchronously), to a file beside the ledger.
  const logger = createLogger({ level: "info", destination: pino.destination({ dest: `${dbPath}.log`, sync: false }) });
  const gw = await startGateway(
    loadConfig(
      {},
      {
        port: 0,
        dbPath,
        databaseUrl,
        redisUrl,
        replicaId: replicaId || "bench",
        rateLimitPerMin: 10_000_000,
        skillBackendAllowlist: [new URL(backendUrl).origin],
      },
    ),
    { log: () => {}, logger },
  );
  if (seededKey) {
    process.on("message", (msg) => {
      if (msg === "exit") process.exit(0);
      process.send!({ ...postgresTraffic });
    });
    process.send!({ url: gw.url, key: seededKey });
    return;
  }
  await gw.ledger.ensureAccount({ id: "bench-seller", kind: "seller", name: "bench seller" });
  await gw.ledger.ensureAccount({ id: "bench-buyer", kind: "user", name: "bench buyer" });
  await gw.ledger.credit("bench-buyer", 1_000_000_000_000n, "dev_credit", "benchmark balance");
  await gw.skills.upsert({
    slug: "echo",
    name: "echo",
    priceMicros: 1_000n,
    sellerAccountId: "bench-seller",
    backendUrl: `${backendUrl}/echo`,
    timeoutMs: 10_000,
  });
  const { key } = await gw.keys.create("bench-buyer");
  const sqlite = gw.db instanceof SqliteDatabase ? gw.db : undefined;
  const sync = sqlite
    ? sqlite.db.pragma("synchronous", { simple: true })
    : (await gw.db.value<string>("SHOW synchronous_commit")) === "on"
      ? 2
      : 0;
  process.on("message", async (msg) => {
    if (msg === "exit") process.exit(0);
    const captured = await gw.db.value<bigint>("SELECT COUNT(*) FROM holds WHERE status = 'captured'");
    process.send!({
      captured: Number(captured),
      batches: sqlite?.commit.committedBatches ?? 0,
      synchronous: Number(sync),
      ...postgresTraffic,
    });
  });
  process.send!({ url: gw.url, key });
}

// ---------- the load generator and the report ----------

interface Run {
  name: string;
  requestsPerSec: number;
  ok: number;
  failed: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
}

function start(role: string, ...args: string[]): Promise<{ child: ChildProcess; msg: any }> {
  // BENCH_PROFILE=<dir> writes a V8 CPU profile of the gateway process there.
  const profile = process.env.BENCH_PROFILE && role === "gateway" ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  const child = fork(__filename, [role, ...args], {
    execArgv: ["-r", "ts-node/register/transpile-only", ...profile],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise((resolve, reject) => {
    child.once("message", (msg) => resolve({ child, msg }));
    child.once("exit", (code) => reject(new Error(`${role} exited with ${code}`)));
  });
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

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
      const started: { child: ChildProcess; msg: any }[] = [];
      const first = await start("gateway", backendUrl, path.join(dir, `unused-${replicas}.db`), url, redis.url, "bench-1");
      started.push(first);
      for (let i = 2; i <= replicas; i++)
        started.push(await start("gateway", backendUrl, path.join(dir, "unused.db"), url, redis.url, `bench-${i}`, first.msg.key));
      for (const s of started) children.push(s.child);
      let before: { statements: number; transactions: number }[] = [];
      let walBefore = 0n;
      const run = await load(
        `gateway on PostgreSQL + Redis, ${replicas} replica${replicas === 1 ? "" : "s"} (durable charges)`,
        started.map((s) => `${s.msg.url}/v1/call`),
        body,
        { authorization: `Bearer ${first.msg.key}` },
        async () => {
          before = await Promise.all(started.map((s) => traffic(s.child)));
          walBefore = await walSyncs(url);
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
  child.send("stats");
  return new Promise((resolve) => child.once("message", resolve as (msg: unknown) => void));
}

/** Runs the load against `url` (or, given several, splits the connections between them). */
async function load(
  name: string,
  url: string | string[],
  body: string,
  headers: Record<string, string>,
  /** Called between the warm-up and the measured run (to read counters at its start). */
  beforeMeasure?: () => Promise<unknown>,
): Promise<Run> {
  const targets = (Array.isArray(url) ? url : [url]).map((u) => new URL(u));
  const pools = targets.map((t) => new Pool(t.origin, { connections: Math.ceil(CONNECTIONS / targets.length), pipelining: 1 }));
  const latencies: number[] = [];
  let ok = 0;
  let failed = 0;
  const once = async (record: boolean, connection: number) => {
    const t0 = performance.now();
    const target = targets[connection % targets.length];
    try {
      const res = await pools[connection % pools.length].request({
        path: target.pathname,
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body,
      });
      await res.body.text();
      if (!record) return;
      latencies.push(performance.now() - t0);
      if (res.statusCode === 200) ok++;
      else failed++;
    } catch {
      if (record) failed++;
    }
  };
  const loop = async (untilMs: number, record: boolean, connection: number) => {
    while (performance.now() < untilMs) await once(record, connection);
  };
  const warmEnd = performance.now() + WARMUP_MS;
  await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => loop(warmEnd, false, i)));
  await beforeMeasure?.();
  const t0 = performance.now();
  const end = t0 + SECONDS * 1000;
  await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => loop(end, true, i)));
  const elapsedSec = (performance.now() - t0) / 1000;
  await Promise.all(pools.map((p) => p.close()));
  const sorted = Float64Array.from(latencies).sort();
  return {
    name,
    requestsPerSec: (ok + failed) / elapsedSec,
    ok,
    failed,
    p50Ms: percentile(sorted, 50),
    p90Ms: percentile(sorted, 90),
    p99Ms: percentile(sorted, 99),
  };
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-bench-"));
  const children: ChildProcess[] = [];
  try {
    const backend = await start("backend");
    children.push(backend.child);
    const proxy = await start("proxy", backend.msg.url);
    children.push(proxy.child);
    const gateway = await start("gateway", backend.msg.url, path.join(dir, "bench.db"));
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

    gateway.child.send("stats");
    const stats: { captured: number; batches: number; synchronous: number } = await new Promise((resolve) =>
      gateway.child.once("message", resolve),
    );
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
    for (const c of children) {
      if (c.connected) c.send("exit");
      setTimeout(() => c.kill(), 2_000).unref();
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const [role, ...args] = process.argv.slice(2);
const roles: Record<string, () => Promise<void>> = {
  backend: runBackend,
  proxy: () => runProxy(args[0]),
  gateway: () => runGateway(args[0], args[1], args[2], args[3], args[4], args[5]),
};
(roles[role] ?? main)().catch((error) => {
  console.error(error);
  process.exit(1);
});
