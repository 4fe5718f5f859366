import crypto from "node:crypto";
import type pg from "pg";
import {
  DIALECTS,
  type Database,
  type Sql,
  type SqlParam,
  type TransactionOptions,
  isDatabaseUnavailable,
  numberPlaceholders,
} from "../sql";
import type { PostgresPool } from "./pool";
import { type DatabaseGuard, UNWATCHED, asDatabaseError } from "./watch";

/** SQLSTATEs after which a transaction is retried from its start: a serialization failure, a deadlock. */
const RETRYABLE = new Set(["40001", "40P01"]);
const ATTEMPTS = 5;

interface Prepared {
  name: string;
  text: string;
}

/** What a statement's text becomes on PostgreSQL: numbered placeholders, and a name so each connection parses it once. */
const prepared = new Map<string, Prepared>();
function prepare(sql: string): Prepared {
  let p = prepared.get(sql);
  if (!p) {
    const text = numberPlaceholders(sql);
    p = { name: `sg_${crypto.createHash("sha1").update(text).digest("hex").slice(0, 20)}`, text };
    prepared.set(sql, p);
  }
  return p;
}

function bind(params: readonly SqlParam[]): unknown[] {
  return params.map((p) => (p instanceof Uint8Array && !Buffer.isBuffer(p) ? Buffer.from(p) : p));
}

/** A grouped durable transaction waiting for its group (PostgresDatabase.runGroups). */
interface Grouped {
  fn: (tx: Sql) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  attempts: number;
}

/** Statements sent and transactions begun by this process (for the benchmark's round trips per call). */
export const postgresTraffic = { statements: 0, transactions: 0 };

/**
 * Runs statements: outside a transaction each on a connection checked out for it (the database), or all on one
 * checked-out connection (a transaction). Every wait is guarded by the watch (./watch.ts): a database that stops
 * answering fails the statement with `database_unavailable` rather than leave it waiting, and so does a connection
 * that breaks.
 */
abstract class PostgresSql implements Sql {
  readonly engine = "postgres" as const;
  readonly dialect = DIALECTS.postgres;

  constructor(protected readonly watch: DatabaseGuard) {}

  protected abstract execute(query: pg.QueryConfig & { rowMode?: "array" }): Promise<pg.QueryResult>;

  private query(sql: string, params: readonly SqlParam[], rowMode?: "array"): Promise<pg.QueryResult> {
    postgresTraffic.statements++;
    const { name, text } = prepare(sql);
    return this.execute({ name, text, values: bind(params), ...(rowMode ? { rowMode } : {}) });
  }

  async one<T>(sql: string, params: readonly SqlParam[] = []): Promise<T | undefined> {
    return (await this.query(sql, params)).rows[0] as T | undefined;
  }

  async all<T>(sql: string, params: readonly SqlParam[] = []): Promise<T[]> {
    return (await this.query(sql, params)).rows as T[];
  }

  async value<T>(sql: string, params: readonly SqlParam[] = []): Promise<T | undefined> {
    const result = await this.query(sql, params, "array");
    return (result.rows[0] as unknown[] | undefined)?.[0] as T | undefined;
  }

  async run(sql: string, params: readonly SqlParam[] = []): Promise<number> {
    return (await this.query(sql, params)).rowCount ?? 0;
  }
}

/** The statements of one transaction, on its checked-out connection. */
class TransactionSql extends PostgresSql {
  constructor(
    private readonly client: pg.PoolClient,
    watch: DatabaseGuard,
  ) {
    super(watch);
  }

  protected execute(query: pg.QueryConfig): Promise<pg.QueryResult> {
    return guarded(this.watch, this.client.query(query), false);
  }

  /** A statement of the transaction's own (BEGIN, a savepoint, COMMIT: the one whose failure leaves the outcome unknown), unprepared. */
  statement(text: string): Promise<pg.QueryResult> {
    return guarded(this.watch, this.client.query(text), text === "COMMIT");
  }
}

/**
 * `work` under the watch, with a connection failure reported as `database_unavailable`; `mayHaveCommitted` when what
 * `work` sent commits by itself if the server reads it (a COMMIT, a statement outside a transaction).
 */
