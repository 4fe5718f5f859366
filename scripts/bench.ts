/**
 * The call-path benchmark (`npm run bench:gateway`). In one run, against the same local backend, at 50 concurrent
 * connections (one request in flight on each), it measures:
 *   1. the backend called directly,
 *   2. a bare Node HTTP proxy in front of it (the baseline),
 *   3. the gateway on a SQLite file: auth, rate limit, hold, forward, capture, every charge durable
 *      (an fsync of the -wal file, off the event loop) before its response is sent, each request's JSON log line written (asynchronously) to a
 *      file beside the ledger, as in production; with one hot buyer (every call spends one balance), then with
 *      50 buyers, one key each (each connection calls as a buyer of its own);
 *      and the bare proxy and the SQLite gateway again at one call at a time (the latency a waiting caller sees);
 *   4. the gateway on PostgreSQL with its limits in Redis, one replica then two sharing the load (the connections
 *      split between them), each with one hot buyer and with 50 buyers, every charge durable (synchronous_commit
 *      on) before its 200; a throwaway PostgreSQL 15 and Redis (Debian's binaries, as the tests use them) are
 *      started for the run, and these rows are skipped, saying so, when the binaries are absent.
 * It prints throughput, latency percentiles, each gateway's ratio to the bare proxy, the CPU a call costs in the
 * gateway's processes and in PostgreSQL (from /proc: the postmaster and its backends), statements, transactions,
 * socket writes, deadlock retries and WAL flushes per call on PostgreSQL, issue 25's ratios, and from the CPU figures a stated model of what N
 * replicas give on a 16-core host. Each server runs in its own process (./bench/servers.ts); the load generator
 * (undici, ./bench/common.ts) runs in this one.
 *
 *   BENCH_SECONDS (default 8)  BENCH_CONNECTIONS (default 50)  BENCH_PROFILE (a folder)  BENCH_POSTGRES=0 (SQLite only)
 *   BENCH_SQLITE_WRITERS (default loop,thread: the SQLite gateway measured with each SQLITE_LEDGER_WRITER, in the same run; none: PostgreSQL alone)
 *   BENCH_PG_STATEMENTS=1 (PostgreSQL's statements per call from pg_stat_statements, those inside functions and triggers too)
 */
import { postgresUnavailableReason, startPostgres } from "../server/devstack/postgres-server";
import { redisServerBinary, startRedisServer } from "../server/devstack/redis-server";
import {
  CLOCK_TICKS,
  CONNECTIONS,
  type Run,
  SECONDS,
  type Started,
  WARMUP_MS,
  ask,
  load,
  procStatFields,
  start,
  stopAll,
} from "./bench/common";
import type { GatewaySpec } from "./bench/servers";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";

/** Starts a gateway child (./bench/servers.ts). */
const startGateway = (spec: GatewaySpec) => start("gateway", JSON.stringify(spec));

/** How many buyers the many-buyers scenarios spread the calls over: one per connection, one key each. */
const MANY_BUYERS = CONNECTIONS;
const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : "n/a");

/** One gateway scenario's measurement, with what each call cost. */
interface Scenario {
  run: Run;
  engine: "sqlite" | "postgres";
  replicas: number;
  buyers: number;
  /** SQLite only: who wrote the keyed calls' ledger writes. */
  writer?: SqliteWriter;
  /** The gateway processes' CPU per call (user + system, every replica), µs. */
  gatewayCpuMicros: number;
  /** PostgreSQL's CPU per call (the postmaster and every backend), µs; NaN on SQLite or where /proc cannot say. */
  postgresCpuMicros: number;
  /** SQLite only: the gateway's event loop busy per call (its CPU, and any wait it blocks on, such as a synchronous fsync), µs. */
  loopBusyMicros?: number;
  /**
   * PostgreSQL only, per call: statements, transactions, writes to the server's socket (pipelined statements share
   * one), transactions run again after a deadlock, and WAL flushes.
   */
  statements?: number;
  transactions?: number;
  writes?: number;
  retried?: number;
  walFlushes?: number;
  /** PostgreSQL only: backends waiting on a lock, on average over the run, by the relation or kind waited on. */
  lockWaits?: Map<string, number>;
  /** PostgreSQL with BENCH_PG_STATEMENTS=1: the statements that took the server's time, most first. */
  topStatements?: StatementCost[];
}

