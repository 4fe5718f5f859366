/**
 * The servers the call-path benchmarks run, each in a child process of its own (started by `start` in
 * ./common.ts): `node servers.ts <role> [spec]`. Each sends its parent one message once it is ready (its URL,
 * and for the gateway a key), answers the parent's later messages, and exits on "exit".
 *   backend    the skill backend: echoes the JSON it is sent
 *   proxy      the baseline: the least a proxy can do in front of the backend
 *   gateway    the real gateway (a GatewaySpec as JSON)
 *   x402-peer  the real @x402/express middleware in front of the backend, its facilitator in-process (an X402PeerSpec)
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { type Address, type Hex, createPublicClient, createWalletClient, http as httpTransport } from "viem";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { postgresTraffic } from "../../server/db/postgres/database";

function listen(server: http.Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

/** The skill backend: echoes the JSON it is sent. */
async function runBackend(): Promise<void> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      res.writeHead(200, { "content-type": "application/json", "content-length": body.length }).end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  process.send!({ url: await listen(server) });
}

/** The baseline: the least a proxy can do, streaming each request to the backend over keep-alive. */
async function runProxy(backendUrl: string): Promise<void> {
  const target = new URL(backendUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const server = http.createServer((req, res) => {
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: "/echo",
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": req.headers["content-length"] ?? "0" },
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, { "content-type": "application/json", "content-length": up.headers["content-length"] ?? "0" });
        up.pipe(res);
      },
    );
    upstream.on("error", () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 60_000;
  process.send!({ url: await listen(server) });
}

/** How the gateway child is set up. */
export interface GatewaySpec {
  backendUrl: string;
  /** The SQLite file (unused on PostgreSQL, but its `.log` sibling takes the request log). */
  dbPath: string;
  databaseUrl?: string;
  redisUrl?: string;
  replicaId?: string;
  /** Given: a further replica of an already seeded database, using these keys. */
  seededKeys?: string[];
  /**
   * How many buyers to seed, each with one key (default 1: one hot buyer, whose balance row every call takes; with
   * 50, each of the 50 connections calls as a buyer of its own).
   */
  buyers?: number;
  /** SQLite: who writes keyed calls' holds and charges (SQLITE_LEDGER_WRITER); `thread` by default. */
  sqliteLedgerWriter?: "thread" | "loop";
  /**
   * The escrow chain. Given, the buyer's balance is its deposit there (made before the gateway starts, read
   * by the deposit indexer), the buyer and the seller are linked to their addresses, and the money path's
   * loops run (the settler posts batches as in production); "settle" then settles every captured call.
   * Without it the buyer is credited in the ledger alone and nothing settles.
   */
  chain?: { rpcUrl: string; deployment: string; buyer: Address; seller: Address };
}

/**
 * The real gateway, on a real SQLite file (every charge durable before its 200: the -wal file's fsync), or (given a database URL) on PostgreSQL with
 * its limits in Redis. The first replica of a database seeds it; the others are given the seeded key.
 */
async function runGateway(spec: GatewaySpec): Promise<void> {
  const {
    backendUrl,
    dbPath,
    databaseUrl = "",
    redisUrl = "",
    replicaId = "",
    seededKeys,
    buyers = 1,
    sqliteLedgerWriter = "thread",
  } = spec;
  const { loadConfig } = await import("../../server/config");
  const { startGateway } = await import("../../server/index");
  const { createLogger, logDestination } = await import("../../server/ops/log");
  // Each request's log line is written as in production (JSON, asynchronously, gathered), to a file beside the ledger.
  const logger = createLogger({ level: "info", destination: logDestination(`${dbPath}.log`) });
  const gw = await startGateway(
    loadConfig(
      {},
      {
        port: 0,
        dbPath,
        databaseUrl,
        redisUrl,
        replicaId: replicaId || "bench",
        rateLimitPerMin: 10_000_000,
        sqliteLedgerWriter,
        // The x402 endpoint has no key: its callers count against the per-address limit, and here one address is
        // every connection.
        publicRateLimitPerMin: 10_000_000,
        skillBackendAllowlist: [new URL(backendUrl).origin],
      },
    ),
    { log: () => {}, logger, chain: spec.chain && (await chainConnection(spec.chain)) },
  );
  /** This process's CPU time so far (user + system), in µs: what a call costs the gateway, with the load it carries. */
  const cpuMicros = () => {
    const { user, system } = process.cpuUsage();
    return user + system;
  };
  if (seededKeys) {
    process.on("message", (msg) => {
      if (msg === "exit") process.exit(0);
      process.send!({ ...postgresTraffic, cpuMicros: cpuMicros() });
    });
    process.send!({ url: gw.url, keys: seededKeys });
    return;
  }
  await gw.ledger.ensureAccount({ id: "bench-seller", kind: "seller", name: "bench seller" });
  await gw.ledger.ensureAccount({ id: "bench-buyer", kind: "user", name: "bench buyer" });
  // Further buyers (the many-buyers scenario), each credited in the ledger alone.
  const buyerIds = ["bench-buyer", ...Array.from({ length: buyers - 1 }, (_, i) => `bench-buyer-${i + 2}`)];
  for (const id of buyerIds.slice(1)) {
    await gw.ledger.ensureAccount({ id, kind: "user", name: id });
    await gw.ledger.credit(id, 1_000_000_000_000n, "dev_credit", "benchmark balance");
  }
  if (spec.chain) {
    const { linkAddress } = await import("../../server/settlement/addresses");
    for (const [accountId, address] of [
      ["bench-buyer", spec.chain.buyer],
      ["bench-seller", spec.chain.seller],
    ] as const) {
      const linked = await linkAddress(gw.ledger, { accountId, address });
      if (!linked.ok) throw new Error(`could not link ${address} to ${accountId}: ${linked.reason}`);
    }
    await gw.moneyPath!.indexer.poll();
    if ((await gw.ledger.balance("bench-buyer")).availableMicros === 0n) throw new Error("the buyer's deposit was not credited");
    gw.startBackground();
  } else {
    await gw.ledger.credit("bench-buyer", 1_000_000_000_000n, "dev_credit", "benchmark balance");
  }
  await gw.skills.upsert({
    slug: "echo",
    name: "echo",
    priceMicros: 1_000n,
    sellerAccountId: "bench-seller",
    backendUrl: `${backendUrl}/echo`,
    timeoutMs: 10_000,
  });
  const keys: string[] = [];
  for (const id of buyerIds) keys.push((await gw.keys.create(id)).key);
  const sqlite = gw.db instanceof SqliteDatabase ? gw.db : undefined;
  const sync = sqlite
    ? sqlite.db.pragma("synchronous", { simple: true })
    : (await gw.db.value<string>("SHOW synchronous_commit")) === "on"
      ? 2
      : 0;
  process.on("message", async (msg) => {
    if (msg === "exit") process.exit(0);
    if (msg === "settle") {
      // A failure ends the process, and with it the parent's wait for an answer (`ask`).
      process.send!(await settleEverything(gw.moneyPath!.settler!).catch(exitOn));
      return;
    }
    const captured = await gw.db.value<bigint>("SELECT COUNT(*) FROM holds WHERE status = 'captured'");
    process.send!({
      captured: Number(captured),
      batches: sqlite?.commit.committedBatches ?? 0,
      synchronous: Number(sync),
      ...postgresTraffic,
      cpuMicros: cpuMicros(),
      // The event loop's busy time so far (what routes calls; a synchronous fsync blocks it): µs.
      loopBusyMicros: performance.eventLoopUtilization().active * 1000,
    });
  });
  process.send!({ url: gw.url, keys });
}

/** The gateway's chain connection on the benchmark's local node: the development accounts' settler and voucher keys. */
async function chainConnection(chain: NonNullable<GatewaySpec["chain"]>) {
  const { parseDeployment } = await import("../../server/chain/deployment");
  const { DEV_ACCOUNT_INDEX, devAccount, localChain } = await import("../../server/devstack/local-node");
  const deployment = parseDeployment(JSON.parse(chain.deployment));
  const viemChain = localChain(chain.rpcUrl, deployment.chainId);
  const transport = httpTransport(chain.rpcUrl, { retryCount: 0 });
  const wallet = (index: number) => createWalletClient({ account: devAccount(index), chain: viemChain, transport });
  return {
    publicClient: createPublicClient({ chain: viemChain, transport }),
    escrowAddress: deployment.escrow,
    chainId: deployment.chainId,
    deployBlock: deployment.deployBlock,
    settlerWallet: wallet(DEV_ACCOUNT_INDEX.settler),
    voucherSigner: wallet(DEV_ACCOUNT_INDEX.voucherSigner),
    // Pays-per-call with x402 (POST /x402/skills/:skillId/call): its own settler key, as npm start's.
    x402Wallet: wallet(DEV_ACCOUNT_INDEX.x402Settler),
  };
}

/**
 * Settles every captured call still outside a batch (the loop settles as calls come; this settles the rest),
 * one batch after another; says how long that took.
 */
async function settleEverything(settler: import("../../server/settlement/settler").Settler) {
  const t0 = performance.now();
  for (let left = await settler.unsettledCalls(); left > 0; left = await settler.unsettledCalls()) {
    const step = await settler.runOnce();
    // A step that finishes a batch the loop had sent also returns it; one that builds nothing never will.
    if (step.batch === undefined) throw new Error(`${left} captured calls are outside a batch, and the settler built none`);
  }
  return { settleMs: performance.now() - t0 };
}

/** How the x402 peer child is set up (./x402-peer.ts). */
export interface X402PeerSpec {
  rpcUrl: string;
  usdc: Address;
  payTo: Address;
  priceMicros: string;
  facilitatorKey: Hex;
  backendUrl: string;
}

async function runX402Peer(spec: X402PeerSpec): Promise<void> {
  const { startX402Peer } = await import("./x402-peer");
  const peer = await startX402Peer({ ...spec, priceMicros: BigInt(spec.priceMicros), backendUrl: `${spec.backendUrl}/echo` });
  process.on("message", (msg) => {
    if (msg === "exit") process.exit(0);
  });
  process.send!({ url: peer.url, facilitator: peer.facilitatorAddress });
}

function exitOn(error: unknown): never {
  console.error(error);
  process.exit(1);
}

const [role, ...args] = process.argv.slice(2);
const roles: Record<string, () => Promise<void>> = {
  backend: runBackend,
  proxy: () => runProxy(args[0]),
  gateway: () => runGateway(JSON.parse(args[0]) as GatewaySpec),
  "x402-peer": () => runX402Peer(JSON.parse(args[0]) as X402PeerSpec),
};
const run = roles[role];
if (!run) {
  console.error(`unknown role ${role}: one of ${Object.keys(roles).join(", ")}`);
  process.exit(2);
}
// A server outlives no benchmark: when its parent is gone (ended, or crashed before it could ask), so is it.
process.once("disconnect", () => process.exit(0));
run().catch(exitOn);
