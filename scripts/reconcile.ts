/**
 * `npm run reconcile`: compares the escrow on-chain with the ledger's settled view, address by address, and
 * prints every difference. Exit code 0 when the books agree, 1 when they differ, 2 when the check could not
 * run (no database, no chain, a deployment file from another chain).
 *
 * Reads the database path (DB_PATH), the chain (CHAIN_RPC_URL, or the embedded local chain on CHAIN_PORT) and
 * the deployment file (DEPLOYMENT_FILE) from server/config.ts. The database is opened read-only, so it can run
 * beside a serving gateway.
 */
import path from "node:path";
import Database from "better-sqlite3";
import { createPublicClient, http } from "viem";
import { readDeployment, verifyDeployment } from "../server/chain/deployment";
import { reconcile } from "../server/settlement/reconcile";
import { loadConfig } from "../server/config";
import { settlementStores } from "../server/settlement/store";

const ROOT = path.resolve(__dirname, "..");

async function main(): Promise<number> {
  const config = loadConfig();
  const rpcUrl = config.chainRpcUrl || `http://127.0.0.1:${config.chainPort}`;
  const deployment = readDeployment(path.resolve(ROOT, config.deploymentFile));
  const publicClient = createPublicClient({ transport: http(rpcUrl) });
  const verified = await verifyDeployment(publicClient, deployment);
  if (!verified.ok) throw new Error(`${config.deploymentFile} does not match the chain at ${rpcUrl}: ${verified.reason}`);

  const db = new Database(config.dbPath, { readonly: true, fileMustExist: true });
  db.defaultSafeIntegers(true);
  try {
    const result = await reconcile({
      stores: settlementStores(db),
      publicClient,
      escrowAddress: deployment.escrow,
      fromBlock: deployment.deployBlock,
    });
    const where = `escrow ${deployment.escrow} at block ${result.blockNumber} (last batch ${result.lastBatchNumber}), ledger ${config.dbPath}`;
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
    db.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`reconcile could not run: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  },
);
