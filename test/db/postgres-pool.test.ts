import { expect } from "chai";
import type pg from "pg";
import { createPostgresPool, parsePostgresUrl, type PostgresPool, PostgresUrlError } from "../../server/db/postgres/pool";
import { type PostgresServer, startPostgresOrSkip } from "../helpers/postgres";

/** The PostgreSQL pool (server/db/postgres/pool.ts): what it reads money as, and the limits it sets. */
describe("the PostgreSQL pool (server/db/postgres/pool.ts)", function () {
  this.timeout(60_000);
  let server: PostgresServer;
  let pool: PostgresPool;

  before(async function () {
    server = await startPostgresOrSkip(this);
    pool = createPostgresPool({ url: server.url, applicationName: "pool-test" });
  });
  after(async () => {
    await pool?.end();
    await server?.stop();
  });

  it("reads every BIGINT as a bigint, exactly, at both ends of its range", async () => {
    const { rows } = await pool.query(
      "SELECT 9223372036854775807::bigint AS max, (-9223372036854775808)::bigint AS min, 0::bigint AS zero",
    );
    expect(rows[0]).to.deep.equal({ max: 9223372036854775807n, min: -9223372036854775808n, zero: 0n });
  });

  it("sends a bigint parameter exactly and reads it back", async () => {
    const { rows } = await pool.query("SELECT $1::bigint + 1 AS next", [9007199254740993n]);
    expect(rows[0].next).to.equal(9007199254740994n);
  });

  it("reads COUNT(*) and a SUM over BIGINTs (a NUMERIC) as bigints, even past 2^63", async () => {
    const { rows } = await pool.query(
      "SELECT COUNT(*) AS n, SUM(x) AS total FROM (VALUES (9223372036854775807::bigint), (9223372036854775807::bigint)) v(x)",
    );
    expect(rows[0]).to.deep.equal({ n: 2n, total: 18446744073709551614n });
  });

  it("reads a BIGINT array as bigints", async () => {
    const { rows } = await pool.query("SELECT ARRAY[1, NULL, 9223372036854775807]::bigint[] AS xs");
    expect(rows[0].xs).to.deep.equal([1n, null, 9223372036854775807n]);
  });

  it("refuses to read a NUMERIC with a fraction as an amount", async () => {
    const err = await pool.query("SELECT AVG(x) AS mean FROM (VALUES (1::bigint), (2::bigint)) v(x)").catch((e: unknown) => e as Error);
    expect(err).to.be.instanceOf(RangeError);
    expect((err as Error).message).to.contain("a NUMERIC value with a fraction (1.5");
  });

  it("names its connections and sets the server's statement and lock timeouts", async () => {
    const { rows } = await pool.query(
      `SELECT current_setting('application_name') AS app, current_setting('statement_timeout') AS statement,
              current_setting('lock_timeout') AS lock, current_setting('idle_in_transaction_session_timeout') AS idle`,
    );
    expect(rows[0]).to.deep.equal({ app: "pool-test", statement: "10s", lock: "5s", idle: "1min" });
  });

  it("has the server cancel a statement that runs past its timeout", async () => {
    const quick = createPostgresPool({ url: server.url, statementTimeoutMs: 200 });
    try {
      const started = Date.now();
      const err = await quick.query("SELECT pg_sleep(5)").catch((e: unknown) => e as pg.DatabaseError);
      expect((err as pg.DatabaseError).code).to.equal("57014"); // query_canceled
      expect(Date.now() - started).to.be.below(3000);
    } finally {
      await quick.end();
    }
  });

  const badUrls: [string, RegExp][] = [
    ["not a url", /DATABASE_URL is not a URL/],
    ["mysql://user:s3cret@localhost/db", /must start with postgres:\/\/ or postgresql:\/\/ \(got mysql:\/\/\)/],
    ["postgres://user:s3cret@localhost", /names no database/],
    ["postgres://user:s3cret@/db", /names no host|is not a URL/],
  ];
  for (const [url, message] of badUrls) {
    it(`refuses ${JSON.stringify(url)} with a clear message that does not repeat the password`, () => {
      const err = (() => {
        try {
          createPostgresPool({ url });
        } catch (e) {
          return e as Error;
        }
        return undefined;
      })();
      expect(err).to.be.instanceOf(PostgresUrlError);
      expect(err!.message).to.match(message);
      expect(err!.message).to.not.contain("s3cret");
    });
  }

  it("connects through the server's Unix socket when the URL names its folder in ?host= (over the URL's host)", async () => {
    const url = new URL(server.url);
    url.searchParams.set("host", server.socketDir);
    const local = createPostgresPool({ url: url.href, applicationName: "pool-socket-test" });
    try {
      // A connection over the socket has no client address.
      const { rows } = await local.query("SELECT inet_client_addr() AS addr, current_database() AS db");
      expect(rows[0]).to.deep.equal({ addr: null, db: server.database });
    } finally {
      await local.end();
    }
  });

  it("accepts postgresql:// as well as postgres://", () => {
    expect(parsePostgresUrl("postgresql://u:p@db.internal:5432/gateway").hostname).to.equal("db.internal");
  });
});