/** Each started gateway's counters: its CPU time and PostgreSQL traffic so far. */
interface GatewayStats {
  cpuMicros: number;
  /** SQLite only: the event loop's busy time so far, µs. */
  loopBusyMicros?: number;
  statements?: number;
  transactions?: number;
  writes?: number;
  retried?: number;
  captured?: number;
  batches?: number;
  synchronous?: number;
}
const statsOf = (child: ChildProcess) => ask<GatewayStats>(child, "stats");

/** The CPU time of a process and all its descendants (utime + stime from /proc), µs; NaN where /proc is absent. */
function processTreeCpuMicros(rootPid: number): number {
  if (!fs.existsSync("/proc/self/stat")) return Number.NaN;
  const parent = new Map<number, number>();
  const ticks = new Map<number, number>();
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = procStatFields(`/proc/${entry}/stat`);
    if (!fields) continue; // Gone meanwhile.
    parent.set(Number(entry), Number(fields[1]));
    ticks.set(Number(entry), Number(fields[11]) + Number(fields[12]));
  }
  let total = 0;
  for (const [pid, t] of ticks) {
    for (let p: number | undefined = pid; p !== undefined && p > 1; p = parent.get(p))
      if (p === rootPid) {
        total += t;
        break;
      }
  }
  return (total / CLOCK_TICKS) * 1e6;
}

/** One gateway scenario: the replicas started, the load split between them, the costs per call read around it. */
async function scenario(
  name: string,
  started: Started[],
  body: string,
  options: { engine: "sqlite" | "postgres"; buyers: number; writer?: SqliteWriter; postgres?: { pid: number; url: string } },
): Promise<Scenario> {
  const keys: string[] = started[0].msg.keys;
  let before: GatewayStats[] = [];
  let pgCpuBefore = 0;
  let walBefore = 0n;
  let sampler: LockSampler | undefined;
  const run = await load(
    name,
    started.map((s) => `${s.msg.url}/v1/call`),
    body,
    (connection) => ({ authorization: `Bearer ${keys[connection % keys.length]}` }),
    {
      beforeMeasure: async () => {
        before = await Promise.all(started.map((s) => statsOf(s.child)));
        if (options.postgres) {
          if (PG_STATEMENTS) await resetStatements(options.postgres.url);
          pgCpuBefore = processTreeCpuMicros(options.postgres.pid);
          walBefore = await walSyncs(options.postgres.url);
          sampler = await sampleLockWaits(options.postgres.url);
        }
      },
    },
  );
  const lockWaits = await sampler?.stop();
  const after = await Promise.all(started.map((s) => statsOf(s.child)));
  const calls = Math.max(1, run.ok + run.failed);
  const sum = (pick: (s: GatewayStats) => number | undefined) => after.reduce((n, s, i) => n + (pick(s) ?? 0) - (pick(before[i]) ?? 0), 0);
  const result: Scenario = {
    run,
    engine: options.engine,
    replicas: started.length,
    buyers: options.buyers,
    writer: options.writer,
    gatewayCpuMicros: sum((s) => s.cpuMicros) / calls,
    postgresCpuMicros: Number.NaN,
  };
  if (options.engine === "sqlite") result.loopBusyMicros = sum((s) => s.loopBusyMicros) / calls;
  if (options.postgres) {
    result.postgresCpuMicros = (processTreeCpuMicros(options.postgres.pid) - pgCpuBefore) / calls;
    result.statements = sum((s) => s.statements) / calls;
    result.transactions = sum((s) => s.transactions) / calls;
    result.writes = sum((s) => s.writes) / calls;
    result.retried = sum((s) => s.retried) / calls;
    result.walFlushes = Number((await walSyncs(options.postgres.url)) - walBefore) / calls;
    result.lockWaits = lockWaits;
    if (PG_STATEMENTS) result.topStatements = await topStatements(options.postgres.url, calls);
  }
  return result;
}

type SqliteWriter = "loop" | "thread";
/** Who writes keyed calls' ledger writes on SQLite (SQLITE_LEDGER_WRITER), each measured in the same run. */
const SQLITE_WRITERS = (process.env.BENCH_SQLITE_WRITERS ?? "loop,thread")
  .split(",")
  .filter((w): w is SqliteWriter => w === "loop" || w === "thread");
const WRITER_LABEL: Record<SqliteWriter, string> = { loop: "ledger writes on the event loop", thread: "ledger writer thread" };

