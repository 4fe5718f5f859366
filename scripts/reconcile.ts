/**
 * `npm run reconcile`: compares the escrow on-chain with the ledger's settled view, address by address, and
 * prints every difference. Exit code 0 when the books agree, 1 when they differ, 2 when the check could not
 * run (no database, no chain, a deployment file from another chain).
 *
 * Reads the books (the PostgreSQL database of DATABASE_URL when set, otherwise the SQLite file at DB_PATH), the
 * chain (CHAIN_RPC_URL, or the embedded local chain on CHAIN_PORT) and the deployment file (DEPLOYMENT_FILE)
 * from server/config.ts. It only reads, in one snapshot (ReconcileStore.snapshot): a read-only SQLite
 * connection, or a read-only PostgreSQL transaction, so it can run beside serving gateways. It never
 * migrates: books whose schema predates settlement are reported as such.
 */
import path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { createPublicClient, http } from "viem";
import { readDeployment, verifyDeployment } from "../server/chain/deployment";
import { reconcile } from "../server/settlement/reconcile";
import { type Config, loadConfig } from "../server/config";
import type { Database, Sql } from "../server/db/sql";
import { SqliteDatabase } from "../server/db/sqlite-database";
import { PostgresDatabase } from "../server/db/postgres/database";
import { createPostgresPool } from "../server/db/postgres/pool";
import { settlementStores } from "../server/settlement/store";

const ROOT = path.resolve(__dirname, "..");

async function main(): Promise<number> {
  const config = loadConfig();
  const rpcUrl = config.chainRpcUrl || `http://127.0.0.1:${config.chainPort}`;
  const deployment = readDeployment(path.resolve(ROOT, config.deploymentFile));
  const publicClient = createPublicClient({ transport: http(rpcUrl) });
  const verified = await verifyDeployment(publicClient, deployment);
  if (!verified.ok) throw new Error(`${config.deploymentFile} does not match the chain at ${rpcUrl}: ${verified.reason}`);

  const { db, where: books } = openBooks(config);
  try {
    const result = await reconcile({
      stores: settlementStores(db),
      publicClient,
      escrowAddress: deployment.escrow,
      fromBlock: deployment.deployBlock,
    });
    const where = `escrow ${deployment.escrow} at block ${result.blockNumber} (last batch ${result.lastBatchNumber}), ledger ${books}`;
    if (result.ok) {
      console.log(
        `Reconciled: ${result.addressesChecked} address(es) and ${result.batchesChecked} batch(es) agree to the base unit; ${where}.`,
      );
      return 0;
    }
    console.error(`RECONCILIATION FAILED: ${result.differences.length} difference(s); ${where}.`);
    for (const d of result.differences) console.error(`  ${d.code}: ${d.detail}`);
    return 1;
  } finally {
    await db.close();
  }
}

/**
 * A read-only SQLite connection: its snapshot is a plain read transaction. (The gateway's own SqliteDatabase
 * runs transactions through its group commit, which begins with a write lock a read-only connection cannot take.)
 */
class ReadOnlySqliteDatabase extends SqliteDatabase {
  override async transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
    this.db.exec("BEGIN");
    try {
      return await fn(this);
    } finally {
      this.db.exec("COMMIT");
    }
  }
}

/** The books to compare, opened for reading only, and how to name them in the report. */
function openBooks(config: Config): { db: Database; where: string } {
  // DATABASE_URL, as the configuration names it (server/config.ts).
  const { databaseUrl } = config;
  if (databaseUrl) {
    const db = new PostgresDatabase(createPostgresPool({ url: databaseUrl, applicationName: "skill-gateway-reconcile", max: 2 }));
    const url = new URL(databaseUrl);
    // Named without its password.
    return { db, where: `postgres://${url.host}${url.pathname}` };
  }
  const raw = new BetterSqlite3(config.dbPath, { readonly: true, fileMustExist: true });
  raw.defaultSafeIntegers(true);
  return { db: new ReadOnlySqliteDatabase(raw), where: config.dbPath };
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`reconcile could not run: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  },
);
