import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { expect } from "chai";
import pg from "pg";
import { Leadership, type LeadershipOptions } from "../../server/db/leader";
import { CHILD_GUARD, TS_REGISTER } from "../../server/devstack/child-process";
import { type PostgresServer, startPostgresOrSkip } from "../helpers/postgres";

/**
 * One leader among replicas (server/db/leader.ts), against a real PostgreSQL server. The stated bound: once the
 * leader's session has ended, another replica leads within pollMs + leaseMs plus a round trip; the tests allow
 * SLACK_MS on top for a loaded two-core machine. "Never two leaders" is sampled every millisecond or so.
 */

const POLL_MS = 100;
const LEASE_MS = 300;
const BOUND_MS = POLL_MS + LEASE_MS;
const SLACK_MS = 1000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A replica in this process, with a record of when it was elected and lost. */
interface Replica {
  name: string;
  leadership: Leadership;
  events: string[];
}

/** Samples every replica's isLeader until stopped; fails the test if two ever lead at once. */
function watchForTwoLeaders(replicas: () => Replica[]): { stop(): { samples: number; overlaps: string[] } } {
  let samples = 0;
  const overlaps: string[] = [];
  const timer = setInterval(() => {
    samples++;
    const leading = replicas().filter((r) => r.leadership.isLeader);
    if (leading.length > 1) overlaps.push(leading.map((r) => r.name).join(" and "));
  }, 1);
  return {
    stop: () => {
      clearInterval(timer);
      return { samples, overlaps };
    },
  };
}

