import { expect } from "chai";
import { PostgresDatabase } from "../../server/db/postgres/database";
import { createPostgresPool } from "../../server/db/postgres/pool";
import { PostgresWatch, isConnectionFailure } from "../../server/db/postgres/watch";
import { DatabaseUnavailableError, type Sql } from "../../server/db/sql";
import { type Frozen, freezePostgres } from "../helpers/freeze";
import { freshPostgresDatabase, sharedPostgres } from "../helpers/engines";
import { type PostgresServer, postgresUnavailableReason } from "../helpers/postgres";

/*
 * The watch on PostgreSQL (server/db/postgres/watch.ts) and what the database does with it, on a real server frozen
 * with SIGSTOP (the test process's shared server, ../helpers/engines.ts: no other test of this process runs meanwhile, and
 * each test thaws it): its sockets stay open and nothing answers, the failure that leaves a client waiting. The stated bound:
 * an operation waiting on a frozen server fails within the ping interval plus the ping timeout; the tests allow
 * SLACK_MS on top for a loaded two-core machine.
 */

const PING_TIMEOUT_MS = 200;
const INTERVAL_MS = 100;
const BOUND_MS = INTERVAL_MS + PING_TIMEOUT_MS;
const SLACK_MS = 1_500;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, timeoutMs: number, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** The error `promise` rejects with, and how long after `since` (performance.now()) it did. */
async function failure(promise: Promise<unknown>, since: number): Promise<{ error: unknown; afterMs: number }> {
  try {
    await promise;
  } catch (error) {
    return { error, afterMs: performance.now() - since };
  }
  throw new Error("expected the operation to fail, but it succeeded");
}

