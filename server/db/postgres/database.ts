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
  /** TransactionOptions.groupOrder: where the member runs in its group. */
  order: string;
}

/** The grouped transactions of one kind (durable or not) waiting for their group, and whether a group is running. */
interface GroupQueue {
  readonly durable: boolean;
  readonly waiting: Grouped[];
  running: boolean;
}

/** A group's member that ran, and what its function returned. */
interface Done {
  member: Grouped;
  result: unknown;
}

/**
 * SQLSTATEs of a pipelined statement refused only because one sent before it failed the transaction: 25P02 (the
 * transaction is aborted), and 26000 (a statement whose Parse, sent just before by another member, was refused for
 * that reason, so its Bind names a statement the server does not have).
 */
const AFTER_ANOTHER_FAILED = new Set(["25P02", "26000"]);

/**
 * Statements sent, transactions begun and transactions run again after a deadlock or a serialization failure, by this
 * process, and the writes that carried the statements to the server (for the benchmark's figures per call).
 */
export const postgresTraffic = { statements: 0, transactions: 0, retried: 0, writes: 0 };

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
  private corked = false;

  constructor(
    private readonly client: pg.PoolClient,
    watch: DatabaseGuard,
    /**
     * Statements sent in one turn of the event loop leave in one write (a group's members run side by side: their
     * statements are pipelined, see PostgresDatabase.runGroup). Without it each statement is written as it is sent.
     */
    private readonly batched = false,
  ) {
    super(watch);
  }

  protected execute(query: pg.QueryConfig): Promise<pg.QueryResult> {
    this.corkForTurn();
    return guarded(this.watch, this.client.query(query), false);
  }

  /**
   * With `batched`, holds the connection's writes until the turn's promises have all run (setImmediate), so every
   * statement they send goes out in one write: the socket write is most of what a statement costs the gateway
   * (docs/benchmarks.md). The pool's connections are pipelined (./pool.ts): a statement is sent without waiting for the
   * answer to the one before.
   */
  private corkForTurn(): void {
    if (this.corked) return;
    postgresTraffic.writes++;
    if (!this.batched) return;
    const stream = socketOf(this.client);
    stream.cork();
    this.corked = true;
    setImmediate(() => {
      this.corked = false;
      stream.uncork();
    });
  }

  /** A statement of the transaction's own (BEGIN, a savepoint, COMMIT: the one whose failure leaves the outcome unknown), unprepared. */
  statement(text: string): Promise<pg.QueryResult> {
    this.corkForTurn();
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
  /** Transactions that may share one commit (options.group), waiting for the next group: durable ones, and the others. */
  private readonly groups = {
    durable: { durable: true, waiting: [], running: false } as GroupQueue,
    fast: { durable: false, waiting: [], running: false } as GroupQueue,
  };

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
    postgresTraffic.writes++;
    let broken: Error | undefined;
    try {
      return await guarded(this.watch, client.query(query), true);
    } catch (error) {
      broken = brokenBy(error);
      throw error;
    } finally {
      giveBack(client, broken);
    }
  }

  async transaction<T>(fn: (tx: Sql) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    if (options.group) {
      const queue = options.durable ? this.groups.durable : this.groups.fast;
      return new Promise<T>((resolve, reject) => {
        queue.waiting.push({ fn, resolve: resolve as (value: unknown) => void, reject, attempts: 0, order: options.groupOrder ?? "" });
        void this.runGroups(queue);
      });
    }
    for (let attempt = 1; ; attempt++) {
      const client = await checkOut(this.pool, this.watch);
      postgresTraffic.transactions++;
      const tx = new TransactionSql(client, this.watch);
      let broken: Error | undefined;
      try {
        await tx.statement(begin(options.durable === true));
        const result = await fn(tx);
        await tx.statement("COMMIT");
        return result;
      } catch (error) {
        // A connection the server stopped answering is not asked to roll back (that too would wait): it is closed.
        broken = brokenBy(error) ?? (await rollBack(tx));
        const code = (error as { code?: string }).code;
        if (attempt < ATTEMPTS && code !== undefined && RETRYABLE.has(code)) {
          postgresTraffic.retried++;
          continue;
        }
        throw error;
      } finally {
        giveBack(client, broken);
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
   * A group first runs its members side by side (runSideBySide), their statements pipelined on the group's
   * connection, so a member costs only its own statements (a charge: one, server/ledger/ledger.ts captureOnServer,
   * and its call's line) and the group a few writes to the socket for all of them. If a member throws,
   * the transaction is rolled back whole (PostgreSQL refuses anything more in a transaction whose statement
   * failed), that member is answered (or run again later, when it lost a deadlock), and the others run again from
   * their start in a careful group, each in a savepoint so one that throws undoes only itself: members are safe to
   * run again (TransactionOptions.group). A group whose COMMIT fails fails all its members, none of which has been
   * answered.
   */
  private async runGroups(queue: GroupQueue): Promise<void> {
    if (queue.running) return;
    queue.running = true;
    try {
      while (queue.waiting.length > 0) {
        // In their order (a stable sort: arrival order among equals), so groups take row locks in one order.
        const group = queue.waiting.splice(0, this.groupMax).sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
        const rest = await this.runGroup(queue, group, false);
        if (rest.length > 0) await this.runGroup(queue, rest, true);
      }
    } finally {
      queue.running = false;
    }
  }

  /** Answers a member that threw: run again in a later group when it lost a deadlock, rejected otherwise. */
  private failMember(queue: GroupQueue, member: Grouped, error: unknown): void {
    const code = (error as { code?: string }).code;
    if (code !== undefined && RETRYABLE.has(code) && ++member.attempts < ATTEMPTS) {
      postgresTraffic.retried++;
      queue.waiting.push(member);
    } else member.reject(error);
  }

  /**
   * Runs one group; returns the members to run again in a careful group (only when not `careful` and a member threw:
   * every member but that one, which has been answered).
   */
  private async runGroup(queue: GroupQueue, group: Grouped[], careful: boolean): Promise<Grouped[]> {
    let client: pg.PoolClient;
    try {
      client = await checkOut(this.pool, this.watch);
    } catch (error) {
      for (const member of group) member.reject(error);
      return [];
    }
    postgresTraffic.transactions++;
    /** Members rejected or put back for a later group: no longer this group's to answer. */
    const handed = new Set<Grouped>();
    let broken: Error | undefined;
    const tx = new TransactionSql(client, this.watch, !careful);
    try {
      const results = careful ? await this.runCarefully(queue, tx, group, handed) : await this.runSideBySide(queue, tx, group);
      if (!Array.isArray(results)) {
        // The whole transaction goes (and with it every row lock the group took); the others run again.
        const { failed, error } = results;
        broken = await rollBack(tx);
        handed.add(failed);
        this.failMember(queue, failed, error);
        return group.filter((m) => m !== failed);
      }
      await tx.statement("COMMIT");
      for (const { member, result } of results) member.resolve(result);
    } catch (error) {
      // A COMMIT the server did not answer may still commit when it reads again: its members fail with
      // database_unavailable, whose answer says the outcome is unknown (server/gateway/ledger-payment.ts).
      broken = brokenBy(error) ?? (await rollBack(tx));
      for (const member of group) if (!handed.has(member)) member.reject(error);
    } finally {
      giveBack(client, broken);
    }
    return [];
  }

  /**
   * The members of a group all at once, their statements pipelined on the group's connection (a turn's statements in
   * one write, behind the BEGIN): a group of n charges costs a few writes and round trips, not 2n. The members are
   * one transaction's statements interleaved: each touches its own call's rows (its hold, its line, its answer).
   * Answers the members' results, or the member that failed first with its error: the answers come back in the
   * order the statements were sent, so the first member to fail, of those whose error is not a refusal caused by an
   * earlier failure (AFTER_ANOTHER_FAILED), is the one whose statement failed (or whose own code threw).
   */
  private async runSideBySide(
    queue: GroupQueue,
    tx: TransactionSql,
    group: Grouped[],
  ): Promise<Done[] | { failed: Grouped; error: unknown }> {
    const begun = tx.statement(begin(queue.durable));
    /** The members that failed, in the order they failed. */
    const failures: { failed: Grouped; error: unknown }[] = [];
    const runs = group.map(async (member) => {
      try {
        return await member.fn(tx);
      } catch (error) {
        failures.push({ failed: member, error });
        throw error;
      }
    });
    const [opened, ...outcomes] = await Promise.allSettled([begun, ...runs]);
    if (opened!.status === "rejected") throw opened!.reason;
    // A database that stopped answering fails the whole group: nothing more is sent on its connection.
    for (const { error } of failures) if (isDatabaseUnavailable(error)) throw error;
    if (failures.length > 0) {
      return failures.find(({ error }) => !AFTER_ANOTHER_FAILED.has((error as { code?: string }).code ?? "")) ?? failures[0]!;
    }
    return outcomes.map((o, i) => ({ member: group[i]!, result: (o as PromiseFulfilledResult<unknown>).value }));
  }

  /**
   * The members of a group one after the other, each in a savepoint so one that throws undoes only itself (and frees
   * the row locks it took) and is answered, and the group goes on. Answers the results of those that did not throw.
   */
  private async runCarefully(queue: GroupQueue, tx: TransactionSql, group: Grouped[], handed: Set<Grouped>): Promise<Done[]> {
    await tx.statement(begin(queue.durable));
    const done: Done[] = [];
    for (const member of group) {
      await tx.statement("SAVEPOINT grouped");
      try {
        const result = await member.fn(tx);
        await tx.statement("RELEASE SAVEPOINT grouped");
        done.push({ member, result });
      } catch (error) {
        if (isDatabaseUnavailable(error)) throw error;
        // Answered only once undone: should the ROLLBACK TO fail, the group fails, this member with it.
        await tx.statement("ROLLBACK TO SAVEPOINT grouped; RELEASE SAVEPOINT grouped");
        handed.add(member);
        this.failMember(queue, member, error);
      }
    }
    return done;
  }

  /** Every transaction is committed by the time it resolves, and a durable one is flushed: nothing to wait for. */
  async durable(): Promise<void> {}

  async close(): Promise<void> {
    await this.stopWatch?.();
    await this.pool.end();
  }
}

/** A transaction's first statement: durable means flushed before COMMIT returns, whatever the server's or the role's default says. */
function begin(durable: boolean): string {
  return durable ? "BEGIN; SET LOCAL synchronous_commit = on" : "BEGIN; SET LOCAL synchronous_commit = off";
}

/** The socket under a node-postgres connection (not in its typings; its Query.submit corks the same stream). */
function socketOf(client: pg.PoolClient): { cork(): void; uncork(): void; destroy(): void } {
  return (client as unknown as { connection: { stream: { cork(): void; uncork(): void; destroy(): void } } }).connection.stream;
}

/**
 * Gives a checked-out connection back to the pool; one that broke or was left unanswered (`broken`) is closed at once.
 * Pipelined (./pool.ts), node-postgres would otherwise wait for every answer still due on it before closing it,
 * keeping a silent server's connection, and the transaction it holds, open until the server answers again.
 */
function giveBack(client: pg.PoolClient, broken: Error | undefined): void {
  if (broken) socketOf(client).destroy();
  client.release(broken);
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
