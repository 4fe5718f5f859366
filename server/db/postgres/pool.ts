import pg from "pg";
import { DATABASE_URL_SOCKET_FORM } from "../../config";

/**
 * The PostgreSQL connection pool of one gateway replica. Everything PostgreSQL returns as an integer
 * comes back as a bigint, as SQLite's safe integers do (server/db/db.ts): money never passes through a
 * JS number, nor through a string a caller might forget to convert.
 */

export interface PostgresPoolOptions {
  /** postgres:// or postgresql:// URL (user, password, host, port, database, and libpq-style parameters). */
  url: string;
  /** Shown in pg_stat_activity, so an operator can tell the gateway's connections (and which replica's) apart. */
  applicationName?: string;
  /** The server cancels any statement running longer (a stuck query must not hold a connection for ever). */
  statementTimeoutMs?: number;
  /** The server gives up waiting for a row or table lock after this long, rather than queueing without end. */
  lockTimeoutMs?: number;
  /** The server ends a session left idle inside a transaction this long (a client that died mid-transaction). */
  idleInTransactionTimeoutMs?: number;
  /** Connections the pool opens at most. */
  max?: number;
  /** How long a caller waits for a connection (opening one, or one coming back to the pool). */
  connectionTimeoutMs?: number;
  /** How long an unused connection stays open. */
  idleTimeoutMs?: number;
  /**
   * Told when the server closes a connection sitting idle in the pool (a restart, pg_terminate_backend):
   * the pool drops it and opens another on next use, so this is news for the log, not a failure.
   */
  onIdleError?: (err: Error) => void;
}

export type PostgresPool = pg.Pool;

/** The defaults of PostgresPoolOptions, named so a caller can see what it gets. */
export const POSTGRES_POOL_DEFAULTS = {
  applicationName: "skill-gateway",
  statementTimeoutMs: 10_000,
  lockTimeoutMs: 5_000,
  idleInTransactionTimeoutMs: 60_000,
  max: 10,
  connectionTimeoutMs: 5_000,
  idleTimeoutMs: 30_000,
} as const;

/** A URL that is not a postgres:// one, named without its password. */
export class PostgresUrlError extends Error {
  constructor(reason: string) {
    super(`DATABASE_URL ${reason}`);
    this.name = "PostgresUrlError";
  }
}

/** Checks that `url` is a postgres:// URL with a host and a database, and returns it parsed. */
export function parsePostgresUrl(url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // The URL may hold a password: it is not repeated in the message.
    throw new PostgresUrlError("is not a URL");
  }
  if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") {
    throw new PostgresUrlError(`must start with postgres:// or postgresql:// (got ${parsed.protocol}//)`);
  }
  // A Unix socket: its folder in ?host=, which node-postgres reads over the URL's host (a placeholder the URL needs).
  if (parsed.hostname === "") throw new PostgresUrlError(`names no host (a Unix socket: ${DATABASE_URL_SOCKET_FORM})`);
  if (parsed.pathname.length <= 1) throw new PostgresUrlError("names no database (postgres://user:password@host:port/database)");
  return parsed;
}

const INT8 = pg.types.builtins.INT8;
const INT8_ARRAY = 1016 as Parameters<typeof pg.types.getTypeParser>[0];
const NUMERIC = pg.types.builtins.NUMERIC;

function toBigInts(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toBigInts);
  return value === null ? null : BigInt(value as string);
}

/**
 * The pool's type parsers: BIGINT (every integer column of the schema) as a bigint; NUMERIC, which is what
 * SUM() over a BIGINT column returns, as a bigint too when it is a whole number, and an error otherwise
 * (an amount with a fraction is a bug to hear about, not a value to round). Everything else as pg does.
 */
export const POSTGRES_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") => {
    if (format === "binary") return pg.types.getTypeParser(oid, "binary");
    if (oid === INT8) return (value: string) => BigInt(value);
    if (oid === INT8_ARRAY) {
      const parseArray = pg.types.getTypeParser(INT8_ARRAY, "text") as (value: string) => unknown;
      return (value: string) => toBigInts(parseArray(value));
    }
    if (oid === NUMERIC) {
      return (value: string) => {
        if (!/^-?\d+$/.test(value))
          throw new RangeError(`a NUMERIC value with a fraction (${value}) where only whole numbers are expected`);
        return BigInt(value);
      };
    }
    return pg.types.getTypeParser(oid, "text");
  }) as pg.CustomTypesConfig["getTypeParser"],
};

/** Opens a pool on `options.url` with the settings above; it connects lazily, on first use. */
export function createPostgresPool(options: PostgresPoolOptions): PostgresPool {
  parsePostgresUrl(options.url);
  const o = { ...POSTGRES_POOL_DEFAULTS, ...options };
  const pool = new pg.Pool({
    connectionString: o.url,
    application_name: o.applicationName,
    statement_timeout: o.statementTimeoutMs,
    lock_timeout: o.lockTimeoutMs,
    idle_in_transaction_session_timeout: o.idleInTransactionTimeoutMs,
    max: o.max,
    connectionTimeoutMillis: o.connectionTimeoutMs,
    idleTimeoutMillis: o.idleTimeoutMs,
    // A dead peer (a server gone without a FIN) is found by TCP keepalives rather than never.
    keepAlive: true,
    // A statement is sent without waiting for the answer to the one before (a group commit's members run side by
    // side: server/db/postgres/database.ts runGroup); the server answers them in order, each after its own Sync.
    pipeline: true,
    types: POSTGRES_TYPES,
  });
  // An idle pooled connection the server closes emits 'error' on the pool; without a listener that would
  // crash the process. The query that next needs a connection gets a clear error if the server is really gone.
  pool.on("error", (err) => options.onIdleError?.(err));
  return pool;
}
