import type { ChildProcess } from "node:child_process";
import path from "node:path";
import { expect } from "chai";
import { configEnvNames } from "../../server/config";
import { TS_REGISTER, spawnGuarded } from "../../server/devstack/child-process";
import { redisServerBinary } from "../../server/devstack/redis-server";
import { postgresUnavailableReason } from "../helpers/postgres";

/*
 * `npm run start:cluster` as a person runs it (scripts/start-cluster.ts, through ts-node as npm runs it): the gateway
 * settings in its environment reach the replicas (issue 25, section 4), its banner names them without their values,
 * the cluster's own settings are ignored rather than breaking it, and a malformed one stops it before anything starts.
 */

const ROOT = path.join(__dirname, "../..");
const METRICS_TOKEN = "cluster-test-metrics-token-0123456789";
const DATABASE_PASSWORD = "hunter2-not-the-cluster-s";
const SETTLER_KEY = `0x${"11".repeat(32)}`;

/**
 * The script's environment: this process's, less every gateway setting (a setting of the shell running the tests
 * must not reach the cluster), plus `settings`.
 */
function clusterEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: `--require ${JSON.stringify(TS_REGISTER)}` };
  for (const name of [...configEnvNames(), "REPLICAS"]) delete env[name];
  return { ...env, ...settings };
}

/** Starts the script; it dies with this process (spawnGuarded). */
function spawnCluster(settings: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawnGuarded(path.join(ROOT, "scripts/start-cluster.ts"), [], {
    cwd: ROOT,
    env: clusterEnv(settings),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

/** Resolves once the output has `text`; rejects if the script exits first or `timeoutMs` passes. */
async function printed(run: ReturnType<typeof spawnCluster>, text: string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (!run.output().includes(text)) {
    if (run.child.exitCode !== null)
      throw new Error(`start:cluster exited (${run.child.exitCode}) before printing "${text}":\n${run.output()}`);
    if (Date.now() > deadline) throw new Error(`start:cluster did not print "${text}" within ${timeoutMs} ms:\n${run.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return run.output();
}

describe("npm run start:cluster (scripts/start-cluster.ts)", function () {
  this.timeout(120_000);
  const started: ChildProcess[] = [];
  after(() => {
    for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });

  it("stops at a malformed setting with the config's own error, before it starts anything", async function () {
    this.timeout(20_000);
    const run = spawnCluster({ RATE_LIMIT_PER_MIN: "lots", FEE_MODE: "on_top" });
    started.push(run.child);
    expect(await exitOf(run.child)).to.equal(1);
    expect(run.output()).to.include('RATE_LIMIT_PER_MIN must be an integer, got "lots"');
    expect(run.output()).to.not.include("Starting a chain");
    expect(run.output()).to.not.include("Compiled");
  });

  it("hands its replicas the person's gateway settings, names them in its banner without their values, and ignores its own", async function () {
    const missing = postgresUnavailableReason() ?? (redisServerBinary() ? null : "redis-server is not installed");
    if (missing) {
      if (process.env.CI === "true") throw new Error(missing);
      console.warn(`      skipped: ${missing}`);
      this.skip();
    }
    // One replica: every replica is started from the same settings (server/devstack/cluster.ts), and a second would
    // add its start-up time to the suite's.
    const run = spawnCluster({
      REPLICAS: "1",
      RATE_LIMIT_PER_MIN: "1000000",
      FEE_MODE: "on_top",
      FEE_BPS: "2500",
      METRICS_TOKEN,
      // A quick lease and indexer: the banner waits for the leader to index the demo deposit.
      LEADER_LEASE_MS: "300",
      INDEXER_INTERVAL_MS: "200",
      // The cluster's own: a person's values are ignored, and cannot take the replicas off its database or chain.
      DATABASE_URL: `postgres://someone:${DATABASE_PASSWORD}@db.invalid:5432/elsewhere`,
      PORT: "1",
      SETTLER_PRIVATE_KEY: SETTLER_KEY,
    });
    started.push(run.child);
    const banner = await printed(run, "Press Ctrl-C to stop.", 110_000);

    const yours = /^Your settings: (.+) \(on every replica\)$/m.exec(banner)?.[1].split(", ");
    expect(yours, banner).to.have.members([
      "RATE_LIMIT_PER_MIN",
      "FEE_MODE",
      "FEE_BPS",
      "METRICS_TOKEN",
      "LEADER_LEASE_MS",
      "INDEXER_INTERVAL_MS",
    ]);
    const ignored = /^Ignored: +(.+) \(the cluster sets these itself\)$/m.exec(banner)?.[1].split(", ");
    expect(ignored, banner).to.have.members(["DATABASE_URL", "PORT", "SETTLER_PRIVATE_KEY"]);
    for (const secret of [METRICS_TOKEN, DATABASE_PASSWORD, SETTLER_KEY]) expect(run.output()).to.not.include(secret);
    expect(banner).to.match(/^Demo buyer: +demo-buyer, balance 10 USDC$/m);

    const key = /^API key: (atom_\S+)$/m.exec(banner)![1];
    const replica = /^replica-1 +(http:\/\/\S+)/m.exec(banner)![1];
    const res = await fetch(`${replica}/v1/call`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ skill_id: "echo", input: { hello: "world" } }),
    });
    const body: any = await res.json();
    expect(res.status, JSON.stringify(body)).to.equal(200);
    // RATE_LIMIT_PER_MIN, not the default 100; FEE_MODE=on_top with FEE_BPS: the echo's $0.001 and a 25% fee on top.
    expect(res.headers.get("ratelimit-limit")).to.equal("1000000");
    expect(body.metadata).to.include({ skill_id: "echo", price_paid: 0.00125 });
    // METRICS_TOKEN: /metrics is served (without a token it is not: 404).
    const metrics = await fetch(`${replica}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(metrics.status).to.equal(200);

    run.child.kill("SIGTERM");
    expect(await exitOf(run.child)).to.equal(0);
  });
});
