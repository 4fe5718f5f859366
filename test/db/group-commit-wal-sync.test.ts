import { expect } from "chai";
import fs from "node:fs";
import Database from "better-sqlite3";
import { openDatabase, type Db } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { GroupCommit } from "../../server/db/group-commit";
import { WalFileSync, type WalSync } from "../../server/db/wal-sync";
import { makeTempDir, rejectionOf } from "../helpers/ledger";

const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The real fsync of the log, held back until the test lets each one go (or makes it fail): a slow or failing disk on
 * demand. `started` counts the fsyncs asked for; `release(n)` lets the n-th (from 0) run and answer.
 */
class GatedWalSync implements WalSync {
  readonly gates: { open: () => void; fail: (error: Error) => void }[] = [];
  readonly real: WalFileSync;
  constructor(walPath: string) {
    this.real = new WalFileSync(walPath);
  }
  get started(): number {
    return this.gates.length;
  }
  async sync(): Promise<void> {
    await new Promise<void>((open, fail) => this.gates.push({ open, fail }));
    await this.real.sync();
  }
  release(n: number): void {
    this.gates[n].open();
  }
  fail(n: number, error: Error): void {
    this.gates[n].fail(error);
  }
  close(): void {
    this.real.close();
  }
}

/** Lets the event loop turn until `done()` (at most 50 turns). */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 50 && !done(); i++) await nextTick();
  expect(done(), "never came").to.equal(true);
}

