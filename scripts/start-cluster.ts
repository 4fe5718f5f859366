/**
 * `npm run start:cluster`: the gateway past one machine, on this one (server/devstack/cluster.ts). Starts a
 * local chain with the contracts deployed, a throwaway PostgreSQL 15 and Redis (Debian's binaries, in
 * temporary directories), the demo skill backend, and N gateway replicas (`npm run serve` processes, 2 by
 * default: REPLICAS=3 for three) on their own ports, all sharing the one database and the one Redis. Prints
 * each replica's URL, which one leads (runs the deposit indexer, the settler, the wallet sweeper and voucher
 * expiry), and a funded `atom_` key. Ctrl-C stops everything; nothing is kept.
 *
 * Every gateway setting in the environment (all server/config.ts reads: RATE_LIMIT_PER_MIN, FEE_MODE, time-outs...)
 * reaches every replica, as `npm start` honours it, but those the cluster sets itself (its database, Redis, chain,
 * keys, ports: server/devstack/cluster-settings.ts), which are ignored; the banner names both. A malformed setting
 * stops it with the config's own error before anything starts.
 *
 * Embedded wallets are off here (no bundler): the replicas serve calls, keys, sign-in, deposits, settlement
 * and withdrawals. `npm start` is the single-process demo with everything.
 */
import path from "node:path";
import { spawnSync } from "node:child_process";
import type { Cluster } from "../server/devstack/cluster";
import { type ClusterUserSettings, clusterUserSettings } from "../server/devstack/cluster-settings";
import { exitOnStopSignals } from "../server/ops/shutdown";

const ROOT = path.resolve(__dirname, "..");

function replicaCount(): number {
  const raw = process.env.REPLICAS ?? "2";
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 16) throw new Error(`REPLICAS must be a whole number from 1 to 16, got "${raw}"`);
  return n;
}

async function main(): Promise<void> {
  const n = replicaCount();
  // Before anything starts: a setting the replicas would refuse stops here, with the config's own message.
  const user = clusterUserSettings(process.env);
  // Loaded only now: the whole gateway comes with it, and a mistake above is reported without waiting for that.
  const { startCluster } = await import("../server/devstack/cluster");
  const compiled = spawnSync(path.join(ROOT, "node_modules/.bin/hardhat"), ["compile", "--quiet"], { cwd: ROOT, stdio: "inherit" });
  if (compiled.status !== 0) throw new Error("hardhat compile failed");
  console.log(`Starting a chain, PostgreSQL, Redis and ${n} gateway replica${n === 1 ? "" : "s"}...`);
  const cluster: Cluster = await startCluster({ replicas: n, settings: user.passed });
  // Within SHUTDOWN_DEADLINE_MS: past it, the log says the cluster did not stop and the process exits anyway.
  exitOnStopSignals(() => [{ name: "the cluster (replicas, backend, Redis, PostgreSQL, chain)", stop: () => cluster.stop() }], {
    onSignal: () => console.log("\nStopping the replicas, the backend, Redis, PostgreSQL and the chain..."),
  });

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
${settingsLines(user)}

API key: ${cluster.key}

Try it on any replica (limits and balance are shared):
curl -s ${last.url}/v1/call -H "Authorization: Bearer ${cluster.key}" -H "Content-Type: application/json" -d '${body}'

Press Ctrl-C to stop.`);
}

/** The banner's account of the person's settings: names only, since values may be secrets. */
function settingsLines(user: ClusterUserSettings): string {
  const passed = Object.keys(user.passed);
  const lines = [`Your settings: ${passed.length > 0 ? `${passed.join(", ")} (on every replica)` : "none set: the defaults"}`];
  if (user.ignored.length > 0) lines.push(`Ignored:       ${user.ignored.join(", ")} (the cluster sets these itself)`);
  return lines.join("\n");
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