async function guarded<T>(watch: DatabaseGuard, work: Promise<T>, mayHaveCommitted: boolean): Promise<T> {
  try {
    return await watch.guard(work);
  } catch (error) {
    throw asDatabaseError(error, mayHaveCommitted);
  }
}

/**
 * A connection of `pool`, checked out under the watch. One that arrives after the watch has given up waiting for it
 * goes back to the pool.
 */
async function checkOut(pool: PostgresPool, watch: DatabaseGuard): Promise<pg.PoolClient> {
  watch.check();
  const connecting = pool.connect();
  try {
    return await guarded(watch, connecting, false);
  } catch (error) {
    connecting.then(
      (client) => client.release(),
      () => {},
    );
    throw error;
  }
}

/**
 * What a connection whose work failed with `error` is given back with: the error itself when the connection can no
 * longer be trusted (it broke, or the server left it unanswered: pg then closes it, and a transaction it held is
 * rolled back when the server reads again), nothing when it can be used again.
 */
function brokenBy(error: unknown): Error | undefined {
  return isDatabaseUnavailable(error) ? error : undefined;
}

/**
 * The gateway's tables on PostgreSQL (DATABASE_URL): the `Database` of server/db/sql.ts over a pg pool.
 *
 * Each transaction checks a connection out, runs READ COMMITTED, and commits when its function resolves.
 * A durable one commits with synchronous_commit on, set for the transaction whatever the server's default (the
 * commit is flushed to the WAL, and to a synchronous standby if one is configured, before COMMIT returns); the others commit without
 * waiting for the flush, PostgreSQL's own "group commit" of writes nobody waits for. A transaction that
 * loses a deadlock or a serialization check is run again from the start.
 */
export class PostgresDatabase extends PostgresSql implements Database {
  /** Durable transactions that may share one commit (options.group), waiting for the next group. */
  private readonly grouped: Grouped[] = [];
  private grouping = false;

  constructor(
    readonly pool: PostgresPool,
    /** Most transactions one group commit carries. */
    private readonly groupMax = 256,
    /**
     * Whether the server answers (./watch.ts), stopped by close(). Without one (a pool a test or script opens),
     * nothing fails early, but a broken connection is still reported as `database_unavailable`.
     */
    watch: DatabaseGuard & { stop?: () => Promise<void> } = UNWATCHED,
  ) {
    super(watch);
    this.stopWatch = watch.stop?.bind(watch);
  }

  private readonly stopWatch: (() => Promise<void>) | undefined;

  protected async execute(query: pg.QueryConfig): Promise<pg.QueryResult> {
    const client = await checkOut(this.pool, this.watch);
    let broken: Error | undefined;
    try {
      return await guarded(this.watch, client.query(query), true);
    } catch (error) {
      broken = brokenBy(error);
      throw error;
    } finally {
      client.release(broken);
    }
  }

  async transaction<T>(fn: (tx: Sql) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    if (options.durable && options.group) {
      return new Promise<T>((resolve, reject) => {
        this.grouped.push({ fn, resolve: resolve as (value: unknown) => void, reject, attempts: 0 });
        void this.runGroups();
      });
    }
    for (let attempt = 1; ; attempt++) {
      const client = await checkOut(this.pool, this.watch);
      postgresTraffic.transactions++;
      const tx = new TransactionSql(client, this.watch);
      let broken: Error | undefined;
      try {
        // Durable means flushed before COMMIT returns, whatever the server's or the role's default says.
        await tx.statement(options.durable ? "BEGIN; SET LOCAL synchronous_commit = on" : "BEGIN; SET LOCAL synchronous_commit = off");
        const result = await fn(tx);
        await tx.statement("COMMIT");
        return result;
      } catch (error) {
        // A connection the server stopped answering is not asked to roll back (that too would wait): it is closed.
        broken = brokenBy(error) ?? (await rollBack(tx));
        const code = (error as { code?: string }).code;
        if (attempt < ATTEMPTS && code !== undefined && RETRYABLE.has(code)) continue;
        throw error;
      } finally {
        client.release(broken);
      }
    }
  }

