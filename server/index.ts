import http from "node:http";
import type { AddressInfo } from "node:net";
import { MemoryStore, type Store } from "express-rate-limit";
import type { Logger } from "pino";
import type { ApiKeys } from "./identity/api-keys";
import type { Sessions } from "./identity/sessions";
import { WalletService, type WalletServiceParameters, createWallets } from "./wallets/wallet-service";
import type { MagicLinks, MailMessage, Mailer } from "./identity/email";
import { type PrunedSignInState, createIdentity } from "./identity/identity-module";
import type { CardTopups } from "./payments/card-topups";
import { createSandboxCardTopups } from "./payments/sandbox-card";
import { type ChainConnection, type MoneyPath, createSettlement } from "./settlement/money-path";
import type { Config } from "./config";
import { type FinishedCall, createCallPath } from "./gateway/call-path";
import { callAnswers } from "./http/call-answer";
import { CallsStore } from "./gateway/calls-store";
import type { QualityRecorder } from "./gateway/quality-recorder";
import type { EgressPolicy, HostResolver } from "./gateway/egress";
import { SkillRegistry } from "./catalog/skills";
import { SkillsStore } from "./catalog/skills-store";
import { createRequestListener } from "./http/app";
import type { RateLimitName } from "./http/rate-limits";
import type { Database } from "./db/sql";
import { SqliteDatabase } from "./db/sqlite-database";
import type { HoldBook } from "./gateway/ledger-payment";
import { SqliteLedgerWriter } from "./gateway/ledger-writer";
import type { Ledger } from "./ledger/ledger";
import { type LogFunction, createLogger, logFunction } from "./ops/log";
import { GatewayMetrics } from "./ops/metrics";
import { currentRequest } from "./ops/request-context";
import { startHousekeeping } from "./housekeeping";
import { createX402, type X402Service } from "./x402";
import { settlementAddress } from "./settlement/addresses";
import { SettlementLeadership, shareCacheChanges } from "./replication";
import { openBooks } from "./books";

export interface Gateway {
  config: Config;
  /** The gateway's tables: SQLite (the embedded default) or PostgreSQL (DATABASE_URL). */
  db: Database;
  ledger: Ledger;
  /** Where keyed calls' holds and charges are written: the SQLite ledger writer's thread, or the ledger's own connection. */
  holds: HoldBook;
  keys: ApiKeys;
  skills: SkillRegistry;
  calls: CallsStore;
  /** The skills' quality roll-up: counted per call, flushed to skill_quality, read for the marketplace and sellers. */
  quality: QualityRecorder;
  /** The HTTP request listener: the call endpoints, then the Express app for the rest. */
  handler: http.RequestListener;
  /** Dashboard sessions and the identities that open them. */
  sessions: Sessions;
  /** Embedded wallets, when the gateway was given the ERC-4337 stack. */
  wallets?: WalletService;
  /** E-mail sign-in links and the mailer that sends them. */
  magicLinks: MagicLinks;
  /** Card top-ups: the sandbox provider, funded by the chain connection's funding wallet. */
  cardTopups: CardTopups;
  /** Deposits, settlement and withdrawals, when the gateway has a chain (startBackground() runs their loops). */
  moneyPath?: MoneyPath;
  /** Pay-per-call with x402, when the chain connection has an x402 key (POST /x402/skills/:skillId/call). */
  x402?: X402Service;
  /**
   * What the startup recovery found: holds and idempotency keys left open by a crash. A single gateway
   * (SQLite) releases them at start; replicas sharing PostgreSQL leave it to the settlement leader, which
   * releases only those of replicas that stopped (their count is not reported here).
   */
  recovered: { holds: number; idempotencyKeys: number };
  /**
   * Starts what runs in the background: the money path's loops (deposit indexer, settler, voucher expiry) and
   * the wallet sweeper. A single gateway runs them at once; a replica on PostgreSQL contends for the settlement
   * lease and runs them only while it leads, with the release of stopped replicas' holds.
   */
  startBackground(options?: { walletSweepIntervalMs?: number }): void;
  /** Whether this gateway runs the background loops now (always true on SQLite once started). */
  isLeader(): boolean;
  /** Deletes expired sign-in state and sessions now (a timer does it every PRUNE_INTERVAL_SEC); returns how many of each. */
  pruneExpired(): Promise<PrunedSignInState>;
  close(): Promise<void>;
}

export interface RunningGateway extends Omit<Gateway, "close"> {
  server: http.Server;
  url: string;
  close(drainMs?: number): Promise<void>;
}

/**
 * What the gateway does when its books and its disk may disagree (a ledger commit failed), or when the
 * other replicas took it for dead. It stops: the process cannot tell which writes survived, while a
 * restart can, and recovery releases every hold the failure left open. Crash-only, like a database
 * after a failed fsync. pino writes out what it still buffers as the process exits.
 */
const fatalFor = (logger: Logger) => (error: unknown) => {
  logger.fatal({ err: error }, "the gateway cannot trust its books any more; stopping so that recovery can run");
  process.exit(1);
};

