/**
 * `npm run start:cluster`: the gateway past one machine, on this one (server/devstack/cluster.ts). Starts a
 * local chain with the contracts deployed, a throwaway PostgreSQL 15 and Redis (Debian's binaries, in
 * temporary directories), the demo skill backend, and N gateway replicas (`npm run serve` processes, 2 by
 * default: REPLICAS=3 for three) on their own ports, all sharing the one database and the one Redis. Prints
 * each replica's URL, which one leads (runs the deposit indexer, the settler, the wallet sweeper and voucher
 * expiry), and a funded `atom_` key. Ctrl-C stops everything; nothing is kept.
 *
 * Embedded wallets are off here (no bundler): the replicas serve calls, keys, sign-in, deposits, settlement
 * and withdrawals. `npm start` is the single-process demo with everything.
 */
import path from "node:path";
import { spawnSync } from "node:child_process";
import { type Cluster, startCluster } from "../server/devstack/cluster";

const ROOT = path.resolve(__dirname, "..");

function replicaCount(): number {
  const raw = process.env.REPLICAS ?? "2";
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 16) throw new Error(`REPLICAS must be a whole number from 1 to 16, got "${raw}"`);
  return n;
}

async function main(): Promise<void> {
  const n = replicaCount();
  const compiled = spawnSync(path.join(ROOT, "node_modules/.bin/hardhat"), ["compile", "--quiet"], { cwd: ROOT, stdio: "inherit" });
  if (compiled.status !== 0) throw new Error("hardhat compile failed");
  console.log(`Starting a chain, PostgreSQL, Redis and ${n} gateway replica${n === 1 ? "" : "s"}...`);
  const cluster: Cluster = await startCluster({ replicas: n, settings: { LOG_LEVEL: process.env.LOG_LEVEL ?? "warn" } });
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    console.log("\nStopping the replicas, the backend, Redis, PostgreSQL and the chain...");
    void cluster.stop().then(() => process.exit(0));
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);

  // The leader indexes the demo deposit; wait until the buyer's balance shows it.
  const deadline = Date.now() + 30_000;
  let balance = "0";
  let leader: string | undefined;
  while (Date.now() < deadline) {
    leader ??= await cluster.leader();
    const answer = await fetch(`${cluster.replicas[0].url}/v1/balance`, { headers: { Authorization: `Bearer ${cluster.key}` } });
    const body = (await answer.json()) as { data?: { available?: string } };
    balance = body.data?.available ?? balance;
    if (leader && Number(balance) > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }

  const body = JSON.stringify({ skill_id: "echo", input: { hello: "world" } });
  const last = cluster.replicas[cluster.replicas.length - 1];
  console.log(`
Skill Gateway is running as a cluster of ${n} replica${n === 1 ? "" : "s"}.

${cluster.replicas.map((r) => `${r.id.padEnd(14)} ${r.url}${leader === r.id ? "  (leader: indexer, settler, sweeps)" : ""}`).join("\n")}
PostgreSQL:    ${cluster.postgres.url.replace(/:[^:@/]+@/, ":***@")}
Redis:         ${cluster.redis.url}
Chain RPC:     ${cluster.node.rpcUrl} (chain id ${cluster.deployment.chainId})
Demo backend:  ${cluster.backend.url}
Demo buyer:    ${cluster.buyerId}, balance ${balance} USDC${Number(balance) > 0 ? "" : " (the deposit is not indexed yet)"}

API key: ${cluster.key}

Try it on any replica (limits and balance are shared):
curl -s ${last.url}/v1/call -H "Authorization: Bearer ${cluster.key}" -H "Content-Type: application/json" -d '${body}'

Press Ctrl-C to stop.`);
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