/** The SQLite gateway, with each ledger writer: one hot buyer, then many buyers (a fresh file each). */
async function sqliteRuns(
  backendUrl: string,
  body: string,
  dir: string,
  children: ChildProcess[],
): Promise<{ scenarios: Scenario[]; notes: string[]; oneAtATime: Map<SqliteWriter, Run> }> {
  const scenarios: Scenario[] = [];
  const notes: string[] = [];
  const oneAtATime = new Map<SqliteWriter, Run>();
  for (const writer of SQLITE_WRITERS)
    for (const buyers of [1, MANY_BUYERS]) {
      const gateway = await startGateway({
        backendUrl,
        dbPath: path.join(dir, `bench-${writer}-${buyers}.db`),
        buyers,
        sqliteLedgerWriter: writer,
      });
      children.push(gateway.child);
      const label = `${buyers === 1 ? "one buyer" : `${buyers} buyers`}, ${WRITER_LABEL[writer]}`;
      const measured = await scenario(`gateway, SQLite, ${label} (durable charges)`, [gateway], body, {
        engine: "sqlite",
        buyers,
        writer,
      });
      scenarios.push(measured);
      notes.push(
        `SQLite, ${label}: the event loop busy ${fmt(measured.loopBusyMicros ?? Number.NaN, 0)} µs a call, of ${fmt(measured.gatewayCpuMicros, 0)} µs of CPU a call in the process`,
      );
      const stats = await statsOf(gateway.child);
      if (buyers === 1 && writer === "loop")
        notes.push(
          `SQLite durability, ${WRITER_LABEL[writer]}: synchronous=${stats.synchronous === 2 ? "FULL" : stats.synchronous === 1 ? "NORMAL + an fsync of the -wal file off the event loop" : stats.synchronous}, ${stats.captured} charges captured in ${stats.batches} commits ` +
            `(${fmt((stats.captured ?? 0) / Math.max(1, stats.batches ?? 0), 1)} per commit), every one on disk before its 200 was sent`,
        );
      // The latency a caller waiting on each answer sees: one call at a time, nothing queued behind it.
      if (buyers === 1)
        oneAtATime.set(
          writer,
          await load(
            `gateway, SQLite, ${WRITER_LABEL[writer]}, one call at a time`,
            `${gateway.msg.url}/v1/call`,
            body,
            authorization(gateway.msg.keys[0]),
            ONE,
          ),
        );
      // Its CPU is given back before the next scenario.
      gateway.child.send("exit");
    }
  return { scenarios, notes, oneAtATime };
}

const authorization = (key: string) => ({ authorization: `Bearer ${key}` });
/** One connection, one call in flight: the latency a caller waiting on each answer sees. */
const ONE = { connections: 1 };

/**
 * The gateway on PostgreSQL with its limits in Redis: one replica and two sharing the load, each with one hot buyer
 * and with many, each on a fresh database of one throwaway server. Skipped (with a note) without the binaries or with
 * BENCH_POSTGRES=0.
 */