describe("a watched PostgreSQL database that stops answering (server/db/postgres/watch.ts)", function () {
  this.timeout(60_000);
  let server: PostgresServer;
  let url: string;
  let watch: PostgresWatch;
  let db: PostgresDatabase;
  /** Straight to the server, unwatched: what it holds once it reads again. */
  let look: PostgresDatabase;
  let frozen: Frozen | undefined;
  let table = 0;

  before(async function () {
    const missing = postgresUnavailableReason();
    if (missing !== null) {
      if (process.env.CI === "true") throw new Error(missing);
      console.warn(`      skipped: ${missing}`);
      this.skip();
    }
    server = (await sharedPostgres()).server;
    url = await freshPostgresDatabase();
  });
  beforeEach(async () => {
    watch = new PostgresWatch({ url, applicationName: "watch-test:watch", timeoutMs: PING_TIMEOUT_MS, intervalMs: INTERVAL_MS });
    await watch.start();
    db = new PostgresDatabase(createPostgresPool({ url, applicationName: "watch-test", max: 4 }), undefined, watch);
    look = new PostgresDatabase(createPostgresPool({ url, applicationName: "watch-test:look", max: 1 }));
  });
  afterEach(async () => {
    frozen?.thaw();
    frozen = undefined;
    await until("the server to answer again", 10_000, async () => watch.available);
    await db?.close();
    await look?.close();
  });
  after(() => frozen?.thaw());

  /** A fresh table of the test's own. */
  async function newTable(): Promise<string> {
    const name = `watched_${++table}`;
    await db.run(`CREATE TABLE ${name} (id INTEGER PRIMARY KEY)`);
    return name;
  }

  /**
   * A transaction that inserts into `name`, then waits until opened, then commits (with `more`, it sends one more
   * statement first): `inserted` resolves once its first row is written, `done` with the transaction.
   */
  function gatedInsert(name: string, more = false): { inserted: Promise<void>; open(): void; done: Promise<void> } {
    let open!: () => void;
    let inserted!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const written = new Promise<void>((resolve) => (inserted = resolve));
    const done = db.transaction(async (tx: Sql) => {
      await tx.run(`INSERT INTO ${name} (id) VALUES (1)`);
      inserted();
      await gate;
      if (more) await tx.run(`INSERT INTO ${name} (id) VALUES (2)`);
    });
    return { inserted: written, open, done };
  }

  it("answers as usual while the server answers", async () => {
    expect(watch.available).to.equal(true);
    expect(await db.value<number>("SELECT 41 + 1")).to.equal(42);
    expect(await db.transaction((tx) => tx.value<number>("SELECT 7"))).to.equal(7);
  });

  it("waits for a late ping while the server answers everything else, and counts it lost only once nothing is answered", async () => {
    // Only the watch's own backend stops: its ping goes unanswered while the server serves every other connection, as a
    // busy server keeps one query waiting. Failing every call at once then would turn slowness into an outage.
    const pid = Number(await look.value<number>("SELECT pid FROM pg_stat_activity WHERE application_name = 'watch-test:watch'"));
    expect(pid, "the watch's backend").to.be.above(0);
    frozen = { pids: [pid], thaw: () => process.kill(pid, "SIGCONT") };
    process.kill(pid, "SIGSTOP");
    const busyUntil = performance.now() + 6 * PING_TIMEOUT_MS;
    let answered = 0;
    while (performance.now() < busyUntil) {
      expect(await db.value<number>("SELECT 1")).to.equal(1);
      answered++;
      expect(watch.available, `unavailable after ${answered} answered statements`).to.equal(true);
      await sleep(PING_TIMEOUT_MS / 4);
    }
    // Nothing else is asked now: the ping is the only question, unanswered for the timeout, and the database counts as
    // unavailable until a probe on a new connection (another backend, which answers) finds it again.
    const quietAt = performance.now();
    await until("the watch to count the ping lost", 10_000, () => !watch.available);
    expect(performance.now() - quietAt).to.be.below(BOUND_MS + SLACK_MS);
    await until("a probe to find the server again", 10_000, () => watch.available);
    expect(await db.value<number>("SELECT 2")).to.equal(2);
  });

  it("fails a statement waiting on a frozen server within the bound, then every new one at once, and answers again once thawed", async () => {
    frozen = freezePostgres(server);
    const startedAt = performance.now();
    const waiting = await failure(db.value("SELECT 1"), startedAt);
    expect(waiting.error).to.be.instanceOf(DatabaseUnavailableError);
    expect((waiting.error as DatabaseUnavailableError).code).to.equal("database_unavailable");
    expect(waiting.afterMs, `failed after ${Math.round(waiting.afterMs)} ms`).to.be.below(BOUND_MS + SLACK_MS);
    expect(watch.available).to.equal(false);

    const next = await failure(
      db.transaction((tx) => tx.run("SELECT 1")),
      performance.now(),
    );
    expect(next.error).to.be.instanceOf(DatabaseUnavailableError);
    expect((next.error as DatabaseUnavailableError).mayHaveCommitted).to.equal(false);
    expect(next.afterMs, "a new operation fails without waiting").to.be.below(100);

    frozen.thaw();
    const thawedAt = performance.now();
    await until("the watch to find the server again", 10_000, () => watch.available);
    console.log(`      the watch found the thawed server after ${Math.round(performance.now() - thawedAt)} ms`);
    expect(await db.value<number>("SELECT 1")).to.equal(1);
  });

  it("fails a transaction waiting on a statement before its COMMIT as not committed, and the server rolls it back", async () => {
    const name = await newTable();
    const insert = gatedInsert(name, true);
    await insert.inserted;
    const removed = new Promise<void>((resolve) => db.pool.once("remove", () => resolve()));
    frozen = freezePostgres(server);
    insert.open();
    const { error } = await failure(insert.done, performance.now());
    expect(error).to.be.instanceOf(DatabaseUnavailableError);
    expect((error as DatabaseUnavailableError).mayHaveCommitted).to.equal(false);
    // Its connection is closed while the server is still frozen, not kept open (pipelined, node-postgres would wait
    // for the answers still due on it) until the server answers again.
    const closed = await Promise.race([
      removed.then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 2_000)),
    ]);
    expect(closed, "the unanswered connection was closed while the server was frozen").to.equal(true);
    frozen.thaw();
    await until("the abandoned transaction's session to end", 10_000, async () => {
      const sessions = await look.value<bigint>(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'watch-test' AND state <> 'idle'",
      );
      return sessions === 0n;
    });
    expect(await look.value<bigint>(`SELECT COUNT(*) FROM ${name}`)).to.equal(0n);
  });

  it("fails a transaction whose COMMIT went unanswered as one that may have committed, which it does once the server reads it", async () => {
    const name = await newTable();
    const insert = gatedInsert(name);
    await insert.inserted;
    frozen = freezePostgres(server);
    insert.open();
    const { error } = await failure(insert.done, performance.now());
    expect(error).to.be.instanceOf(DatabaseUnavailableError);
    expect((error as DatabaseUnavailableError).mayHaveCommitted).to.equal(true);
    frozen.thaw();
    await until(
      "the COMMIT sent before the freeze to commit",
      10_000,
      async () => (await look.value<bigint>(`SELECT COUNT(*) FROM ${name}`)) === 1n,
    );
  });

  it("answers a member of a careful group whose undoing the silent server left unanswered, rather than never", async () => {
    const name = await newTable();
    // A group still running, so the two members below form one group of their own.
    const busy = db.transaction((tx) => tx.value("SELECT pg_sleep(0.05)"), { durable: true, group: true });
    let runs = 0;
    // The first throws, so the group is rolled back and the second runs again, carefully, in a savepoint; there it
    // throws too, just as the server stops answering: its ROLLBACK TO SAVEPOINT goes unanswered.
    const thrower = db.transaction(
      async (tx) => {
        await tx.run(`INSERT INTO ${name} (id) VALUES (1)`);
        throw new Error("the first member fails");
      },
      { durable: true, group: true },
    );
    const second = db.transaction(
      async (tx) => {
        await tx.run(`INSERT INTO ${name} (id) VALUES (2)`);
        if (++runs === 2) {
          frozen = freezePostgres(server);
          throw new Error("the second member fails when run again");
        }
      },
      { durable: true, group: true },
    );
    await busy;
    expect((await failure(thrower, performance.now())).error).to.have.property("message", "the first member fails");
    const { error } = await failure(second, performance.now());
    expect(runs).to.equal(2);
    expect(error).to.be.instanceOf(DatabaseUnavailableError);
    expect((error as DatabaseUnavailableError).mayHaveCommitted).to.equal(false);
    frozen!.thaw();
    await until("the abandoned group's session to end", 10_000, async () => {
      const sessions = await look.value<bigint>(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'watch-test' AND state <> 'idle'",
      );
      return sessions === 0n;
    });
    expect(await look.value<bigint>(`SELECT COUNT(*) FROM ${name}`)).to.equal(0n);
  });

  it("fails grouped durable transactions when the server stops answering, none committed unless reported as maybe committed", async () => {
    const name = await newTable();
    let open!: () => void;
    let inserted!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const first = new Promise<void>((resolve) => (inserted = resolve));
    const group = [1, 2, 3].map((id) =>
      db.transaction(
        async (tx) => {
          await tx.run(`INSERT INTO ${name} (id) VALUES (?)`, [id]);
          inserted();
          await gate;
        },
        { durable: true, group: true },
      ),
    );
    await first;
    frozen = freezePostgres(server);
    open();
    const failures = await Promise.all(group.map((member) => failure(member, performance.now())));
    // The first member formed a group alone, which then sent its COMMIT to the silent server: it fails as one that may
    // have committed (a server that reads the COMMIT later commits it), and the two waiting for the next group find the
    // database unavailable before they send anything.
    for (const { error } of failures) expect(error).to.be.instanceOf(DatabaseUnavailableError);
    expect(failures.map((f) => (f.error as DatabaseUnavailableError).mayHaveCommitted)).to.deep.equal([true, false, false]);
    frozen.thaw();
    await until("the abandoned group's session to end", 10_000, async () => {
      const sessions = await look.value<bigint>(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'watch-test' AND state <> 'idle'",
      );
      return sessions === 0n;
    });
    // Only the member whose COMMIT was sent may have committed (the server reads it when it wakes); the others did not.
    const ids = await look.all<{ id: unknown }>(`SELECT id FROM ${name}`);
    expect(JSON.stringify(ids.map((r) => Number(r.id)))).to.be.oneOf(["[]", "[1]"]);
  });

  it("replaces its connection when the server closes it while idle, without counting the database unavailable", async () => {
    const watchPid = () => look.value<number>("SELECT pid FROM pg_stat_activity WHERE application_name = 'watch-test:watch'");
    const before = await watchPid();
    expect(before).to.be.a("number");
    await look.run("SELECT pg_terminate_backend(?)", [before!]);
    let unavailable = 0;
    const deadline = Date.now() + 4 * INTERVAL_MS + 500;
    while (Date.now() < deadline) {
      if (!watch.available) unavailable++;
      await sleep(5);
    }
    expect(unavailable, "samples that found the database unavailable").to.equal(0);
    const after = await watchPid();
    expect(after).to.be.a("number").and.not.equal(before);
  });

  it("fails at once, as unavailable, on a server that refuses connections", async () => {
    const gone = new PostgresDatabase(createPostgresPool({ url: url.replace(`:${server.port}/`, ":1/"), max: 1 }));
    try {
      const { error } = await failure(gone.value("SELECT 1"), performance.now());
      expect(error).to.be.instanceOf(DatabaseUnavailableError);
    } finally {
      await gone.close();
    }
  });

  it("tells a broken connection from a statement the server refused", () => {
    const refused = Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" });
    const unique = Object.assign(new Error("duplicate key"), { code: "23505" });
    expect(isConnectionFailure(refused)).to.equal(false);
    expect(isConnectionFailure(unique)).to.equal(false);
    expect(isConnectionFailure(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }))).to.equal(true);
    expect(
      isConnectionFailure(Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" })),
    ).to.equal(true);
    expect(isConnectionFailure(new Error("Connection terminated unexpectedly"))).to.equal(true);
    expect(isConnectionFailure(new Error("timeout exceeded when trying to connect"))).to.equal(true);
  });
});
