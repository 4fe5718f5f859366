import type Sqlite from "better-sqlite3";
import type { Db } from "./db";
import { DIALECTS, type Database, type Sql, type SqlParam, type TransactionOptions } from "./sql";
import { GroupCommit } from "./group-commit";

/**
 * The gateway's tables in one SQLite file (the embedded default): the `Database` of server/db/sql.ts over
 * better-sqlite3. Statements are prepared once per text and kept. Transactions are operations of the
 * group commit (./group-commit.ts): they take turns on the one connection and share fsyncs.
 *
 * better-sqlite3 runs each statement synchronously, so a transaction's statements resolve at once and a
 * turn lasts microseconds. A transaction is bound to the same connection as the database itself: SQLite
 * has one, and a read outside any transaction sees the open batch's writes, as the next operation will.
 */
export class SqliteDatabase implements Database {
  readonly engine = "sqlite" as const;
  readonly dialect = DIALECTS.sqlite;
  readonly commit: GroupCommit;
  private readonly rows = new Map<string, Sqlite.Statement>();
  private readonly values = new Map<string, Sqlite.Statement>();

  constructor(
    /** The connection (server/db/db.ts openDatabase): migrations, the startup checks and tests read it directly. */
    readonly db: Db,
    commit?: GroupCommit,
  ) {
    this.commit = commit ?? new GroupCommit(db);
  }

  private statement(sql: string): Sqlite.Statement {
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

  async transaction<T>(fn: (tx: Sql) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const result = await this.commit.run(() => fn(this));
    if (options.durable) await this.commit.durable();
    return result;
  }

  durable(): Promise<void> {
    return this.commit.durable();
  }

  async close(): Promise<void> {
    if (this.db.open) {
      this.commit.flush();
      this.db.close();
    }
  }
}