async function postgresRuns(
  backendUrl: string,
  body: string,
  dir: string,
  children: ChildProcess[],
): Promise<{ scenarios: Scenario[]; notes: string[] }> {
  const missing =
    process.env.BENCH_POSTGRES === "0"
      ? "BENCH_POSTGRES=0"
      : (postgresUnavailableReason() ?? (redisServerBinary() ? null : "redis-server is not installed"));
  if (missing) return { scenarios: [], notes: [`PostgreSQL scenarios skipped: ${missing}`] };
  const server = await startPostgres({
    database: "bench_seed",
    // Counting every statement costs the server some CPU: only when asked for.
    settings: PG_STATEMENTS ? { shared_preload_libraries: "pg_stat_statements", "pg_stat_statements.track": "all" } : {},
  });
  const redis = await startRedisServer();
  try {
    const scenarios: Scenario[] = [];
    for (const replicas of [1, 2]) {
      for (const buyers of [1, MANY_BUYERS]) {
        const database = `bench_${replicas}_${buyers}`;
        await server.createDatabase(database);
        const url = server.urlFor(database);
        const spec = { backendUrl, databaseUrl: url, redisUrl: redis.url, buyers };
        const started: Started[] = [await startGateway({ ...spec, dbPath: path.join(dir, `unused-${database}.db`), replicaId: "bench-1" })];
        for (let i = 2; i <= replicas; i++)
          started.push(
            await startGateway({
              ...spec,
              dbPath: path.join(dir, `unused-${database}-${i}.db`),
              replicaId: `bench-${i}`,
              seededKeys: started[0].msg.keys,
            }),
          );
        for (const s of started) children.push(s.child);
        const label = `${replicas} replica${replicas === 1 ? "" : "s"}, ${buyers === 1 ? "one buyer" : `${buyers} buyers`}`;
        scenarios.push(
          await scenario(`gateway, PostgreSQL + Redis, ${label} (durable charges)`, started, body, {
            engine: "postgres",
            buyers,
            postgres: { pid: server.pid, url },
          }),
        );
        for (const s of started) s.child.send("exit");
        // Let the replicas' CPU go before the next scenario starts its own.
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    return { scenarios, notes: [] };
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

/** BENCH_PG_STATEMENTS=1: each PostgreSQL scenario's statements from pg_stat_statements (a profile, costing some CPU). */
const PG_STATEMENTS = process.env.BENCH_PG_STATEMENTS === "1";

/** One statement's share of a scenario's calls, from pg_stat_statements. */
interface StatementCost {
  query: string;
  /** Whether the client sent it (false: run inside a function or a trigger, its time inside its caller's too). */
  toplevel: boolean;
  perCall: number;
  /** Execution time per gateway call, and per execution, µs. */
  microsPerCall: number;
  meanMicros: number;
}

/** Empties pg_stat_statements (the extension made in the scenario's database first). */
async function resetStatements(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    await client.query("SELECT pg_stat_statements_reset()");
  } finally {
    await client.end();
  }
}

/** The scenario database's statements by execution time, over `calls` gateway calls. */
async function topStatements(url: string, calls: number): Promise<StatementCost[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ query: string; toplevel: boolean; calls: string; total: number }>(
      `SELECT query, toplevel, calls::text AS calls, total_exec_time AS total FROM pg_stat_statements
       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND calls > 0
       ORDER BY total_exec_time DESC LIMIT 20`,
    );
    return rows.map((r) => ({
      query: r.query.replace(/\s+/g, " ").slice(0, 110),
      toplevel: r.toplevel,
      perCall: Number(r.calls) / calls,
      microsPerCall: (r.total * 1000) / calls,
      meanMicros: (r.total * 1000) / Number(r.calls),
    }));
  } finally {
    await client.end();
  }
}

interface LockSampler {
  /** Stops sampling; the average number of backends waiting on a lock, by what they wait for. */
  stop(): Promise<Map<string, number>>;
}

/**
 * Samples pg_locks every 20 ms on a connection of its own: each lock not granted, named by its relation (a row lock
 * waited on shows as the holder's transaction id: named "a row (transaction)"), so that a run says where its
 * transactions queue. The averages are backends waiting at a moment: 1.0 means one backend waiting all run long.
 */
async function sampleLockWaits(url: string): Promise<LockSampler> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const totals = new Map<string, number>();
  let samples = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const { rows } = await client.query<{ what: string; n: string }>(
        `SELECT COALESCE(c.relname, CASE l.locktype WHEN 'transactionid' THEN 'a row (transaction)' ELSE l.locktype END) AS what,
                COUNT(*)::text AS n
         FROM pg_locks l LEFT JOIN pg_class c ON c.oid = l.relation WHERE NOT l.granted GROUP BY 1`,
      );
      samples++;
      for (const { what, n } of rows) totals.set(what, (totals.get(what) ?? 0) + Number(n));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await client.end();
      return new Map([...totals].map(([what, n]) => [what, n / Math.max(1, samples)]));
    },
  };
}

/**
 * What N replicas would give on a host of `cores` cores, from this run's CPU per call: each replica is one Node
 * process (at most one core of its own), and the replicas and PostgreSQL share the host's cores. A stated model, not
 * a measurement: it assumes the per-call costs stay as measured here (no new contention), the backend and the load
 * generator elsewhere, and (for one hot buyer) that the buyer's row is not the limit, which the one-buyer rows of this
 * run measure on their own.
 */
