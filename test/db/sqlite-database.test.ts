import { expect } from "chai";
import { openSqliteWriterConnection } from "../../server/db/sqlite-database";
import { WriterLock } from "../../server/db/writer-lock";
import { makeTempDir } from "../helpers/ledger";
import { copyMigratedSqlite } from "../helpers/sqlite-template";

describe("openSqliteWriterConnection (the ledger writer thread's connection)", () => {
  let tmp: ReturnType<typeof makeTempDir>;
  beforeEach(() => (tmp = makeTempDir()));
  afterEach(() => tmp.remove());

  it("calls beforeBlocking before it waits for the file's lock and before each COMMIT, nowhere else", async () => {
    const file = tmp.file("writer.db");
    copyMigratedSqlite(file);
    const seen: string[] = [];
    const connection = openSqliteWriterConnection(file, new WriterLock(), {
      onCommitError: () => {},
      maxDelayMs: 1_000,
      // What the thread does then: send the answers it has decided (server/gateway/ledger-writer-thread.ts).
      beforeBlocking: () => seen.push(connection.db.inTransaction ? "before COMMIT" : "before the lock"),
    });
    try {
      connection.db.exec("CREATE TABLE notes (body TEXT NOT NULL)");
      const add = (body: string) => connection.commit.run(() => connection.db.prepare("INSERT INTO notes (body) VALUES (?)").run(body));
      await Promise.all([add("a"), add("b")]);
      expect(seen, "one batch, one wait for the lock at its BEGIN").to.deep.equal(["before the lock"]);
      await connection.commit.durable();
      await add("c");
      await connection.commit.durable();
      expect(seen).to.deep.equal(["before the lock", "before COMMIT", "before the lock", "before COMMIT"]);
    } finally {
      await connection.close();
    }
  });
});
