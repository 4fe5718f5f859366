/**
 * The one way the gateway's stores speak SQL, whichever engine holds the tables: SQLite (the embedded
 * default, server/db/sqlite-database.ts) or PostgreSQL (DATABASE_URL, server/db/postgres/database.ts).
 *
 * A store is written once, against `Sql`, in the SQL both engines understand:
 * - `?` placeholders (PostgreSQL's `$1, $2...` are made from them);
 * - `INSERT ... ON CONFLICT ... DO NOTHING / DO UPDATE`, `RETURNING`, `COALESCE`, `CAST(? AS BIGINT)`;
 * - integers are BIGINT on PostgreSQL and INTEGER on SQLite, and read back as a bigint on both; flags are
 *   0/1 integers on both (SQLite has no boolean);
 * - what differs is asked of `Sql.dialect` (a row lock is `FOR UPDATE` on PostgreSQL and nothing on
 *   SQLite, whose one writer already excludes every other).
 *
 * Atomicity: `Database.transaction(fn)` runs `fn` with a `Sql` bound to one transaction, commits when it
 * resolves and undoes everything when it throws. A store method that is one atomic step takes an optional
 * `tx`: given one, it joins the caller's transaction (`within`); without, it opens its own. Inside a
 * transaction, await only the transaction's own statements: on SQLite every transaction of the process
 * waits for the open one (they share the single writer), and on PostgreSQL it holds a connection and its
 * row locks. Never a network call, a chain read or a timer inside one.
 */

import { GatewayError } from "../errors";

/** What a statement's `?` may be bound to. Booleans are not: flags are 0/1. */
export type SqlParam = string | number | bigint | null | Uint8Array;

export type Engine = "sqlite" | "postgres";

/** The few fragments that differ between the engines. */
export interface Dialect {
  /**
   * Appended to a SELECT that reads rows the transaction will then change on the strength of what it
   * read (a balance it will spend, a status it will move): PostgreSQL locks them until the commit, so a
   * concurrent transaction waits instead of reading the same old value. SQLite needs nothing: a
   * transaction there already excludes every other writer.
   */
  forUpdate: string;
  /**
   * The relation a ledger balance is read from, `(account_id, bucket, balance)`. On PostgreSQL a capture's postings
   * wait as pending deltas instead of moving their rows (migration 0016), and the view `ledger_balances` adds them to
   * `ledger_accounts`; on SQLite every posting moves its row at once, so the table is the balances.
   */
  balances: string;
  /**
   * Appended to a SELECT that locks ledger balance rows it will move: PostgreSQL's `FOR NO KEY UPDATE` (a balance
   * row's key never changes), which does not wait for the KEY SHARE lock a pending capture's posting holds on a row
   * through its foreign key until its group commits. Nothing on SQLite (see forUpdate).
   */
  forBalanceUpdate: string;
}

export const DIALECTS: Record<Engine, Dialect> = {
  sqlite: { forUpdate: "", balances: "ledger_accounts", forBalanceUpdate: "" },
  postgres: { forUpdate: " FOR UPDATE", balances: "ledger_balances", forBalanceUpdate: " FOR NO KEY UPDATE" },
};

export type Row = Record<string, unknown>;

/** Something SQL runs on: the database outside any transaction, or one transaction. */
export interface Sql {
  readonly engine: Engine;
  readonly dialect: Dialect;
  /** The first row, or undefined. */
  one<T = Row>(sql: string, params?: readonly SqlParam[]): Promise<T | undefined>;
  /** Every row. */
  all<T = Row>(sql: string, params?: readonly SqlParam[]): Promise<T[]>;
  /** The first column of the first row, or undefined when there is no row. */
  value<T = unknown>(sql: string, params?: readonly SqlParam[]): Promise<T | undefined>;
  /** Runs a statement that returns no rows; resolves with how many rows it changed. */
  run(sql: string, params?: readonly SqlParam[]): Promise<number>;
}