async function waitUntil(what: string, check: () => boolean, timeoutMs: number): Promise<number> {
  const started = performance.now();
  while (!check()) {
    if (performance.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(2);
  }
  return performance.now() - started;
}

describe("one leader among replicas (server/db/leader.ts)", function () {
  this.timeout(60_000);
  let server: PostgresServer;
  let admin: pg.Client;
  let replicas: Replica[] = [];
  let keys = 0;
  let key: string;

  function replica(name: string, extra: Partial<LeadershipOptions> = {}): Replica {
    const events: string[] = [];
    const leadership = new Leadership({
      url: server.url,
      key,
      pollMs: POLL_MS,
      leaseMs: LEASE_MS,
      applicationName: `leader-test ${name}`,
      onElected: () => events.push("elected"),
      onLost: (reason) => events.push(`lost: ${reason.message}`),
      ...extra,
    });
    const r = { name, leadership, events };
    replicas.push(r);
    return r;
  }

  before(async function () {
    server = await startPostgresOrSkip(this);
    admin = new pg.Client(server.url);
    await admin.connect();
  });
  beforeEach(() => {
    // A key per test, so a leftover session of one test cannot hold the next test's lock.
    key = `test-${++keys}`;
  });
  afterEach(async () => {
    await Promise.all(replicas.map((r) => r.leadership.stop()));
    replicas = [];
  });
  after(async () => {
    await admin?.end();
    await server?.stop();
  });

  it("refuses a lease no longer than the poll interval (a leader could not renew it in time)", () => {
    expect(() => new Leadership({ url: server.url, key, pollMs: 500, leaseMs: 500 })).to.throw(RangeError, /leaseMs > pollMs/);
  });

  it("elects exactly one of two contenders, and keeps it", async () => {
    const a = replica("a");
    const b = replica("b");
    await Promise.all([a.leadership.start(), b.leadership.start()]);
    await waitUntil("a leader", () => a.leadership.isLeader || b.leadership.isLeader, BOUND_MS + SLACK_MS);
    const watch = watchForTwoLeaders(() => [a, b]);
    const leader = a.leadership.isLeader ? a : b;
    await sleep(1000);
    const { samples, overlaps } = watch.stop();
    expect(overlaps).to.deep.equal([]);
    expect(samples).to.be.greaterThan(100);
    expect(leader.leadership.isLeader).to.equal(true);
    expect(leader.events).to.deep.equal(["elected"]);
    expect((leader === a ? b : a).events).to.deep.equal([]);
  });

  it("waits out a lease before acting: a lone replica leads no sooner than leaseMs after getting the lock", async () => {
    const a = replica("a");
    const started = performance.now();
    await a.leadership.start();
    expect(a.leadership.isLeader).to.equal(false);
    const tookMs = await waitUntil("a leads", () => a.leadership.isLeader, BOUND_MS + SLACK_MS);
    expect(performance.now() - started).to.be.at.least(LEASE_MS);
    expect(tookMs).to.be.below(LEASE_MS + SLACK_MS);
  });

  /** Two replicas, one leading; `end` ends the leader somehow; the other must lead within the bound, never both. */
  async function handover(end: (leader: Replica) => Promise<void>): Promise<{ leader: Replica; other: Replica; takeoverMs: number }> {
    const a = replica("a");
    await a.leadership.start();
    await waitUntil("a leads", () => a.leadership.isLeader, BOUND_MS + SLACK_MS);
    const b = replica("b");
    await b.leadership.start();
    await sleep(3 * POLL_MS);
    expect(b.leadership.isLeader).to.equal(false);
    const watch = watchForTwoLeaders(() => [a, b]);
    const endedAt = performance.now();
    await end(a);
    await waitUntil("b leads", () => b.leadership.isLeader, BOUND_MS + SLACK_MS);
    const takeoverMs = performance.now() - endedAt;
    await sleep(3 * POLL_MS);
    const { samples, overlaps } = watch.stop();
    expect(overlaps, "two leaders at once").to.deep.equal([]);
    expect(samples).to.be.greaterThan(50);
    expect(b.events).to.deep.equal(["elected"]);
    return { leader: a, other: b, takeoverMs };
  }

  it("hands over when the leader stops, within the bound", async () => {
    const { leader, takeoverMs } = await handover((r) => r.leadership.stop());
    expect(leader.events).to.deep.equal(["elected"]); // stop() is not a loss
    expect(takeoverMs).to.be.below(BOUND_MS + SLACK_MS);
  });

  it("hands over when the leader's backend is terminated: the leader stops at once, another leads within the bound", async () => {
    const { leader, takeoverMs } = await handover(async (r) => {
      const { rows } = await admin.query("SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE application_name = $1", [
        `leader-test ${r.name}`,
      ]);
      expect(rows).to.deep.equal([{ done: true }]);
      // The terminated leader hears it from its connection, well before anyone else may be elected.
      await waitUntil("the leader steps down", () => !r.leadership.isLeader, LEASE_MS);
    });
    expect(leader.events[0]).to.equal("elected");
    expect(leader.events[1]).to.match(/^lost: /);
    expect(takeoverMs).to.be.below(BOUND_MS + SLACK_MS);
    // The old leader contends again, and waits: still exactly one leader.
    await sleep(2 * BOUND_MS);
    expect(replicas.filter((r) => r.leadership.isLeader)).to.have.length(1);
  });

  it("hands over when the leading process is killed with SIGKILL, within the bound", async () => {
    const script = path.join(__dirname, "../helpers/leader-child.ts");
    const child: ChildProcess = spawn(
      process.execPath,
      ["--require", CHILD_GUARD, "-r", TS_REGISTER, script, JSON.stringify({ url: server.url, key, pollMs: POLL_MS, leaseMs: LEASE_MS })],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const lines: string[] = [];
    child.stdout!.on("data", (chunk: Buffer) => lines.push(...chunk.toString().split("\n").filter(Boolean)));
    const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    try {
      await waitUntil("the child leads", () => lines.includes("elected"), 20_000);
      const b = replica("b");
      await b.leadership.start();
      await sleep(3 * POLL_MS);
      expect(b.leadership.isLeader).to.equal(false);
      const killedAt = performance.now();
      child.kill("SIGKILL");
      await gone;
      await waitUntil("b leads", () => b.leadership.isLeader, BOUND_MS + SLACK_MS);
      expect(performance.now() - killedAt).to.be.below(BOUND_MS + SLACK_MS);
      expect(performance.now() - killedAt).to.be.at.least(LEASE_MS);
      expect(lines).to.deep.equal(["contending", "elected"]);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  });

  it("keeps a paused leader from leading past its lease, and elects another only after the server frees the lock", async () => {
    // A leader process frozen (SIGSTOP) keeps its connection, so the server keeps its lock: nobody else may lead,
    // and the frozen one, on waking, must not count itself leader on a lease it could not renew.
    const script = path.join(__dirname, "../helpers/leader-child.ts");
    const child = spawn(
      process.execPath,
      ["--require", CHILD_GUARD, "-r", TS_REGISTER, script, JSON.stringify({ url: server.url, key, pollMs: POLL_MS, leaseMs: LEASE_MS })],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const lines: string[] = [];
    child.stdout!.on("data", (chunk: Buffer) => lines.push(...chunk.toString().split("\n").filter(Boolean)));
    try {
      await waitUntil("the child leads", () => lines.includes("elected"), 20_000);
      const b = replica("b");
      await b.leadership.start();
      child.kill("SIGSTOP");
      await sleep(2 * BOUND_MS);
      expect(b.leadership.isLeader, "b leads while the frozen leader's session holds the lock").to.equal(false);
      child.kill("SIGCONT");
      // On waking, the child finds its lease lapsed and steps down (closing its session frees the lock).
      await waitUntil("the child steps down", () => lines.some((l) => l.startsWith("lost ")), 5_000);
      expect(lines.find((l) => l.startsWith("lost "))).to.match(/lease lapsed/);
      await waitUntil("b leads", () => b.leadership.isLeader, 5_000);
    } finally {
      child.kill("SIGKILL");
    }
  });
});
