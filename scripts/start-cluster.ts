/**
 * `npm run start:cluster`: the gateway past one machine, on this one. Starts a local chain with the contracts
 * deployed, a throwaway PostgreSQL 15 and Redis (Debian's binaries, in temporary directories), the demo skill
 * backend, and N gateway replicas (`npm run serve` processes, 2 by default: REPLICAS=3 for three) on their
 * own ports, all sharing the one database and the one Redis. Prints each replica's URL, which one leads
 * (runs the deposit indexer, the settler, the wallet sweeper and voucher expiry), and a funded `atom_` key.
 * Ctrl-C stops everything; nothing is kept.
 *
 * Embedded wallets are off here (no bundler): the replicas serve calls, keys, sign-in, deposits, settlement
 * and withdrawals. `npm start` is the single-process demo with everything.
 */
import path from "node:path";
import os from "node:os";
import fs from "node:fs";
import { spawnSync } from "node:child_process";
import pg from "pg";
import { loadConfig } from "../server/config";
import { writeDeployment } from "../server/chain/deployment";
import { deployDemoChain } from "../server/devstack/chain-seed";
import { startDemoBackend } from "../server/devstack/demo-backend";
import { DEV_ACCOUNT_INDEX, devAccount, devPrivateKey, startLocalNode } from "../server/devstack/local-node";
import { startPostgres } from "../server/devstack/postgres-server";
import { startRedisServer } from "../server/devstack/redis-server";
import { DEMO_DEPOSIT_USD, seedDemo } from "../server/devstack/seed";
import { type ServeProcess, startServe } from "../server/devstack/serve-process";
import { createGateway } from "../server/index";
import { usdToMicros } from "../server/ledger/money";

const ROOT = path.resolve(__dirname, "..");

function replicaCount(): number {
  const raw = process.env.REPLICAS ?? "2";
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 16) throw new Error(`REPLICAS must be a whole number from 1 to 16, got "${raw}"`);
  return n;
}

/** The replica holding the settlement lease: the one whose lease connection holds a granted advisory lock. */
async function leaderOf(databaseUrl: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ application_name: string }>(
      `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE l.locktype = 'advisory' AND l.granted AND a.application_name LIKE '%:leader'`,
    );
    return rows[0]?.application_name.replace(/^skill-gateway:/, "").replace(/:leader$/, "");
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  const n = replicaCount();
  const stops: (() => Promise<unknown>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((error) => console.error(error));
  };
  let stopping = false;
  const onSignal = () => {
    if (stopping) return;
    stopping = true;
    console.log("\nStopping the replicas, the backend, Redis, PostgreSQL and the chain...");
    void stopAll().then(() => process.exit(0));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  try {
    const compiled = spawnSync(path.join(ROOT, "node_modules/.bin/hardhat"), ["compile", "--quiet"], { cwd: ROOT, stdio: "inherit" });
    if (compiled.status !== 0) throw new Error("hardhat compile failed");
    const node = await startLocalNode({ port: 0 });
    stops.push(() => node.stop());
    const { deployment } = await deployDemoChain(node, usdToMicros(DEMO_DEPOSIT_USD));
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-cluster-"));
    stops.push(async () => fs.rmSync(work, { recursive: true, force: true }));
    const deploymentFile = path.join(work, "deployment.json");
    writeDeployment(deploymentFile, deployment);

    const postgres = await startPostgres({ database: "gateway" });
    stops.push(() => postgres.stop());
    const redis = await startRedisServer();
    stops.push(() => redis.stop());
    const backend = await startDemoBackend();
    stops.push(() => backend.close());

    const settings: Record<string, string> = {
      DATABASE_URL: postgres.url,
      REDIS_URL: redis.url,
      CHAIN_RPC_URL: node.rpcUrl,
      DEPLOYMENT_FILE: deploymentFile,
      SETTLER_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.settler),
      VOUCHER_SIGNER_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.voucherSigner),
      SKILL_BACKEND_ALLOWLIST: backend.url,
      DEPOSIT_CONFIRMATIONS: "0",
      LOG_LEVEL: process.env.LOG_LEVEL ?? "warn",
    };

    // The demo's accounts, skills and key, written once into the shared database by a short-lived gateway.
    const seeding = await createGateway(loadConfig({ ...settings, REPLICA_ID: "seed" }), {});
    const { buyerId } = await seedDemo(seeding, backend, {
      buyer: devAccount(DEV_ACCOUNT_INDEX.demoBuyer).address,
      seller: devAccount(DEV_ACCOUNT_INDEX.demoSeller).address,
    });
    const { key } = await seeding.keys.create(buyerId, { name: "npm run start:cluster" });
    await seeding.close();

    const replicas: ServeProcess[] = [];
    for (let i = 1; i <= n; i++) {
      const replica = await startServe({ ...settings, PORT: "0", REPLICA_ID: `replica-${i}` });
      replicas.push(replica);
      stops.push(() => replica.stop());
    }
    // The leader indexes the demo deposit; wait until the buyer's balance shows it.
    const deadline = Date.now() + 30_000;
    let balance = "0";
    let leader: string | undefined;
    while (Date.now() < deadline) {
      leader ??= await leaderOf(postgres.url);
      const answer = await fetch(`${replicas[0].url}/v1/balance`, { headers: { Authorization: `Bearer ${key}` } });
      const body = (await answer.json()) as { data?: { available?: string } };
      balance = body.data?.available ?? balance;
      if (leader && Number(balance) > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }

    const body = JSON.stringify({ skill_id: "echo", input: { hello: "world" } });
    console.log(`
Skill Gateway is running as a cluster of ${n} replica${n === 1 ? "" : "s"}.

${replicas.map((r, i) => `Replica ${i + 1}:     ${r.url}${leader === `replica-${i + 1}` ? "  (leader: indexer, settler, sweeps)" : ""}`).join("\n")}
PostgreSQL:    ${postgres.url.replace(/:[^:@/]+@/, ":***@")}
Redis:         ${redis.url}
Chain RPC:     ${node.rpcUrl} (chain id ${deployment.chainId})
Demo backend:  ${backend.url}
Demo buyer:    ${buyerId}, balance ${balance} USDC${Number(balance) > 0 ? "" : " (the deposit is not indexed yet)"}

API key: ${key}

Try it on any replica (limits and balance are shared):
curl -s ${replicas[replicas.length - 1].url}/v1/call -H "Authorization: Bearer ${key}" -H "Content-Type: application/json" -d '${body}'

Press Ctrl-C to stop.`);
  } catch (error) {
    await stopAll();
    throw error;
  }
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
