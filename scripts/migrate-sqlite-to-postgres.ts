/**
 * `npm run migrate:sqlite-to-postgres`: moves a gateway's SQLite database into an empty PostgreSQL database,
 * checked on both sides (server/db/copy-to-postgres.ts), and prints what it copied.
 *
 *   npm run migrate:sqlite-to-postgres -- [--from FILE] [--to postgres://user:password@host:port/database]
 *
 * --from defaults to DB_PATH (data/gateway.db), --to to DATABASE_URL, both read by server/config.ts. Stop the
 * gateway first. Exit code 0 when the copy is committed, 1 (with a one-line reason) when it was refused or
 * failed, in which case nothing was committed to PostgreSQL.
 */
import { parseArgs } from "node:util";
import { loadConfig } from "../server/config";
import { copySqliteToPostgres, type CopySqliteToPostgresReport } from "../server/db/copy-to-postgres";
import { parsePostgresUrl } from "../server/db/postgres/pool";
import { assertBalanced } from "../server/ledger/invariants";
import { SCHEMA } from "../server/schema";

const USAGE = "usage: npm run migrate:sqlite-to-postgres -- [--from FILE] [--to postgres://user:password@host:port/database]";

/** The target named without its password (the URL may carry one): host, port and database. */
function describeUrl(url: string): string {
  const parsed = parsePostgresUrl(url);
  return `postgres://${parsed.host}${parsed.pathname}`;
}

function summary(from: string, to: string, report: CopySqliteToPostgresReport): string {
  const width = Math.max("table".length, ...report.tables.map((t) => t.table.length));
  const total = report.tables.reduce((sum, t) => sum + t.rows, 0);
  const digits = Math.max("rows".length, String(total).length);
  const line = (name: string, rows: string) => `  ${name.padEnd(width)}  ${rows.padStart(digits)}`;
  return [
    `Copied ${from} (schema version ${report.schemaVersion}) into ${describeUrl(to)}:`,
    line("table", "rows"),
    ...report.tables.map((t) => line(t.table, String(t.rows))),
    line("total", String(total)),
    `Balances: ${report.balances} (account, bucket) pair(s) rebuilt from the postings, each equal to SQLite's.`,
    "Ledger invariants hold on both sides; every table holds as many rows on both.",
    `Identities continue at: ${report.sequences.map((s) => `${s.table}.${s.column} ${s.next}`).join(", ")}.`,
  ].join("\n");
}

async function main(): Promise<void> {
  let values: { from?: string; to?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      options: { from: { type: "string" }, to: { type: "string" }, help: { type: "boolean", short: "h" } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new Error(`${(error as Error).message} (${USAGE})`);
  }
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const config = loadConfig();
  const from = values.from ?? config.dbPath;
  const to = values.to ?? config.databaseUrl;
  if (to === "") throw new Error(`no PostgreSQL database to copy into: pass --to or set DATABASE_URL (${USAGE})`);
  describeUrl(to);
  const report = await copySqliteToPostgres({
    sqlitePath: from,
    databaseUrl: to,
    sqliteSchema: SCHEMA,
    assertBalanced,
    log: (line) => console.error(`  ${line}`),
  });
  console.log(summary(from, to, report));
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    console.error(`migrate:sqlite-to-postgres failed: ${message.replace(/\s*\n\s*/g, " ")}`);
    process.exit(1);
  },
);
