import { expect } from "chai";
import Database from "better-sqlite3";
import { openDatabase, type Db } from "../../server/db/db";
import { SCHEMA } from "../../server/schema";
import { GroupCommit } from "../../server/db/group-commit";
import { makeTempDir, rejectionOf } from "../helpers/ledger";

/** Lets the event loop turn once: timers and setImmediate callbacks (a durable() flush) may run meanwhile. */
const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve));

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

  it("calls beforeCommit once before each COMMIT, while its batch is still uncommitted, and onCommit after", async () => {
    const commit = makeCommit();
    const seen: string[] = [];
    commit.beforeCommit = () => seen.push(`before: ${committedNotes().length} committed, in a transaction ${db.inTransaction}`);
    commit.onCommit = () => seen.push(`after: ${committedNotes().length} committed`);
    await Promise.all([commit.run(() => addNote("a")), commit.run(() => addNote("b"))]);
    await commit.durable();
    await commit.run(() => addNote("c"));
    await commit.durable();
    expect(seen).to.deep.equal([
      "before: 0 committed, in a transaction true",
      "after: 2 committed",
      "before: 2 committed, in a transaction true",
      "after: 3 committed",
    ]);
  });

  it("commits many operations run before the next tick as one batch", async () => {
    const commit = makeCommit();
    await Promise.all(Array.from({ length: 50 }, (_, i) => commit.run(() => addNote(`note ${i}`))));
    expect(committedNotes()).to.deep.equal([]);
    await commit.durable();
    expect(commit.committedBatches).to.equal(1);
    expect(committedNotes()).to.have.length(50);
  });

  it("resolves each operation with its result before anything is committed", async () => {
    const commit = makeCommit();
    const first = await commit.run(() => addNote("a").lastInsertRowid);
    const second = await commit.run(async () => addNote("b").lastInsertRowid);
    expect([first, second]).to.deep.equal([1n, 2n]);
    expect(commit.committedBatches).to.equal(0);
  });

  it("lets an operation see the writes of earlier operations in the same batch", async () => {
    const commit = makeCommit();
    await commit.run(() => addNote("first"));
    const seen = await commit.run(() => db.prepare("SELECT COUNT(*) FROM notes").pluck().get());
    expect(seen).to.equal(1n);
    expect(committedNotes()).to.deep.equal([]);
  });

  it("resolves durable() only once the batch is committed and visible to another connection", async () => {
    const commit = makeCommit();
    await commit.run(() => addNote("charged"));
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

  it("resolves every durable() waiter only after the commit that holds its write", async () => {
    const commit = makeCommit();
    const unseen: string[] = [];
    await Promise.all(
      ["a", "b", "c", "d"].map(async (body) => {
        await commit.run(async () => {
          addNote(body);
          // Yields, so that an earlier operation's durable() flush comes due while this one holds the turn.
          await nextTick();
        });
        await commit.durable();
        if (!committedNotes().includes(body)) unseen.push(body);
      }),
    );
    expect(unseen, "writes reported durable before another connection could read them").to.deep.equal([]);
    expect(committedNotes()).to.deep.equal(["a", "b", "c", "d"]);
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

  it("commits at once when asked to flush", async () => {
    const commit = makeCommit();
    await commit.run(() => addNote("now"));
    commit.flush();
    expect(commit.committedBatches).to.equal(1);
    expect(db.inTransaction).to.equal(false);
    expect(committedNotes()).to.deep.equal(["now"]);
  });

  it("rolls back only the operation that throws, keeping the rest of its batch", async () => {
    const commit = makeCommit();
    await commit.run(() => addNote("before"));
    const boom = new Error("skill backend exploded");
    expect(
      await rejectionOf(
        commit.run(() => {
          addNote("half-done");
          throw boom;
        }),
      ),
    ).to.equal(boom);
    await commit.run(() => addNote("after"));
    await commit.durable();
    expect(committedNotes()).to.deep.equal(["before", "after"]);
    expect(commitErrors).to.deep.equal([]);
  });

  it("commits the batch as soon as it holds maxOps operations", async () => {
    const commit = makeCommit(3);
    await commit.run(() => addNote("1"));
    await commit.run(() => addNote("2"));
    expect(commit.committedBatches).to.equal(0);
    expect(committedNotes()).to.deep.equal([]);
    await commit.run(() => addNote("3"));
    expect(commit.committedBatches).to.equal(1);
    expect(committedNotes()).to.deep.equal(["1", "2", "3"]);
    await commit.run(() => addNote("4"));
    expect(db.inTransaction, "the fourth operation opens a new batch").to.equal(true);
    expect(committedNotes()).to.have.length(3);
  });

  it("does not count a failed operation towards maxOps", async () => {
    const commit = makeCommit(2);
    await commit.run(() => addNote("1"));
    const error = await rejectionOf(
      commit.run(() => {
        throw new Error("refused");
      }),
    );
    expect(error.message).to.equal("refused");
    expect(commit.committedBatches).to.equal(0);
    await commit.run(() => addNote("2"));
    expect(commit.committedBatches).to.equal(1);
  });

  it("does not commit a write nobody waits for on the next tick, but within maxDelayMs", async () => {
    const commit = new GroupCommit(db, 512, (error) => commitErrors.push(error), 30);
    await commit.run(() => addNote("hold"));
    await nextTick();
    expect(committedNotes(), "committed before anyone waited").to.deep.equal([]);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(committedNotes()).to.deep.equal(["hold"]);
    expect(commit.committedBatches).to.equal(1);
  });

  it("commits a waited-for write together with the unwaited writes before it", async () => {
    const commit = makeCommit();
    await commit.run(() => addNote("hold"));
    await commit.runDurable(() => addNote("capture"));
    expect(committedNotes()).to.deep.equal(["hold", "capture"]);
    expect(commit.committedBatches).to.equal(1);
  });

  it("rejects the waiters of a batch that SQLite rolled back on its own, instead of calling it durable", async () => {
    const commit = makeCommit();
    await commit.run(() => addNote("capture"));
    const durable = commit.durable();
    db.exec("ROLLBACK"); // what SQLite does by itself on some I/O and disk-full errors
    const error = await rejectionOf(durable);
    expect(String(error)).to.contain("rolled back");
    expect(commitErrors).to.have.length(1);
    expect(committedNotes()).to.deep.equal([]);
  });

  describe("when operations run concurrently", () => {
    // An operation's function may yield (it awaits its statements); the next operation waits for its turn,
    // so it never writes inside another's savepoint, and a failure undoes only the operation that failed.

    it("never interleaves two operations inside one savepoint", async () => {
      const commit = makeCommit();
      const events: string[] = [];
      const failing = commit.run(async () => {
        events.push("A begins");
        addNote("A 1");
        await nextTick();
        addNote("A 2");
        events.push("A fails");
        throw new Error("A failed after yielding");
      });
      const passing = commit.run(async () => {
        events.push("B begins");
        addNote("B");
        await nextTick();
        events.push("B ends");
      });
      expect((await rejectionOf(failing)).message).to.equal("A failed after yielding");
      await passing;
      expect(events).to.deep.equal(["A begins", "A fails", "B begins", "B ends"]);
      await commit.durable();
      expect(committedNotes()).to.deep.equal(["B"]);
    });

    it("undoes only the failing one of many operations started at once", async () => {
      const commit = makeCommit();
      const outcomes = await Promise.allSettled(
        Array.from({ length: 9 }, (_, i) =>
          commit.run(async () => {
            addNote(`op ${i}`);
            await nextTick();
            if (i % 3 === 1) throw new Error(`op ${i} failed`);
            return i;
          }),
        ),
      );
      expect(outcomes.map((o) => o.status)).to.deep.equal(Array.from({ length: 9 }, (_, i) => (i % 3 === 1 ? "rejected" : "fulfilled")));
      await commit.durable();
      expect(committedNotes()).to.deep.equal(["op 0", "op 2", "op 3", "op 5", "op 6", "op 8"]);
      expect(commitErrors).to.deep.equal([]);
    });

    it("commits a flush asked for while an operation holds the turn as that turn ends, before the next begins", async () => {
      const commit = makeCommit();
      let resume!: () => void;
      const resumed = new Promise<void>((resolve) => (resume = resolve));
      const first = commit.run(async () => {
        addNote("first");
        await resumed;
      });
      const second = commit.run(() => {
        expect(committedNotes(), "the first operation's batch is committed before the second runs").to.deep.equal(["first"]);
        addNote("second");
      });
      await nextTick();
      commit.flush();
      expect(commit.committedBatches, "no commit in the middle of an operation").to.equal(0);
      expect(db.inTransaction).to.equal(true);
      expect(committedNotes()).to.deep.equal([]);
      resume();
      await first;
      expect(commit.committedBatches).to.equal(1);
      await second;
      expect(db.inTransaction, "the second operation opens a new batch").to.equal(true);
      await commit.durable();
      expect(committedNotes()).to.deep.equal(["first", "second"]);
    });

    it("resolves the durable() waiters of a turn-end commit only once it is on disk", async () => {
      const commit = makeCommit();
      await commit.run(() => addNote("waited for"));
      let resume!: () => void;
      const resumed = new Promise<void>((resolve) => (resume = resolve));
      const holding = commit.run(async () => {
        addNote("holds the turn");
        await resumed;
      });
      let durableAt: string[] | undefined;
      const durable = commit.durable().then(() => (durableAt = committedNotes()));
      await nextTick(); // durable()'s flush comes due, finds the turn held, and waits for its end
      expect(durableAt).to.equal(undefined);
      resume();
      await Promise.all([holding, durable]);
      expect(durableAt).to.deep.equal(["waited for", "holds the turn"]);
    });

    it("throws from the operation whose turn ended in a failed commit, whose caller cannot be waiting yet", async () => {
      const commit = makeCommit();
      const error = await rejectionOf(
        commit.run(async () => {
          addOrphan();
          await nextTick();
          commit.flush(); // as a timer or a durable() waiter would, while the operation holds the turn
        }),
      );
      expect(error).to.have.property("code", "SQLITE_CONSTRAINT_FOREIGNKEY");
      expect(commitErrors).to.deep.equal([error]);
      expect(db.inTransaction).to.equal(false);
      expect(committedNotes()).to.deep.equal([]);
    });

    it("drains: waits for the operations already queued, then commits", async () => {
      const commit = makeCommit();
      const queued = [
        commit.run(async () => {
          addNote("1");
          await nextTick();
        }),
        commit.run(() => addNote("2")),
      ];
      await commit.drain();
      expect(committedNotes()).to.deep.equal(["1", "2"]);
      expect(db.inTransaction).to.equal(false);
      await Promise.all(queued);
    });
  });

  describe("when a commit fails", () => {
    it("rejects the waiters, rolls the whole batch back and reports the error", async () => {
      const commit = makeCommit();
      await commit.run(() => addNote("in the doomed batch"));
      const first = commit.durable();
      await commit.run(() => addOrphan());
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
      await commit.run(() => addOrphan());
      await commit.durable().catch(() => undefined);
      await commit.runDurable(() => addNote("next batch"));
      expect(committedNotes()).to.deep.equal(["next batch"]);
      expect(commit.committedBatches).to.equal(1);
    });

    it("throws from the operation that filled the batch, whose caller cannot be waiting yet", async () => {
      const commit = makeCommit(2);
      await commit.run(() => addNote("first"));
      const first = commit.durable();
      const error = await rejectionOf(commit.run(() => addOrphan()));
      expect(error.message).to.contain("FOREIGN KEY constraint failed");
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
      await commit.run(() => addNote("earlier"));
      const earlier = commit.durable();
      expect((await rejectionOf(commit.run(() => addNote("disk full")))).message).to.equal("simulated disk full");
      const [outcome] = await Promise.allSettled([earlier]);
      expect(outcome.status).to.equal("rejected");
      expect((outcome as PromiseRejectedResult).reason).to.have.property("message", "simulated disk full");
      expect(commitErrors).to.have.length(1);
      expect(committedNotes()).to.deep.equal([]);
    });

    it("starts a fresh batch for the next operation", async () => {
      const commit = makeCommit();
      await commit.run(() => addNote("earlier"));
      expect((await rejectionOf(commit.run(() => addNote("disk full")))).message).to.equal("simulated disk full");
      await commit.runDurable(() => addNote("later"));
      expect(committedNotes()).to.deep.equal(["later"]);
    });
  });
});