function clusterModel(s: Scenario, cores: number): string {
  const g = s.gatewayCpuMicros / s.replicas;
  const p = s.postgresCpuMicros;
  if (!Number.isFinite(g) || !Number.isFinite(p) || g <= 0) return "n/a (no CPU figures)";
  const perReplica = 1e6 / (g * s.replicas);
  return [1, 2, 4, 8, 12]
    .filter((n) => n < cores)
    .map((n) => {
      const byReplicas = n * perReplica;
      const byHost = (cores * 1e6) / (g * s.replicas + p);
      return `${n}: ${fmt(Math.min(byReplicas, byHost), 0)}/s${byReplicas <= byHost ? "" : " (host CPU bound)"}`;
    })
    .join(", ");
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-bench-"));
  const children: ChildProcess[] = [];
  try {
    const backend = await start("backend");
    children.push(backend.child);
    const proxy = await start("proxy", backend.msg.url);
    children.push(proxy.child);

    const input = JSON.stringify({ hello: "world", n: 42 });
    const body = JSON.stringify({ skill_id: "echo", input: JSON.parse(input) });
    console.log(
      `call-path benchmark: ${CONNECTIONS} connections, ${SECONDS} s per scenario after ${WARMUP_MS} ms warm-up, ${os.cpus().length} cores, Node ${process.version}\n`,
    );
    const direct = await load("backend, direct", `${backend.msg.url}/echo`, input, {});
    const bare = await load("bare Node proxy", `${proxy.msg.url}/echo`, input, {});
    const bareOne = await load("bare Node proxy, one call at a time", `${proxy.msg.url}/echo`, input, {}, ONE);
    const sqlite = await sqliteRuns(backend.msg.url, body, dir, children);
    const postgres = await postgresRuns(backend.msg.url, body, dir, children);
    const gateways = [...sqlite.scenarios, ...postgres.scenarios];

    console.log(
      "| scenario | req/s | ratio to bare proxy | p50 ms | p90 ms | p99 ms | non-200 | gateway CPU µs/call | PostgreSQL CPU µs/call |",
    );
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const r of [direct, bare])
      console.log(
        `| ${r.name} | ${fmt(r.requestsPerSec, 0)} | ${fmt(r.requestsPerSec / bare.requestsPerSec)} | ${fmt(r.p50Ms)} | ${fmt(r.p90Ms)} | ${fmt(r.p99Ms)} | ${r.failed} | | |`,
      );
    for (const r of [bareOne, ...sqlite.oneAtATime.values()])
      console.log(
        `| ${r.name} | ${fmt(r.requestsPerSec, 0)} | ${fmt(r.requestsPerSec / bareOne.requestsPerSec)} | ${fmt(r.p50Ms)} | ${fmt(r.p90Ms)} | ${fmt(r.p99Ms)} | ${r.failed} | | |`,
      );
    for (const { run: r, gatewayCpuMicros, postgresCpuMicros } of gateways)
      console.log(
        `| ${r.name} | ${fmt(r.requestsPerSec, 0)} | ${fmt(r.requestsPerSec / bare.requestsPerSec)} | ${fmt(r.p50Ms)} | ${fmt(r.p90Ms)} | ${fmt(r.p99Ms)} | ${r.failed} | ${fmt(gatewayCpuMicros, 0)} | ${fmt(postgresCpuMicros, 0)} |`,
      );
    console.log("");

    const find = (engine: string, replicas: number, buyers: number, writer?: SqliteWriter) =>
      gateways.find(
        (s) => s.engine === engine && s.replicas === replicas && s.buyers === buyers && (writer === undefined || s.writer === writer),
      )?.run.requestsPerSec ?? Number.NaN;
    // The SQLite gateway the PostgreSQL ratios divide by: the faster of the writers measured.
    const sqliteHot = Math.max(...SQLITE_WRITERS.map((w) => find("sqlite", 1, 1, w)));
    // Undefined with no SQLite writer measured (BENCH_SQLITE_WRITERS=none: PostgreSQL alone).
    const sqliteHotRun = sqlite.scenarios.find((s) => s.buyers === 1 && s.run.requestsPerSec === sqliteHot)?.run;
    console.log("ratios (issue 25's targets in brackets):");
    for (const writer of SQLITE_WRITERS) {
      const hot = find("sqlite", 1, 1, writer);
      console.log(`  SQLite gateway / bare proxy, durable charges, ${WRITER_LABEL[writer]}: ${fmt(hot / bare.requestsPerSec)} [>= 0.5]`);
      console.log(
        `  SQLite, one hot buyer / ${MANY_BUYERS} buyers, ${WRITER_LABEL[writer]}: ${fmt(hot / find("sqlite", 1, MANY_BUYERS, writer))}`,
      );
    }
    if (SQLITE_WRITERS.length === 2)
      console.log(
        `  SQLite, ledger writer thread / writes on the event loop, one buyer: ${fmt(find("sqlite", 1, 1, "thread") / find("sqlite", 1, 1, "loop"))}`,
      );
    if (postgres.scenarios.length > 0) {
      console.log(
        `  PostgreSQL 1 replica / SQLite gateway (its faster writer), one buyer each: ${fmt(find("postgres", 1, 1) / sqliteHot)} [>= 0.5]`,
      );
      console.log(
        `  PostgreSQL, one hot buyer / ${MANY_BUYERS} buyers, 1 replica: ${fmt(find("postgres", 1, 1) / find("postgres", 1, MANY_BUYERS))} [>= 0.8]`,
      );
      console.log(
        `  PostgreSQL 2 replicas / 1 replica, one buyer: ${fmt(find("postgres", 2, 1) / find("postgres", 1, 1))} [>= 0.9 on 2 cores]`,
      );
      console.log(
        `  PostgreSQL 2 replicas / 1 replica, ${MANY_BUYERS} buyers: ${fmt(find("postgres", 2, MANY_BUYERS) / find("postgres", 1, MANY_BUYERS))}`,
      );
    }
    for (const [writer, one] of sqlite.oneAtATime)
      console.log(
        `  latency the SQLite gateway adds at one call at a time, p50, ${WRITER_LABEL[writer]}: ${fmt(one.p50Ms - bareOne.p50Ms, 3)} ms [<= 0.3] ` +
          `(p99 ${fmt(one.p99Ms - bareOne.p99Ms, 3)} ms; the one-at-a-time rows' ratio is to the bare proxy at one call at a time)`,
      );
    if (sqliteHotRun)
      console.log(
        `latency the SQLite gateway adds over the bare proxy at ${CONNECTIONS} connections: p50 ${fmt(sqliteHotRun.p50Ms - bare.p50Ms, 3)} ms, p99 ${fmt(sqliteHotRun.p99Ms - bare.p99Ms, 3)} ms`,
      );
    for (const line of sqlite.notes) console.log(line);
    for (const s of postgres.scenarios)
      console.log(
        `${s.run.name}: ${fmt(s.statements ?? Number.NaN, 1)} statements and ${fmt(s.transactions ?? Number.NaN, 1)} transactions per call ` +
          `(${fmt((s.statements ?? 0) + 2 * (s.transactions ?? 0), 1)} with BEGIN/COMMIT) in ${fmt(s.writes ?? Number.NaN, 2)} writes to ` +
          `PostgreSQL's socket per call (pipelined), ${fmt(s.retried ?? Number.NaN, 3)} transactions run again after a deadlock per call, ` +
          `${fmt(1 / Math.max(1e-9, s.walFlushes ?? 0), 1)} durable charges per WAL flush; synchronous_commit=on for every charge; ` +
          `backends waiting on a lock, on average: ${
            s.lockWaits && s.lockWaits.size > 0
              ? [...s.lockWaits]
                  .sort((a, b) => b[1] - a[1])
                  .map(([what, n]) => `${fmt(n)} on ${what}`)
                  .join(", ")
              : "none seen"
          }`,
      );
    for (const s of postgres.scenarios.filter((x) => x.topStatements)) {
      console.log(`\n${s.run.name}, pg_stat_statements (track=all: a function's time includes its statements'):`);
      console.log("| statement | sent by | executions a call | µs a call | µs each |\n| --- | --- | ---: | ---: | ---: |");
      for (const t of s.topStatements!)
        console.log(
          `| \`${t.query.replaceAll("|", "\\|")}\` | ${t.toplevel ? "client" : "function"} | ${fmt(t.perCall)} | ${fmt(t.microsPerCall, 0)} | ${fmt(t.meanMicros, 0)} |`,
        );
    }
    const manyPg = postgres.scenarios.find((s) => s.replicas === 1 && s.buyers === MANY_BUYERS);
    if (manyPg)
      console.log(
        `model, ${MANY_BUYERS} buyers on a 16-core host with PostgreSQL on it (replicas: calls/s), from this run's CPU per call ` +
          `(${fmt(manyPg.gatewayCpuMicros, 0)} µs a call in a replica, ${fmt(manyPg.postgresCpuMicros, 0)} µs in PostgreSQL): ${clusterModel(manyPg, 16)}; ` +
          "an upper bound from CPU alone: it leaves out lock waits (the pg_locks samples above); PostgreSQL's µs per call include the balance roll-up",
      );
  } finally {
    stopAll(children);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