/** Whether `promise` has settled by the time the event loop has turned a few times. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 5; i++) await nextTick();
  return done;
}

describe("GroupCommit with the log's fsync off the event loop", () => {
  let tmp: ReturnType<typeof makeTempDir>;
  let file: string;
  let db: Db;
  let reader: Database.Database;
  let commitErrors: unknown[];
  let wal: GatedWalSync;

  beforeEach(() => {
    tmp = makeTempDir();
    file = tmp.file("wal-sync.db");
    db = openDatabase(file, SCHEMA);
    db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)");
    reader = new Database(file, { readonly: true });
    commitErrors = [];
    wal = new GatedWalSync(`${file}-wal`);
  });

  afterEach(() => {
    wal.close();
    reader.close();
    db.close();
    tmp.remove();
  });

  const makeCommit = () => new GroupCommit(db, 512, (error) => commitErrors.push(error), 10, wal);
  const addNote = (body: string) => db.prepare("INSERT INTO notes (body) VALUES (?)").run(body);
  const committedNotes = () => reader.prepare("SELECT body FROM notes ORDER BY id").pluck().all() as string[];

  it("runs the connection at synchronous=NORMAL, the fsync being its own", () => {
    makeCommit();
    expect(db.pragma("synchronous", { simple: true })).to.equal(1n);
  });

  it("does not resolve durable() when the batch is committed, only once the fsync begun after its COMMIT completes", async () => {
    const commit = makeCommit();
    await commit.run(() => addNote("a charge"));
    const durable = commit.durable();
    await until(() => wal.started === 1);
    expect(committedNotes(), "committed").to.deep.equal(["a charge"]);
    expect(wal.started).to.equal(1);
    expect(await settled(durable), "answered before its fsync").to.equal(false);
    wal.release(0);
    await durable;
  });

  it("keeps the batches asked to be durable while an fsync is in flight open until it completes: one COMMIT, answered by the next fsync", async () => {
    // A long maxDelayMs: only the fsync's end may commit the batch here.
    const commit = new GroupCommit(db, 512, (error) => commitErrors.push(error), 60_000, wal);
    const first = commit.runDurable(() => addNote("first"));
    await until(() => wal.started === 1);
    const later = ["second", "third", "fourth"].map((body) => commit.runDurable(() => addNote(body)));
    expect(await settled(Promise.all(later))).to.equal(false);
    expect(committedNotes(), "committed while the fsync was in flight").to.deep.equal(["first"]);
    expect(commit.committedBatches).to.equal(1);
    wal.release(0);
    await first;
    await until(() => wal.started === 2);
    expect(committedNotes()).to.deep.equal(["first", "second", "third", "fourth"]);
    expect(commit.committedBatches, "the three in one COMMIT").to.equal(2);
    expect(await settled(Promise.all(later)), "answered by an fsync begun before their COMMIT").to.equal(false);
    wal.release(1);
    await Promise.all(later);
  });

  it("makes a durable() asked with no batch open wait for the fsync of what is already committed", async () => {
    // A replay reads the stored answer of a charge that may be committed and not yet synced.
    const commit = makeCommit();
    const charge = commit.runDurable(() => addNote("charge"));
    await until(() => wal.started === 1);
    expect(db.inTransaction).to.equal(false);
    const replay = commit.durable();
    expect(await settled(replay)).to.equal(false);
    wal.release(0);
    await Promise.all([charge, replay]);
    expect(wal.started, "the fsync in flight covered it").to.equal(1);
  });

  it("makes a durable() asked with no batch open, after a commit the fsync in flight does not cover, wait for the next fsync", async () => {
    const commit = makeCommit();
    const first = commit.runDurable(() => addNote("first"));
    await until(() => wal.started === 1);
    await commit.run(() => addNote("second"));
    commit.flush();
    expect(db.inTransaction).to.equal(false);
    const afterSecond = commit.durable();
    wal.release(0);
    await first;
    expect(await settled(afterSecond), "answered by the fsync begun before the second COMMIT").to.equal(false);
    await until(() => wal.started === 2);
    wal.release(1);
    await afterSecond;
  });

  it("starts no fsync for a batch nobody waits for, but makes a later durable() wait for one that covers it", async () => {
    const commit = makeCommit();
    await commit.run(() => addNote("a hold"));
    commit.flush();
    await until(() => committedNotes().length === 1);
    expect(wal.started, "an fsync nobody waits for").to.equal(0);
    const durable = commit.durable();
    await until(() => wal.started === 1);
    expect(await settled(durable)).to.equal(false);
    wal.release(0);
    await durable;
  });

  it("rejects the waiters of a batch whose fsync failed, reports it once and acknowledges nothing afterwards", async () => {
    const commit = makeCommit();
    const doomed = commit.runDurable(() => addNote("doomed"));
    await until(() => wal.started === 1);
    const meanwhile = commit.runDurable(() => addNote("meanwhile"));
    await until(() => db.inTransaction);
    wal.fail(0, Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }));
    const outcomes = await Promise.allSettled([doomed, meanwhile]);
    for (const outcome of outcomes) {
      expect(outcome.status).to.equal("rejected");
      const reason = (outcome as PromiseRejectedResult).reason as Error;
      expect(reason.message).to.contain("could not be synced");
      expect((reason.cause as { code: string }).code).to.equal("EIO");
    }
    expect(commitErrors).to.have.length(1);
    expect(wal.started, "no fsync after the failed one").to.equal(1);
    expect((await rejectionOf(commit.run(() => addNote("later")))).message).to.contain("could not be synced");
    expect((await rejectionOf(commit.durable())).message).to.contain("could not be synced");
    expect(committedNotes()).to.not.include("later");
  });

  it("drains: commits what is queued and waits for its fsync", async () => {
    const commit = makeCommit();
    void commit.run(() => addNote("queued"));
    const drained = commit.drain();
    expect(await settled(drained)).to.equal(false);
    wal.release(0);
    await drained;
    expect(committedNotes()).to.deep.equal(["queued"]);
  });

  it("syncs the real log: every acknowledged batch's frames are in the -wal file", async () => {
    const commit = new GroupCommit(db, 512, (error) => commitErrors.push(error), 10, new WalFileSync(`${file}-wal`));
    for (let i = 0; i < 20; i++) await commit.runDurable(() => addNote(`note ${i}`));
    expect(commitErrors).to.deep.equal([]);
    expect(committedNotes()).to.have.length(20);
    // A copy of the database file and its log, as a crash would leave them, recovers every note.
    fs.copyFileSync(file, tmp.file("copy.db"));
    fs.copyFileSync(`${file}-wal`, tmp.file("copy.db-wal"));
    const copy = new Database(tmp.file("copy.db"));
    try {
      expect(copy.prepare("SELECT COUNT(*) FROM notes").pluck().get()).to.equal(20);
    } finally {
      copy.close();
    }
  });
});

describe("WalFileSync", () => {
  let tmp: ReturnType<typeof makeTempDir>;
  beforeEach(() => (tmp = makeTempDir()));
  afterEach(() => tmp.remove());

  /** The files this process holds open, as /proc shows them. */
  const openFiles = () =>
    fs.readdirSync("/proc/self/fd").map((fd) => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return "";
      }
    });

  it("syncs the file now at the path when the one it kept was unlinked, and lets the old one go", async () => {
    const walPath = tmp.file("x.db-wal");
    fs.writeFileSync(walPath, "first");
    const sync = new WalFileSync(walPath);
    try {
      await sync.sync();
      expect(openFiles()).to.include(walPath);
      fs.unlinkSync(walPath);
      fs.writeFileSync(walPath, "second");
      await sync.sync();
      const open = openFiles();
      expect(open).to.include(walPath);
      expect(open, "the unlinked file is still held").to.not.include(`${walPath} (deleted)`);
    } finally {
      sync.close();
    }
  });

  it("fails when there is no log to sync", async () => {
    const sync = new WalFileSync(tmp.file("missing.db-wal"));
    expect((await rejectionOf(sync.sync())).message).to.contain("ENOENT");
  });
});
