/**
 * What the call-path benchmarks share (scripts/bench.ts, scripts/bench-x402.ts): the settings read from the
 * environment, the child processes that run the servers (./servers.ts), the load generator, and percentiles.
 *
 *   BENCH_SECONDS (default 8)  BENCH_CONNECTIONS (default 50)  BENCH_PROFILE (a folder: the gateway's CPU profile)
 */
import { type ChildProcess, fork, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";

/** How long each scenario is measured, after its warm-up. */
export const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
/** How many requests are in flight at once: one per connection. */
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
export const WARMUP_MS = 1_500;

/** The kernel's clock ticks a second, the unit of /proc's CPU times (getconf CLK_TCK: 100 on Linux here). */
export const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

/**
 * A /proc stat file's fields after the command name (which may hold spaces and parentheses: the fields start past its
 * last ")"), from the state on: [1] is the parent's pid, [11] and [12] the user and system CPU in CLOCK_TICKS.
 * Undefined when the process or thread is gone.
 */
export function procStatFields(file: string): string[] | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** One scenario's measurement. Latencies are over every answered request, whatever its status. */
export interface Run {
  name: string;
  requestsPerSec: number;
  /** Requests answered 200 (by `load`), or that the scenario's own check accepted (by `measure`). */
  ok: number;
  /** Everything else: other statuses, and requests that threw. */
  failed: number;
  elapsedSec: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
}

/** A server the benchmark started as a child process, and the first message it sent (its URL, a key, …). */
export interface Started {
  child: ChildProcess;
  msg: any;
}

/** Forks ./servers.ts as `role` and resolves with its first message (sent once it is ready). */
export function start(role: string, ...args: string[]): Promise<Started> {
  // BENCH_PROFILE=<dir> writes a V8 CPU profile of the gateway process there.
  const profile = process.env.BENCH_PROFILE && role === "gateway" ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  const child = fork(path.join(__dirname, "servers.ts"), [role, ...args], {
    // The repository's TypeScript loader, whose transpile cache saves each child compiling the gateway again.
    execArgv: ["-r", path.join(__dirname, "../../server/devstack/ts-register.cjs"), ...profile],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise((resolve, reject) => {
    child.once("message", (msg) => resolve({ child, msg }));
    child.once("exit", (code) => reject(new Error(`${role} exited with ${code}`)));
  });
}

/** Sends `msg` to a started server and resolves with its answer; rejects if the server exits instead. */
export function ask<T>(child: ChildProcess, msg: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const exited = (code: number | null) => reject(new Error(`the server exited with ${code} instead of answering ${JSON.stringify(msg)}`));
    child.once("exit", exited);
    child.once("message", (answer) => {
      child.off("exit", exited);
      resolve(answer as T);
    });
    child.send(msg as never);
  });
}

/** Asks each started server to exit, and kills those still running two seconds later. */
export function stopAll(children: ChildProcess[]): void {
  for (const c of children) {
    if (c.connected) c.send("exit");
    setTimeout(() => c.kill(), 2_000).unref();
  }
}

export function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export interface MeasureOptions {
  connections?: number;
  seconds?: number;
  warmupMs?: number;
  /** Called between the warm-up and the measured run (to read counters at its start). */
  beforeMeasure?: () => Promise<unknown>;
}

/**
 * Runs `call` in a loop on each of `connections` connections (one call in flight on each), first for the
 * warm-up, unrecorded, then for `seconds`, recorded: its latency, and `ok` when it resolves true. A call that
 * throws counts as failed; its latency is not recorded.
 */
export async function measure(
  name: string,
  call: (connection: number, recorded: boolean) => Promise<boolean>,
  options: MeasureOptions = {},
): Promise<Run> {
  const { connections = CONNECTIONS, seconds = SECONDS, warmupMs = WARMUP_MS } = options;
  const latencies: number[] = [];
  let ok = 0;
  let failed = 0;
  const once = async (record: boolean, connection: number) => {
    const t0 = performance.now();
    try {
      const accepted = await call(connection, record);
      if (!record) return;
      latencies.push(performance.now() - t0);
      if (accepted) ok++;
      else failed++;
    } catch {
      if (record) failed++;
    }
  };
  const loop = async (untilMs: number, record: boolean, connection: number) => {
    while (performance.now() < untilMs) await once(record, connection);
  };
  const warmEnd = performance.now() + warmupMs;
  await Promise.all(Array.from({ length: connections }, (_, i) => loop(warmEnd, false, i)));
  await options.beforeMeasure?.();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(Array.from({ length: connections }, (_, i) => loop(end, true, i)));
  const elapsedSec = (performance.now() - t0) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  return {
    name,
    requestsPerSec: (ok + failed) / elapsedSec,
    ok,
    failed,
    elapsedSec,
    p50Ms: percentile(sorted, 50),
    p90Ms: percentile(sorted, 90),
    p99Ms: percentile(sorted, 99),
  };
}

/**
 * POSTs `body` to `url` (or, given several, splits the connections between them) over undici pools, one
 * request in flight per connection; a 200 is ok.
 */
export async function load(
  name: string,
  url: string | string[],
  body: string,
  /** The request headers, or per connection (a key per buyer: each connection calls as one of them). */
  headers: Record<string, string> | ((connection: number) => Record<string, string>),
  options: MeasureOptions = {},
): Promise<Run> {
  const headersOf = typeof headers === "function" ? headers : () => headers;
  const targets = (Array.isArray(url) ? url : [url]).map((u) => new URL(u));
  const connections = options.connections ?? CONNECTIONS;
  const pools = targets.map((t) => new Pool(t.origin, { connections: Math.ceil(connections / targets.length), pipelining: 1 }));
  try {
    return await measure(
      name,
      async (connection) => {
        const target = targets[connection % targets.length];
        const res = await pools[connection % pools.length].request({
          path: target.pathname,
          method: "POST",
          headers: { "content-type": "application/json", ...headersOf(connection) },
          body,
        });
        await res.body.text();
        return res.statusCode === 200;
      },
      options,
    );
  } finally {
    await Promise.all(pools.map((p) => p.close()));
  }
}