  /**
   * Group commit, as SQLite's (../group-commit.ts): the grouped durable transactions waiting run one after
   * the other in ONE transaction on one connection and share its COMMIT, and so its WAL flush. Every charge of a
   * replica posts to the same seller's and the platform's balance rows and holds their row locks until its commit is
   * flushed: committed one by one they queue one flush apart; grouped, a flush carries every charge of the group.
   * Groups run one at a time; the transactions that arrive while one commits form the next.
   *
   * A group first runs its members back to back with nothing between them, so a member costs only its own
   * statements (a charge: one, server/ledger/ledger.ts captureOnServer, and its call's line). If a member throws,
   * the transaction is rolled back whole (PostgreSQL refuses anything more in a transaction whose statement
   * failed), that member is answered (or run again later, when it lost a deadlock), and the others run again from
   * their start in a careful group, each in a savepoint so one that throws undoes only itself: members are safe to
   * run again (TransactionOptions.group). A group whose COMMIT fails fails all its members, none of which has been
   * answered.
   */
  private async runGroups(): Promise<void> {
    if (this.grouping) return;
    this.grouping = true;
    try {
      while (this.grouped.length > 0) {
        const group = this.grouped.splice(0, this.groupMax);
        const rest = await this.runGroup(group, false);
        if (rest.length > 0) await this.runGroup(rest, true);
      }
    } finally {
      this.grouping = false;
    }
  }

  /** Answers a member that threw: run again in a later group when it lost a deadlock, rejected otherwise. */
  private failMember(member: Grouped, error: unknown): void {
    const code = (error as { code?: string }).code;
    if (code !== undefined && RETRYABLE.has(code) && ++member.attempts < ATTEMPTS) this.grouped.push(member);
    else member.reject(error);
  }

  /**
   * Runs one group; returns the members to run again in a careful group (only when not `careful` and a member threw:
   * every member but that one, which has been answered).
   */
  private async runGroup(group: Grouped[], careful: boolean): Promise<Grouped[]> {
    let client: pg.PoolClient;
    try {
      client = await checkOut(this.pool, this.watch);
    } catch (error) {
      for (const member of group) member.reject(error);
      return [];
    }
    postgresTraffic.transactions++;
    const done: { member: Grouped; result: unknown }[] = [];
    /** Members rejected or put back for a later group: no longer this group's to answer. */
    const handed = new Set<Grouped>();
    let broken: Error | undefined;
    let again: Grouped[] = [];
    const tx = new TransactionSql(client, this.watch);
    try {
      await tx.statement("BEGIN; SET LOCAL synchronous_commit = on");
      for (const member of group) {
        if (careful) await tx.statement("SAVEPOINT grouped");
        try {
          const result = await member.fn(tx);
          if (careful) await tx.statement("RELEASE SAVEPOINT grouped");
          done.push({ member, result });
        } catch (error) {
          // A database that stopped answering fails the whole group: nothing more is sent on its connection.
          if (isDatabaseUnavailable(error)) throw error;
          handed.add(member);
          if (!careful) {
            // The whole transaction goes (and with it every row lock the group took); the others run again.
            broken = await rollBack(tx);
            this.failMember(member, error);
            again = group.filter((m) => m !== member);
            return again;
          }
          // Undoes this member only (and frees the row locks it took), then goes on with the group.
          await tx.statement("ROLLBACK TO SAVEPOINT grouped; RELEASE SAVEPOINT grouped");
          this.failMember(member, error);
        }
      }
      await tx.statement("COMMIT");
      for (const { member, result } of done) member.resolve(result);
    } catch (error) {
      // A COMMIT the server did not answer may still commit when it reads again: its members fail with
      // database_unavailable, whose answer says the outcome is unknown (server/gateway/ledger-payment.ts).
      broken = brokenBy(error) ?? (await rollBack(tx));
      for (const member of group) if (!handed.has(member)) member.reject(error);
    } finally {
      client.release(broken);
    }
    return again;
  }

  /** Every transaction is committed by the time it resolves, and a durable one is flushed: nothing to wait for. */
  async durable(): Promise<void> {}

  async close(): Promise<void> {
    await this.stopWatch?.();
    await this.pool.end();
  }
}

/** Rolls the transaction back; returns the error to close its connection with when even that failed. */
async function rollBack(tx: TransactionSql): Promise<Error | undefined> {
  try {
    await tx.statement("ROLLBACK");
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
