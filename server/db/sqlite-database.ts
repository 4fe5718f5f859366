import { AsyncLocalStorage } from "node:async_hooks";
import type Sqlite from "better-sqlite3";
import type { Db } from "./db";
import { DIALECTS, type Database, type Sql, type SqlParam, type TransactionOptions } from "./sql";
import { GroupCommit } from "./group-commit";
import { openDatabase } from "./db";
import type { WriterLock } from "./writer-lock";

/** Runs statements on the connection at once, each prepared once per text and kept. */
class SqliteStatements implements Sql {
  readonly engine = "sqlite" as const;
  readonly dialect = DIALECTS.sqlite;
  private readonly rows = new Map<string, Sqlite.Statement>();
  private readonly values = new Map<string, Sqlite.Statement>();

  constructor(private readonly db: Db) {}

  statement(sql: string): Sqlite.Statement {
    let stmt = this.rows.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      this.rows.set(sql, stmt);
    }
    return stmt;
  }

  async one<T>(sql: string, params: readonly SqlParam[] = []): Promise<T | undefined> {
    return this.statement(sql).get(...params) as T | undefined;
  }

  async all<T>(sql: string, params: readonly SqlParam[] = []): Promise<T[]> {
    return this.statement(sql).all(...params) as T[];
  }

  async value<T>(sql: string, params: readonly SqlParam[] = []): Promise<T | undefined> {
    let stmt = this.values.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql).pluck();
      this.values.set(sql, stmt);
    }
    return stmt.get(...params) as T | undefined;
  }

  async run(sql: string, params: readonly SqlParam[] = []): Promise<number> {
    return this.statement(sql).run(...params).changes;
  }
}

/**
 * Marks the async context of the transaction holding a database's turn (to refuse what would deadlock): its store is
 * that transaction's token. One for the process, shared by every SqliteDatabase: Node keeps each AsyncLocalStorage
 * ever run in a list it walks on every promise and async resource made, so one per database would make every later
 * promise cost more for each database a process has opened (a test run opens hundreds).
 */
const TURN = new AsyncLocalStorage<object>();

/**
 * The gateway's tables in one SQLite file (the embedded default): the `Database` of server/db/sql.ts over
 * better-sqlite3. Transactions are operations of the group commit (./group-commit.ts): they take turns on the
 * one connection and share fsyncs.
 *
 * better-sqlite3 runs each statement synchronously, so a transaction's statements resolve at once and a
 * turn lasts microseconds. Yet a transaction's function still yields between its awaits, and other code
 * runs meanwhile on the same connection: so a statement that writes, run on the database rather than on a
 * transaction's `tx`, is an operation of its own and waits for the writer's turn (run at once, it would land
 * inside whichever operation's savepoint is open, and be undone with that operation if it failed). A read
 * runs at once: it sees what the open batch has written so far, as the next operation will.
 *
 * A statement or a transaction asked of the database from inside one of its transactions would wait for
 * that transaction's own turn for ever: it is refused with an error instead (pass the transaction's `tx`).
 */
export class SqliteDatabase implements Database {
  readonly engine = "sqlite" as const;
  readonly dialect = DIALECTS.sqlite;
  readonly commit: GroupCommit;
  /** What a transaction's function is given: statements run at once, inside its turn. */
  private readonly statements: SqliteStatements;
  /** The token of the transaction holding the turn, which its async context carries in TURN. */
  private current: object | undefined;

  constructor(
    /** The connection (server/db/db.ts openDatabase): migrations, the startup checks and tests read it directly. */
    readonly db: Db,
    commit?: GroupCommit,
  ) {
    this.commit = commit ?? new GroupCommit(db);
    this.statements = new SqliteStatements(db);
  }

  one<T>(sql: string, params?: readonly SqlParam[]): Promise<T | undefined> {
    return this.outside(sql, () => this.statements.one<T>(sql, params));
  }

  all<T>(sql: string, params?: readonly SqlParam[]): Promise<T[]> {
    return this.outside(sql, () => this.statements.all<T>(sql, params));
  }

  value<T>(sql: string, params?: readonly SqlParam[]): Promise<T | undefined> {
    return this.outside(sql, () => this.statements.value<T>(sql, params));
  }

  run(sql: string, params?: readonly SqlParam[]): Promise<number> {
    return this.outside(sql, () => this.statements.run(sql, params));
  }

  /** A statement outside any transaction: a read at once, a write as an operation of its own. */
  private async outside<T>(sql: string, exec: () => Promise<T>): Promise<T> {
    if (this.statements.statement(sql).readonly) return exec();
    this.refuseInsideTransaction("a statement that writes");
    return this.commit.run(exec);
  }

  async transaction<T>(fn: (tx: Sql) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    this.refuseInsideTransaction("a transaction");
    const result = await this.commit.run(async () => {
      const token = {};
      this.current = token;
      try {
        return await TURN.run(token, () => fn(this.statements));
      } finally {
        this.current = undefined;
      }
    });
    if (options.durable) await this.commit.durable();
    return result;
  }

  insideTransaction(): boolean {
    return this.current !== undefined && TURN.getStore() === this.current;
  }

  private refuseInsideTransaction(what: string): void {
    if (this.insideTransaction()) {
      throw new Error(`${what} on the database from inside one of its transactions would wait for that transaction for ever: use its tx`);
    }
  }

  durable(): Promise<void> {
    return this.commit.durable();
  }

  /** Lets the operations already queued finish, commits, and closes the connection. */
  async close(): Promise<void> {
    if (!this.db.open) return;
    try {
      await this.commit.drain();
    } finally {
      this.db.close();
    }
  }
}

/**
 * A second connection to a gateway's SQLite file (migrated by the first), for a worker thread that writes to it beside
 * the event loop's connection (the ledger writer: server/gateway/ledger-writer.ts). Its group commit takes `lock`
 * blocking (the thread has nothing else to do meanwhile) and runs at synchronous=FULL, so its COMMIT's fsync holds
 * this thread, not the event loop; a batch nobody awaits commits within `maxDelayMs`, or at once when the event
 * loop waits for the file.
 */
export function openSqliteWriterConnection(
  file: string,
  lock: WriterLock,
  options: {
    onCommitError: (error: unknown) => void;
    maxDelayMs: number;
    /** Called before the thread blocks: before it waits for `lock`, and before each COMMIT (its fsync). */
    beforeBlocking?: () => void;
  },
): SqliteDatabase {
  const connection = openDatabase(file, []);
  const commit = new GroupCommit(connection, 512, options.onCommitError, options.maxDelayMs, undefined, {
    lock: {
      acquire: () => {
        options.beforeBlocking?.();
        lock.acquireBlocking();
      },
      release: () => lock.release(),
      get contended() {
        return lock.contended;
      },
    },
    commitEachTurn: false,
  });
  commit.beforeCommit = options.beforeBlocking;
  return new SqliteDatabase(connection, commit);
}
