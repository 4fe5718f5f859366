import crypto from "node:crypto";
import type pg from "pg";
import { DIALECTS, type Database, type Sql, type SqlParam, type TransactionOptions, numberPlaceholders } from "../sql";
import type { PostgresPool } from "./pool";

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

/** Runs statements on a pool (each on whichever connection is free) or on one checked-out connection. */
class PostgresSql implements Sql {
  readonly engine = "postgres" as const;
  readonly dialect = DIALECTS.postgres;

  constructor(protected readonly client: pg.Pool | pg.PoolClient) {}

  private query(sql: string, params: readonly SqlParam[]): Promise<pg.QueryResult> {
    postgresTraffic.statements++;
    const { name, text } = prepare(sql);
    return this.client.query({ name, text, values: bind(params) });
  }

  async one<T>(sql: string, params: readonly SqlParam[] = []): Promise<T | undefined> {
    return (await this.query(sql, params)).rows[0] as T | undefined;
  }

  async all<T>(sql: string, params: readonly SqlParam[] = []): Promise<T[]> {
    return (await this.query(sql, params)).rows as T[];
  }

  async value<T>(sql: string, params: readonly SqlParam[] = []): Promise<T | undefined> {
    postgresTraffic.statements++;
    const { name, text } = prepare(sql);
    const result = await this.client.query({ name, text, values: bind(params), rowMode: "array" });
    return (result.rows[0] as unknown[] | undefined)?.[0] as T | undefined;
  }

  async run(sql: string, params: readonly SqlParam[] = []): Promise<number> {
    return (await this.query(sql, params)).rowCount ?? 0;
  }
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
  ) {
    super(pool);
  }

  async transaction<T>(fn: (tx: Sql) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    if (options.durable && options.group) {
      return new Promise<T>((resolve, reject) => {
        this.grouped.push({ fn, resolve: resolve as (value: unknown) => void, reject, attempts: 0 });
        void this.runGroups();
      });
    }
    for (let attempt = 1; ; attempt++) {
      const client = await this.pool.connect();
      postgresTraffic.transactions++;
      let broken: Error | undefined;
      try {
        // Durable means flushed before COMMIT returns, whatever the server's or the role's default says.
        await client.query(options.durable ? "BEGIN; SET LOCAL synchronous_commit = on" : "BEGIN; SET LOCAL synchronous_commit = off");
        const result = await fn(new PostgresSql(client));
        await client.query("COMMIT");
        return result;
      } catch (error) {
        try {
          await client.query("ROLLBACK");
        } catch (rollbackError) {
          // The connection itself failed: it is not given back to the pool.
          broken = rollbackError as Error;
        }
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
   * the other in ONE transaction on one connection, each in a savepoint (one that throws undoes only itself),
   * and share its COMMIT and so its WAL flush. Every charge of a replica posts to the same seller's and the
   * platform's balance rows and holds their row locks until its commit is flushed: committed one by one they
   * queue one flush apart; grouped, a flush carries every charge of the group. Groups run one at a time; the
   * transactions that arrive while one commits form the next. A member that loses a deadlock is run again in a
   * later group; a group whose COMMIT fails fails all its members, none of which has been answered.
   */
  private async runGroups(): Promise<void> {
    if (this.grouping) return;
    this.grouping = true;
    try {
      while (this.grouped.length > 0) await this.runGroup(this.grouped.splice(0, this.groupMax));
    } finally {
      this.grouping = false;
    }
  }

  private async runGroup(group: Grouped[]): Promise<void> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      for (const member of group) member.reject(error);
      return;
    }
    postgresTraffic.transactions++;
    const done: { member: Grouped; result: unknown }[] = [];
    /** Members rejected or put back for a later group: no longer this group's to answer. */
    const handed = new Set<Grouped>();
    let broken: Error | undefined;
    try {
      await client.query("BEGIN; SET LOCAL synchronous_commit = on");
      const tx = new PostgresSql(client);
      for (const member of group) {
        await client.query("SAVEPOINT grouped");
        try {
          const result = await member.fn(tx);
          await client.query("RELEASE SAVEPOINT grouped");
          done.push({ member, result });
        } catch (error) {
          // Undoes this member only (and frees the row locks it took), then goes on with the group.
          await client.query("ROLLBACK TO SAVEPOINT grouped");
          await client.query("RELEASE SAVEPOINT grouped");
          handed.add(member);
          const code = (error as { code?: string }).code;
          if (code !== undefined && RETRYABLE.has(code) && ++member.attempts < ATTEMPTS) this.grouped.push(member);
          else member.reject(error);
        }
      }
      await client.query("COMMIT");
      for (const { member, result } of done) member.resolve(result);
    } catch (error) {
      try {
        await client.query("ROLLBACK");
      } catch (rollbackError) {
        broken = rollbackError as Error;
      }
      for (const member of group) if (!handed.has(member)) member.reject(error);
    } finally {
      client.release(broken);
    }
  }

  /** Every transaction is committed by the time it resolves, and a durable one is flushed: nothing to wait for. */
  async durable(): Promise<void> {}

  async close(): Promise<void> {
    await this.pool.end();
  }
}