export interface TransactionOptions {
  /**
   * Resolve only once the transaction is on disk. A result reported to a client (a charge, a stored
   * idempotent answer) is durable first. Without it, SQLite's group commit lets the transaction ride along
   * with the next durable one, and PostgreSQL commits it without waiting for its WAL flush
   * (synchronous_commit off): a crash may lose it, which must be harmless (a hold never written is a hold
   * released, a refused call's log line is only a log line).
   */
  durable?: boolean;
  /**
   * The transaction may share its commit (with `durable`, its flush too) with other grouped transactions of this
   * process, durable with durable and the others with the others (group commit). SQLite's transactions always do
   * (./group-commit.ts); PostgreSQL runs the waiting ones side by side in one transaction (./postgres/database.ts), and
   * again, after a member that threw, with a savepoint each: so a grouped transaction may run more than once. Only
   * for a short transaction, safe to run again from its start, whose statements may interleave with the other
   * members' (it touches rows of its own, or rows many others touch too: a charge's seller and platform balances, a
   * hold's buyer), and that needs no answer from the database before its group commits.
   */
  group?: boolean;
  /**
   * With `group`: where the transaction runs in its group (members in ascending order, arrival order among equals),
   * so that groups take the row locks they share in one order (a hold: its account) rather than deadlock.
   */
  groupOrder?: string;
}

/** The gateway's database: its tables on one engine. */
export interface Database extends Sql {
  transaction<T>(fn: (tx: Sql) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** Resolves once everything committed so far is on disk. */
  durable(): Promise<void>;
  close(): Promise<void>;
  /** Whether the caller runs inside one of this database's transactions (SQLite's event loop: it knows). */
  insideTransaction?(): boolean;
}

/** Runs `fn` inside `tx` when the caller has a transaction, or in a transaction of its own. */
export function within<T>(db: Database, tx: Sql | undefined, fn: (tx: Sql) => Promise<T>, options?: TransactionOptions): Promise<T> {
  return tx ? fn(tx) : db.transaction(fn, options);
}

/**
 * The failure of an operation the database did not answer (PostgreSQL down, or silent: ./postgres/watch.ts): 503
 * `database_unavailable`.
 */
export class DatabaseUnavailableError extends GatewayError {
  override name = "DatabaseUnavailableError";

  constructor(
    cause: unknown,
    /**
     * Whether what the operation wrote may have committed all the same: its COMMIT (or a statement outside a
     * transaction, which commits by itself) was sent, and a server that reads it later commits it. False when the
     * failure came before: a transaction whose connection is closed before its COMMIT is rolled back.
     */
    readonly mayHaveCommitted: boolean,
  ) {
    super("database_unavailable", "The gateway's database did not answer; try again shortly.", { cause });
  }
}

export function databaseUnavailable(cause?: unknown, options: { mayHaveCommitted?: boolean } = {}): DatabaseUnavailableError {
  return new DatabaseUnavailableError(cause, options.mayHaveCommitted ?? false);
}

export function isDatabaseUnavailable(error: unknown): error is DatabaseUnavailableError {
  return error instanceof DatabaseUnavailableError;
}

/** A uniqueness constraint refused the write (SQLite's SQLITE_CONSTRAINT_UNIQUE/PRIMARYKEY, PostgreSQL's 23505). */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY" || code === "23505";
}

/** Any integrity constraint refused the write (SQLite's SQLITE_CONSTRAINT*, PostgreSQL's class 23). */
export function isConstraintViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code.startsWith("SQLITE_CONSTRAINT") || /^23[0-9A-Z]{3}$/.test(code));
}

/**
 * `sql` with its `?` placeholders numbered for PostgreSQL (`$1, $2...`). A `?` inside a quoted string,
 * a quoted identifier or a comment is left alone.
 */
export function numberPlaceholders(sql: string): string {
  let out = "";
  let n = 0;
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i];
    if (c === "'" || c === '"') {
      const end = sql.indexOf(c, i + 1);
      const stop = end === -1 ? sql.length : end + 1;
      out += sql.slice(i, stop);
      i = stop - 1;
    } else if (c === "-" && sql[i + 1] === "-") {
      const end = sql.indexOf("\n", i);
      const stop = end === -1 ? sql.length : end;
      out += sql.slice(i, stop);
      i = stop - 1;
    } else if (c === "?") {
      out += `$${++n}`;
    } else {
      out += c;
    }
  }
  return out;
}
