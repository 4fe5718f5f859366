import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import type { Deployment } from "../chain/deployment";
import { writeDeployment } from "../chain/deployment";
import { loadConfig } from "../config";
import { createGateway } from "../index";
import { usdToMicros } from "../ledger/money";
import { deployDemoChain } from "./chain-seed";
import { CLUSTER_OWNED_SETTINGS } from "./cluster-settings";
import type { DemoBackend } from "./demo-backend";
import { startDemoBackendThread } from "./demo-backend-thread";
import { DEV_ACCOUNT_INDEX, type LocalNode, X402_SETTLER_KEYS, devAccount, devPrivateKey, startLocalNode } from "./local-node";
import { type PostgresServer, startPostgres } from "./postgres-server";
import { type RedisServer, startRedisServer } from "./redis-server";
import { DEMO_DEPOSIT_USD, seedDemo } from "./seed";
import { type ServeProcess, startServe } from "./serve-process";

/**
 * A local cluster: a chain with the contracts deployed, a throwaway PostgreSQL 15 and Redis, the demo skill
 * backend, and gateway replicas (`npm run serve` processes) sharing them. `npm run start:cluster` runs one for
 * a person; the cluster tests (test/e2e/cluster.test.ts) run one to kill replicas in.
 */

export interface ClusterReplica extends ServeProcess {
  id: string;
}

export interface Cluster {
  replicas: ClusterReplica[];
  node: LocalNode;
  deployment: Deployment;
  deploymentFile: string;
  postgres: PostgresServer;
  redis: RedisServer;
  backend: DemoBackend;
  /** The environment every replica gets (DATABASE_URL, REDIS_URL, the chain, the role keys...). */
  settings: Record<string, string>;
  /** The demo buyer (10 USDC deposited on-chain) and a key of theirs. */
  buyerId: string;
  key: string;
  /** Starts one more replica named `id`. */
  addReplica(id: string, extra?: Record<string, string>): Promise<ClusterReplica>;
  /** The id of the replica holding the settlement lease now, if one does. */
  leader(): Promise<string | undefined>;
  stop(): Promise<void>;
}

export interface StartClusterOptions {
  replicas: number;
  /**
   * Gateway settings for every replica (e.g. LEADER_LEASE_MS, RATE_LIMIT_PER_MIN); the cluster's own
   * (CLUSTER_OWNED_SETTINGS: its database, Redis, chain, keys, ports) are dropped from it.
   */
  settings?: Record<string, string>;
}

export async function startCluster(options: StartClusterOptions): Promise<Cluster> {
  const stops: (() => Promise<unknown>)[] = [];
  const stop = async () => {
    for (const s of stops.splice(0).reverse()) await s().catch(() => {});
  };
  try {
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
    const backend = await startDemoBackendThread();
    stops.push(() => backend.close());

    // The caller's settings, then the cluster's own (./cluster-settings.ts says which and why): a caller's
    // DATABASE_URL or SETTLER_PRIVATE_KEY cannot take a replica off the cluster's database or chain.
    const callers = Object.fromEntries(
      Object.entries(options.settings ?? {}).filter(([name]) => !Object.hasOwn(CLUSTER_OWNED_SETTINGS, name)),
    );
    const settings: Record<string, string> = {
      LOG_LEVEL: "warn",
      ...callers,
      DATABASE_URL: postgres.url,
      REDIS_URL: redis.url,
      CHAIN_RPC_URL: node.rpcUrl,
      DEPLOYMENT_FILE: deploymentFile,
      SETTLER_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.settler),
      VOUCHER_SIGNER_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.voucherSigner),
      DEPOSIT_CONFIRMATIONS: "0",
      // The demo backend is on loopback: allowed, with whatever else the caller allows.
      SKILL_BACKEND_ALLOWLIST: [backend.url, callers.SKILL_BACKEND_ALLOWLIST].filter(Boolean).join(","),
    };

    // The demo's accounts, skills and key, written once into the shared database by a short-lived gateway.
    const seeding = await createGateway(loadConfig({ ...settings, REPLICA_ID: "seed" }), {});
    let seeded: { buyerId: string; key: string };
    try {
      const { buyerId } = await seedDemo(seeding, backend, {
        buyer: devAccount(DEV_ACCOUNT_INDEX.demoBuyer).address,
        seller: devAccount(DEV_ACCOUNT_INDEX.demoSeller).address,
      });
      // The demo key calls and reads its account's books (the cluster's checks read balances and usage with it).
      const { key } = await seeding.keys.create(buyerId, { name: "cluster", scopes: ["calls", "usage:read"] });
      seeded = { buyerId, key };
    } finally {
      await seeding.close();
    }

    const replicas: ClusterReplica[] = [];
    const addReplica = async (id: string, extra: Record<string, string> = {}) => {
      // Each replica settles its x402 payments with a key of its own (their nonces must not race), while there are keys.
      const n = replicas.length;
      const x402: Record<string, string> =
        n < X402_SETTLER_KEYS ? { X402_SETTLER_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.x402Settler + n) } : {};
      const replica: ClusterReplica = { id, ...(await startServe({ ...settings, ...x402, ...extra, PORT: "0", REPLICA_ID: id })) };
      replicas.push(replica);
      stops.push(() => replica.stop("SIGTERM"));
      return replica;
    };
    for (let i = 1; i <= options.replicas; i++) await addReplica(`replica-${i}`);

    return {
      replicas,
      node,
      deployment,
      deploymentFile,
      postgres,
      redis,
      backend,
      settings,
      ...seeded,
      addReplica,
      leader: () => leaderOf(postgres.url),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * The replica holding the settlement lease: the one whose lease connection (named
 * `skill-gateway:<replica>:leader` by server/index.ts) holds a granted advisory lock.
 */
export async function leaderOf(databaseUrl: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ application_name: string }>(
      `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE l.locktype = 'advisory' AND l.granted AND a.application_name LIKE 'skill-gateway:%:leader'`,
    );
    return rows[0]?.application_name.slice("skill-gateway:".length, -":leader".length);
  } finally {
    await client.end();
  }
}