export interface GatewayOptions {
  /**
   * The structured logger: each request's line, and every part's messages unless `log` is given.
   * By default JSON lines on standard output at config.logLevel (server/ops/log.ts).
   */
  logger?: Logger;
  /** Where the parts' messages go instead of `logger` (a test collects them). */
  log?: LogFunction;
  /** Called when a ledger commit fails (or this replica was evicted as dead); by default the process exits. */
  onFatal?: (error: unknown) => void;
  /**
   * The escrow chain. Without it the gateway bills calls against its ledger only: no
   * deposits are indexed, nothing settles, and POST /v1/withdrawals answers 503.
   */
  chain?: ChainConnection;
  /** Resolves skill backends' host names for the egress policy; the system resolver by default. */
  resolveHost?: HostResolver;
  /**
   * The egress policy itself, instead of the one built from the config and `resolveHost`: a test's lets a loopback
   * server stand in for a seller's public backend (test/helpers/egress.ts). No setting reaches it.
   */
  egress?: EgressPolicy;
  /** Where e-mail goes; by default what the config says (SMTP_URL, or the outbox table). */
  mailer?: Mailer;
  /** With the outbox mailer (no SMTP_URL): also hands each message here, for a developer to read. */
  outboxEcho?: (message: MailMessage) => void;
  /** Embedded wallets (ERC-4337): every account that signs in gets one; USDC sent to it is swept into the escrow. */
  wallets?: Omit<WalletServiceParameters, "ledger" | "sessions" | "log" | "vouchers">;
  /**
   * Where each request budget of the Express app (server/http/rate-limits.ts) keeps its counters
   * (one store per budget): express-rate-limit's MemoryStore by default, which holds for this
   * process only; Redis (REDIS_URL) when the gateway shares its limits with other replicas.
   */
  rateLimitStore?: (limit: RateLimitName) => Store;
  /**
   * The clock API keys' spending periods are read by (ms since the epoch): which UTC day or month a call's
   * hold counts in, and what GET /v1/keys shows as spent and when it resets. Date.now by default; a test moves it.
   */
  now?: () => number;
}

/** Where each finished call is told, once: the metrics, and the request's log line (which skill, how it ended, what it charged). */
function observeCall(metrics: GatewayMetrics) {
  return (call: FinishedCall) => {
    metrics.observeCall(call);
    const request = currentRequest();
    if (request) {
      request.skill = call.skill;
      request.outcome = call.outcome;
      request.chargedMicros = call.chargedMicros;
    }
  };
}

/**
 * The composition root: the books (database, ledger, recovery, shared state), then the modules: catalog, identity,
 * call path, settlement (the money path), x402, wallets, card top-ups; then the HTTP app and the housekeeping every
 * module asked for. The gateway refuses to start on broken books, and, sharing PostgreSQL, next to another replica
 * when either has no Redis. Each module's factory returns its services, its timers and its close.
 */
