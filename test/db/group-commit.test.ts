import { expect } from "chai";
import Database from "better-sqlite3";
import { openDatabase, type Db } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { GroupCommit } from "../../server/db/group-commit";
import { makeTempDir } from "../helpers/ledger";

describe("GroupCommit", () => {
  let tmp: ReturnType<typeof makeTempDir>;
  let db: Db;
  let reader: Database.Database;
  let commitErrors: unknown[];

  // A file database, so that a second connection sees only what was committed.
  beforeEach(() => {
    tmp = makeTempDir();
    db = openDatabase(tmp.file("group-commit.db"), SCHEMA);
    db.exec(`
      CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
      CREATE TABLE parent (id INTEGER PRIMARY KEY);
      CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
    `);
    reader = new Database(tmp.file("group-commit.db"), { readonly: true });
    commitErrors = [];
  });

  afterEach(() => {
    reader.close();
    db.close();
    tmp.remove();
  });

  const makeCommit = (maxOps = 512) => new GroupCommit(db, maxOps, (error) => commitErrors.push(error));
  const addNote = (body: string) => db.prepare("INSERT INTO notes (body) VALUES (?)").run(body);
  const committedNotes = () => reader.prepare("SELECT body FROM notes ORDER BY id").pluck().all() as string[];
  // The foreign key is deferred, so the orphan is accepted now and refused by COMMIT.
  const addOrphan = () => db.prepare("INSERT INTO child (parent_id) VALUES (404)").run();

  it("commits many operations run before the next tick as one batch", async () => {
    const commit = makeCommit();
    for (let i = 0; i < 50; i++) commit.run(() => addNote(`note ${i}`));
    expect(committedNotes()).to.deep.equal([]);
    await commit.durable();
    expect(commit.committedBatches).to.equal(1);
    expect(committedNotes()).to.have.length(50);
  });

  it("returns each operation's result at once, before anything is committed", () => {
    const commit = makeCommit();
    const first = commit.run(() => addNote("a").lastInsertRowid);
    const second = commit.run(() => addNote("b").lastInsertRowid);
    expect([first, second]).to.deep.equal([1n, 2n]);
    expect(commit.committedBatches).to.equal(0);
  });

  it("lets an operation see the writes of earlier operations in the same batch", () => {
    const commit = makeCommit();
    commit.run(() => addNote("first"));
    const seen = commit.run(() => db.prepare("SELECT COUNT(*) FROM notes").pluck().get());
    expect(seen).to.equal(1n);
    expect(committedNotes()).to.deep.equal([]);
  });

  it("resolves durable() only once the batch is committed and visible to another connection", async () => {
    const commit = makeCommit();
    commit.run(() => addNote("charged"));
    let seenAtResolve: string[] | undefined;
    const durable = commit.durable().then(() => {
      seenAtResolve = committedNotes();
    });
    await Promise.resolve();
    expect(seenAtResolve, "durable() resolved before the flush").to.equal(undefined);
    expect(committedNotes()).to.deep.equal([]);
    await durable;
    expect(seenAtResolve).to.deep.equal(["charged"]);
  });

  it("resolves durable() at once when no batch is open", async () => {
    const commit = makeCommit();
    expect(db.inTransaction).to.equal(false);
    await commit.durable();
    expect(commit.committedBatches).to.equal(0);
  });

  it("resolves runDurable() with the operation's result once it is committed", async () => {
    const commit = makeCommit();
    const id = await commit.runDurable(() => addNote("durable").lastInsertRowid);
    expect(id).to.equal(1n);
    expect(committedNotes()).to.deep.equal(["durable"]);
  });

  it("commits at once when asked to flush", () => {
    const commit = makeCommit();
    commit.run(() => addNote("now"));
    commit.flush();
    expect(commit.committedBatches).to.equal(1);
    expect(db.inTransaction).to.equal(false);
    expect(committedNotes()).to.deep.equal(["now"]);
  });

  it("rolls back only the operation that throws, keeping the rest of its batch", async () => {
    const commit = makeCommit();
    commit.run(() => addNote("before"));
    const boom = new Error("skill backend exploded");
    expect(() =>
      commit.run(() => {
        addNote("half-done");
        throw boom;
      }),
    ).to.throw(boom);
    commit.run(() => addNote("after"));
    await commit.durable();
    expect(committedNotes()).to.deep.equal(["before", "after"]);
    expect(commitErrors).to.deep.equal([]);
  });

  it("commits the batch as soon as it holds maxOps operations", () => {
    const commit = makeCommit(3);
    commit.run(() => addNote("1"));
    commit.run(() => addNote("2"));
    expect(commit.committedBatches).to.equal(0);
    expect(committedNotes()).to.deep.equal([]);
    commit.run(() => addNote("3"));
    expect(commit.committedBatches).to.equal(1);
    expect(committedNotes()).to.deep.equal(["1", "2", "3"]);
    commit.run(() => addNote("4"));
    expect(db.inTransaction, "the fourth operation opens a new batch").to.equal(true);
    expect(committedNotes()).to.have.length(3);
  });

  it("does not count a failed operation towards maxOps", () => {
    const commit = makeCommit(2);
    commit.run(() => addNote("1"));
    expect(() =>
      commit.run(() => {
        throw new Error("refused");
      }),
    ).to.throw("refused");
    expect(commit.committedBatches).to.equal(0);
    commit.run(() => addNote("2"));
    expect(commit.committedBatches).to.equal(1);
  });

  it("does not flush in the middle of an operation that nests others", () => {
    const commit = makeCommit(1);
    commit.run(() => {
      commit.run(() => addNote("inner 1"));
      commit.run(() => addNote("inner 2"));
      expect(commit.committedBatches).to.equal(0);
      expect(db.inTransaction).to.equal(true);
      expect(committedNotes()).to.deep.equal([]);
      addNote("outer");
    });
    expect(commit.committedBatches).to.equal(1);
    expect(committedNotes()).to.deep.equal(["inner 1", "inner 2", "outer"]);
  });

  it("rolls back a nested operation that throws while the enclosing one carries on", async () => {
    const commit = makeCommit();
    commit.run(() => {
      addNote("outer");
      try {
        commit.run(() => {
          addNote("inner, undone");
          throw new Error("inner failed");
        });
      } catch {
        // The enclosing operation decides what an inner failure means; here it goes on.
      }
      addNote("outer, continued");
    });
    await commit.durable();
    expect(committedNotes()).to.deep.equal(["outer", "outer, continued"]);
  });

  it("does not commit a write nobody waits for on the next tick, but within maxDelayMs", async () => {
    const commit = new GroupCommit(db, 512, (error) => commitErrors.push(error), 30);
    commit.run(() => addNote("hold"));
    await new Promise((resolve) => setImmediate(resolve));
    expect(committedNotes(), "committed before anyone waited").to.deep.equal([]);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(committedNotes()).to.deep.equal(["hold"]);
    expect(commit.committedBatches).to.equal(1);
  });

  it("commits a waited-for write together with the unwaited writes before it", async () => {
    const commit = makeCommit();
    commit.run(() => addNote("hold"));
    await commit.runDurable(() => addNote("capture"));
    expect(committedNotes()).to.deep.equal(["hold", "capture"]);
    expect(commit.committedBatches).to.equal(1);
  });

  it("rejects the waiters of a batch that SQLite rolled back on its own, instead of calling it durable", async () => {
    const commit = makeCommit();
    commit.run(() => addNote("capture"));
    const durable = commit.durable();
    db.exec("ROLLBACK"); // what SQLite does by itself on some I/O and disk-full errors
    let error: unknown;
    await durable.catch((e) => (error = e));
    expect(String(error)).to.contain("rolled back");
    expect(commitErrors).to.have.length(1);
    expect(committedNotes()).to.deep.equal([]);
  });

  it("refuses flush() from inside an operation", () => {
    const commit = makeCommit();
    expect(() => commit.run(() => commit.flush())).to.throw("GroupCommit.flush called inside an operation");
    expect(commit.committedBatches).to.equal(0);
  });

  describe("when a commit fails", () => {
    it("rejects the waiters, rolls the whole batch back and reports the error", async () => {
      const commit = makeCommit();
      commit.run(() => addNote("in the doomed batch"));
      const first = commit.durable();
      commit.run(() => addOrphan());
      const second = commit.durable();
      const outcomes = await Promise.allSettled([first, second]);
      for (const outcome of outcomes) {
        expect(outcome.status).to.equal("rejected");
        expect((outcome as PromiseRejectedResult).reason).to.have.property("code", "SQLITE_CONSTRAINT_FOREIGNKEY");
      }
      expect(commitErrors).to.have.length(1);
      expect(commitErrors[0]).to.equal((outcomes[0] as PromiseRejectedResult).reason);
      expect(commit.committedBatches).to.equal(0);
      expect(db.inTransaction).to.equal(false);
      expect(committedNotes()).to.deep.equal([]);
      expect(db.prepare("SELECT COUNT(*) FROM notes").pluck().get(), "rolled back on the writer too").to.equal(0n);
    });

    it("starts a fresh batch afterwards", async () => {
      const commit = makeCommit();
      commit.run(() => addOrphan());
      await commit.durable().catch(() => undefined);
      await commit.runDurable(() => addNote("next batch"));
      expect(committedNotes()).to.deep.equal(["next batch"]);
      expect(commit.committedBatches).to.equal(1);
    });

    it("throws from the operation that filled the batch, whose caller cannot be waiting yet", async () => {
      const commit = makeCommit(2);
      commit.run(() => addNote("first"));
      const first = commit.durable();
      expect(() => commit.run(() => addOrphan())).to.throw("FOREIGN KEY constraint failed");
      const [outcome] = await Promise.allSettled([first]);
      expect(outcome.status).to.equal("rejected");
      expect(committedNotes()).to.deep.equal([]);
      expect(commitErrors).to.have.length(1);
    });
  });

  describe("when an operation's failure makes SQLite roll back the whole transaction", () => {
    // SQLite may end the whole transaction, not only the failing statement, on SQLITE_FULL,
    // SQLITE_IOERR, SQLITE_BUSY or SQLITE_NOMEM. RAISE(ROLLBACK) in a trigger does the same
    // on demand, so it stands in for a full disk here.
    beforeEach(() => {
      db.exec(`CREATE TEMP TRIGGER disk_full BEFORE INSERT ON notes WHEN NEW.body = 'disk full'
               BEGIN SELECT RAISE(ROLLBACK, 'simulated disk full'); END`);
    });

    it("rejects the waiters of the batch's earlier operations, which are lost", async () => {
      const commit = makeCommit();
      commit.run(() => addNote("earlier"));
      const earlier = commit.durable();
      expect(() => commit.run(() => addNote("disk full"))).to.throw("simulated disk full");
      const [outcome] = await Promise.allSettled([earlier]);
      expect(outcome.status).to.equal("rejected");
      expect((outcome as PromiseRejectedResult).reason).to.have.property("message", "simulated disk full");
      expect(commitErrors).to.have.length(1);
      expect(committedNotes()).to.deep.equal([]);
    });

    it("starts a fresh batch for the next operation", async () => {
      const commit = makeCommit();
      commit.run(() => addNote("earlier"));
      expect(() => commit.run(() => addNote("disk full"))).to.throw("simulated disk full");
      await commit.runDurable(() => addNote("later"));
      expect(committedNotes()).to.deep.equal(["later"]);
    });
  });
});