export async function createGateway(config: Config, options: GatewayOptions = {}): Promise<Gateway> {
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  const log = options.log ?? logFunction(logger);
  const books = await openBooks(config, log, options.onFatal ?? fatalFor(logger));
  const { db, ledger, holds, idempotency, shared } = books;
  const onPostgres = config.databaseUrl !== "";

  const skills = await SkillRegistry.open(new SkillsStore(db), { warn: (message) => log(message) });
  const identity = createIdentity(db, ledger, config, { mailer: options.mailer, outboxEcho: options.outboxEcho, now: options.now });
  if (shared) shareCacheChanges(shared, identity.keys, skills, log);
  const settlement = createSettlement(ledger, config, options.chain, log);
  const { moneyPath } = settlement;
  // Process metrics (CPU, memory, event loop) each start a sampler: only when someone can scrape them.
  const metrics = new GatewayMetrics(
    {
      openHolds: () => ledger.openHoldCount(),
      indexer: moneyPath ? () => moneyPath.indexer.health : undefined,
      settler: moneyPath
        ? () => moneyPath.settler?.health ?? { started: false, running: false, stoppedOnRequest: false, failures: 0 }
        : undefined,
    },
    { processMetrics: config.metricsToken !== "" },
  );
  if (db instanceof SqliteDatabase) db.commit.onCommit = (stats) => metrics.observeCommit(stats);
  if (holds instanceof SqliteLedgerWriter) holds.onCommit = (stats) => metrics.observeCommit(stats);
  const callPath = createCallPath(config, {
    db: ledger.db,
    ledger,
    holds,
    skills,
    idempotency,
    egress: options.egress,
    resolveHost: options.resolveHost,
    answers: callAnswers,
    sharedLimits: shared,
    onCall: observeCall(metrics),
    log,
    now: options.now,
  });
  const x402 = options.chain
    ? await createX402(options.chain, {
        config,
        ledger,
        skills,
        calls: callPath.calls,
        pipeline: callPath.pipeline,
        sellerAddress: (accountId) => settlementAddress(settlement.stores.addresses, accountId),
        replicaId: config.replicaId,
        log,
      })
    : undefined;
  // x402 payments a crash left open: a single gateway resolves its own at once (none can be in flight yet).
  if (x402 && !onPostgres) {
    const found = await x402.recover(Date.now());
    if (found.settled + found.refunded + found.closed + found.waiting > 0) log(`x402 payments left open: ${JSON.stringify(found)}`);
  }
  const wallets = createWallets(options.wallets, { ledger, sessions: identity.sessions, log, vouchers: moneyPath?.vouchers });
  const cardTopups = createSandboxCardTopups({ ledger, chain: options.chain, log: (message, error) => log(`[card] ${message}`, error) });
  const storeFor = (limit: RateLimitName) => options.rateLimitStore?.(limit) ?? shared?.rateLimitStore(limit) ?? new MemoryStore();
  const rateLimitStores: Record<RateLimitName, Store> = {
    sign_in: storeFor("sign_in"),
    public: storeFor("public"),
    credential: storeFor("credential"),
    health: storeFor("health"),
  };
  const handler = createRequestListener({
    config,
    ledger,
    skills,
    identity,
    callPath,
    settlement,
    cardTopups,
    wallets,
    x402: x402?.service,
    ops: { log, logger, metrics, rateLimitStores, redis: shared?.redis },
    now: options.now,
  });

  const housekeeping = startHousekeeping([...callPath.housekeeping, ...identity.housekeeping], log);
  // What runs only where the background runs (the settlement leader, with replicas): the money path's loops, the
  // wallet sweeper, and the recovery of orphaned x402 payments.
  let stopLeaderHousekeeping: (() => void) | undefined;
  const startLoops = (walletSweepIntervalMs: number) => {
    stopLeaderHousekeeping = housekeeping.add(x402?.leaderHousekeeping ?? []);
    moneyPath?.start();
    wallets?.start(walletSweepIntervalMs);
  };
  const stopLoops = async () => {
    stopLeaderHousekeeping?.();
    await wallets?.stop();
    await moneyPath?.stop();
  };
  let backgroundStarted = false;
  let leadership: SettlementLeadership | undefined;

  return {
    config,
    db,
    ledger,
    holds,
    keys: identity.keys,
    skills,
    calls: callPath.calls,
    quality: callPath.quality,
    handler,
    moneyPath,
    x402: x402?.service,
    sessions: identity.sessions,
    wallets,
    magicLinks: identity.magicLinks,
    cardTopups,
    recovered: books.recovered,
    pruneExpired: identity.pruneExpired,
    startBackground({ walletSweepIntervalMs = config.walletSweepIntervalMs } = {}) {
      if (backgroundStarted) return;
      backgroundStarted = true;
      if (!books.membership) {
        startLoops(walletSweepIntervalMs);
        return;
      }
      leadership = new SettlementLeadership({
        config,
        db,
        ledger,
        idempotency,
        membership: books.membership,
        start: () => startLoops(walletSweepIntervalMs),
        stop: stopLoops,
        log,
      });
      leadership.start();
    },
    isLeader: () => (leadership ? leadership.isLeader : backgroundStarted),
    async close() {
      housekeeping.stop();
      for (const store of Object.values(rateLimitStores)) await store.shutdown?.();
      if (leadership) await leadership.stop();
      else await stopLoops();
      await callPath.close();
      await skills.close();
      await identity.close(log);
      // Releases and keys the database did not take while it was unavailable: one last try.
      await ledger.closeDeferred();
      await idempotency.closeDeferred();
      await books.close();
    },
  };
}

/** Creates the gateway and listens on config.host:config.port (0 for any free port). */
export async function startGateway(config: Config, options: GatewayOptions = {}): Promise<RunningGateway> {
  const gateway = await createGateway(config, options);
  // Requests being answered, so a shutdown can let them finish: a call in flight has
  // probably been charged by the time it ends, and its caller should hear so.
  let active = 0;
  let drained: (() => void) | undefined;
  // Slow clients are cut off (408) once their headers or their whole request take longer than
  // configured: Node's defaults (60 s of headers, 300 s of request) let a few slow sockets
  // hold a gateway's connections for minutes. Node checks these every connectionsCheckingInterval.
  const server = http.createServer(
    {
      keepAliveTimeout: 65_000,
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1_000, config.headersTimeoutMs),
    },
    (req, res) => {
      active++;
      res.once("close", () => {
        if (--active === 0) drained?.();
      });
      gateway.handler(req, res);
    },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(config.port, config.host, () => resolve());
    });
  } catch (error) {
    await gateway.close();
    throw error;
  }
  const { port } = server.address() as AddressInfo;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  return {
    ...gateway,
    server,
    url: `http://${host}:${port}`,
    /** Stops taking requests, lets those in flight finish (up to `drainMs`), then closes everything. */
    async close(drainMs = 10_000) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      if (active > 0) {
        await new Promise<void>((resolve) => {
          drained = resolve;
          setTimeout(resolve, drainMs).unref();
        });
      }
      server.closeAllConnections();
      await closed;
      await gateway.close();
    },
  };
}
