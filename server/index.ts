import http from "node:http";
import type { AddressInfo } from "node:net";
import { MemoryStore, type Store } from "express-rate-limit";
import type { Logger } from "pino";
import { ApiKeys } from "./identity/api-keys";
import { Sessions } from "./identity/sessions";
import { WalletService, type WalletServiceParameters } from "./wallets/wallet-service";
import { MagicLinks, type MailMessage, type Mailer, createMailer } from "./identity/email";
import { OAuthSignIn, oauthSettings } from "./identity/oauth";
import { McpOAuth } from "./identity/mcp-oauth";
import { SiweNonces } from "./identity/siwe";
import type { CardTopups } from "./payments/card-topups";
import { createSandboxCardTopups } from "./payments/sandbox-card";
import { type ChainConnection, type MoneyPath, createMoneyPath } from "./settlement/money-path";
import { settlementStores } from "./settlement/store";
import type { Config } from "./config";
import { CallService } from "./gateway/call-service";
import { CallPipeline } from "./gateway/pipeline";
import { RefusalCounter } from "./gateway/refusal-counter";
import { RefusalsStore } from "./gateway/refusals-store";
import { callAnswers } from "./http/call-answer";
import { CallsStore } from "./gateway/calls-store";
import { QualityStore } from "./gateway/quality-store";
import { QualityRecorder } from "./gateway/quality-recorder";
import { EgressPolicy, type HostResolver } from "./gateway/egress";
import { Forwarder } from "./gateway/forward";
import { IdempotencyKeys } from "./gateway/idempotency";
import { IdempotencyStore } from "./gateway/idempotency-store";
import { type CallDailyCap, type CallLimiter, DailyCap, RateLimiter } from "./gateway/rate-limit";
import { SkillRegistry } from "./catalog/skills";
import { SkillsStore } from "./catalog/skills-store";
import { createRequestListener } from "./http/app";
import type { RateLimitName } from "./http/rate-limits";
import type { Database } from "./db/sql";
import { openGatewayDatabase } from "./database";
import { SqliteDatabase } from "./db/sqlite-database";
import { assertBalanced } from "./ledger/invariants";
import { lockDatabase } from "./db/lock";
import { Ledger } from "./ledger/ledger";
import { type LogFunction, createLogger, logFunction } from "./ops/log";
import { GatewayMetrics } from "./ops/metrics";
import { currentRequest } from "./ops/request-context";
import { createX402, type X402Service } from "./x402";
import { settlementAddress } from "./settlement/addresses";
import { ReplicaMembership, SettlementLeadership, type SharedState, openSharedState } from "./replication";

export interface Gateway {
  config: Config;
  /** The gateway's tables: SQLite (the embedded default) or PostgreSQL (DATABASE_URL). */
  db: Database;
  ledger: Ledger;
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
  pruneExpired(): Promise<{ siweNonces: number; emailLinks: number; oauthStates: number; sessions: number; mcpOAuth: number }>;
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

/** The database, its lock (SQLite) or registry membership (PostgreSQL), and the shared state (Redis). */
interface Foundations {
  db: Database;
  unlock: () => void;
  membership?: ReplicaMembership;
  shared?: SharedState;
}

/** Closes whatever of the foundations was opened, in reverse order; never throws. */
async function closeFoundations(f: Partial<Foundations>): Promise<void> {
  await f.membership?.leave();
  await f.shared?.close().catch(() => {});
  await f.db?.close().catch(() => {});
  f.unlock?.();
}

/**
 * The composition root: config → database (SQLite or PostgreSQL) → shared state (Redis) → ledger (with crash
 * recovery and the startup self-check) → services → HTTP app. The gateway refuses to start on broken books,
 * and, sharing PostgreSQL, next to another replica when either has no Redis.
 */
export async function createGateway(config: Config, options: GatewayOptions = {}): Promise<Gateway> {
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  const log = options.log ?? logFunction(logger);
  const onFatal = options.onFatal ?? fatalFor(logger);
  const onPostgres = config.databaseUrl !== "";
  const f: Partial<Foundations> = {};
  let ledger: Ledger, idempotency: IdempotencyKeys, recovered: Gateway["recovered"];
  try {
    // One process owns a SQLite file: the lock refuses a second. PostgreSQL is shared by design.
    f.unlock = onPostgres ? () => {} : lockDatabase(config.dbPath);
    f.db = await openGatewayDatabase({
      databaseUrl: config.databaseUrl,
      sqlitePath: config.dbPath,
      groupCommitMaxOps: config.groupCommitMaxOps,
      onCommitError: onFatal,
      applicationName: `skill-gateway:${config.replicaId}`,
      onIdleError: (error) => log("a PostgreSQL connection closed while idle; the pool opens another", error),
      pingTimeoutMs: config.databasePingTimeoutMs,
      log,
    });
    if (onPostgres) f.membership = await ReplicaMembership.join(config, onFatal, log);
    ledger = await Ledger.open(f.db, { replicaId: onPostgres ? config.replicaId : undefined, log });
    idempotency = new IdempotencyKeys(new IdempotencyStore(f.db), config.idempotencyTtlMs, log);
    recovered = onPostgres
      ? // A replica joining has no call in flight: holds under its name are a previous life's (the same
        // REPLICA_ID restarted once its old heartbeat went stale), and no other replica may take them.
        { holds: await ledger.recoverOpenHolds({ ofReplicas: [config.replicaId] }), idempotencyKeys: 0 }
      : await f.db.transaction(
          async (tx) => ({
            holds: await ledger.recoverOpenHolds({}, tx),
            idempotencyKeys: await idempotency.recoverInProgress({}, tx),
          }),
          { durable: true },
        );
    await assertBalanced(f.db);
  } catch (error) {
    await closeFoundations(f);
    throw error;
  }
  const db = f.db;
  const calls = new CallsStore(db);
  let limiter: CallLimiter = new RateLimiter();
  let dailyCap: CallDailyCap = new DailyCap((accountId, sinceMs) => calls.countSince(accountId, sinceMs));
  if (config.redisUrl) {
    try {
      f.shared = await openSharedState(config, (accountId, sinceMs) => calls.countSince(accountId, sinceMs), log);
    } catch (error) {
      await closeFoundations(f);
      throw error;
    }
    limiter = f.shared.limiter;
    dailyCap = f.shared.dailyCap;
  }
  const shared = f.shared;

  // Process metrics (CPU, memory, event loop) each start a sampler: only when someone can scrape them.
  const metrics = new GatewayMetrics(
    {
      openHolds: () => ledger.openHoldCount(),
      indexer: options.chain ? () => moneyPath!.indexer.health : undefined,
      settler: options.chain
        ? () => moneyPath?.settler?.health ?? { started: false, running: false, stoppedOnRequest: false, failures: 0 }
        : undefined,
    },
    { processMetrics: config.metricsToken !== "" },
  );
  if (db instanceof SqliteDatabase) db.commit.onCommit = (stats) => metrics.observeCommit(stats);

  const keys = new ApiKeys(db, config.keyCacheTtlMs);
  const egress =
    options.egress ??
    new EgressPolicy({ allowlist: config.skillBackendAllowlist, allowedPorts: config.skillBackendPorts }, options.resolveHost);
  const skills = await SkillRegistry.open(new SkillsStore(db), { warn: (message) => log(message) });
  if (shared) {
    // A key revoked or a skill changed here reaches the other replicas' caches within the message's flight;
    // their caches' time-to-live is the backstop when Redis is down.
    const announce = (message: Parameters<typeof shared.bus.publish>[0]) =>
      shared.bus.publish(message).catch((error) => log(`announcing ${message.kind} to the other replicas failed`, error));
    keys.onRevoked = (keyId) => void announce({ kind: "key_revoked", keyId });
    keys.onChanged = (keyId) => void announce({ kind: "key_changed", keyId });
    skills.onChanged = (skillId) => void announce({ kind: "skill_changed", skillId });
    shared.bus.onMessage((message) => (message.kind === "skill_changed" ? skills.invalidate() : keys.forget(message.keyId)));
    shared.bus.onMissed(() => {
      keys.forgetAll();
      skills.invalidate();
    });
  }
  const forwarder = new Forwarder({ maxResponseBytes: config.maxResponseBytes, egress });
  const refusals = new RefusalCounter(new RefusalsStore(db), { log });
  const quality = new QualityRecorder(new QualityStore(db), { log });
  const pipeline = new CallPipeline({
    config,
    db: ledger.db,
    refusals,
    skills,
    calls,
    idempotency,
    limiter,
    dailyCap,
    forwarder,
    answers: callAnswers,
    onCall: (call) => {
      metrics.observeCall(call);
      quality.count({
        skillId: call.skillId,
        result: call.code ?? "success",
        latencyMs: call.latencyMs,
        chargedMicros: call.chargedMicros,
      });
      // For the request's log line: which skill, how it ended, what it charged.
      const request = currentRequest();
      if (request) {
        request.skill = call.skill;
        request.outcome = call.outcome;
        request.chargedMicros = call.chargedMicros;
      }
    },
  });
  const callService = new CallService({ config, ledger, pipeline, now: options.now });
  const settlement = settlementStores(db);
  const moneyPath = options.chain ? createMoneyPath(ledger, settlement, config, options.chain, log) : undefined;
  const x402 = options.chain
    ? await createX402(options.chain, {
        config,
        ledger,
        skills,
        calls,
        pipeline,
        sellerAddress: (accountId) => settlementAddress(settlement.addresses, accountId),
        replicaId: config.replicaId,
        log,
      })
    : undefined;
  // x402 payments a crash left open: a single gateway resolves its own at once (none can be in flight yet).
  if (x402 && !onPostgres) {
    const found = await x402.recover(Date.now());
    if (found.settled + found.refunded + found.closed + found.waiting > 0) log(`x402 payments left open: ${JSON.stringify(found)}`);
  }
  const sessions = new Sessions(ledger);
  const wallets = options.wallets
    ? new WalletService({ ...options.wallets, ledger, sessions, log, vouchers: moneyPath?.vouchers })
    : undefined;
  if (wallets) {
    sessions.onOpen = async (accountId) => {
      try {
        await wallets.ensureFor(accountId);
      } catch (error) {
        log(`could not give ${accountId} its embedded wallet; it gets one at its next sign-in`, error);
      }
    };
  }
  const magicLinks = new MagicLinks(db, options.mailer ?? createMailer(config, db, options.outboxEcho), {
    ttlMs: config.emailLinkTtlMs,
    pendingMax: config.emailLinksMax,
  });
  const oauth = new OAuthSignIn(db, oauthSettings(config), config.oauthStatesMax);
  const mcpOAuth = new McpOAuth(
    db,
    keys,
    {
      accessTokenTtlMs: config.mcpAccessTokenTtlMs,
      refreshTokenTtlMs: config.mcpRefreshTokenTtlMs,
      clientsMax: config.mcpOAuthClientsMax,
      requestsMax: config.mcpOAuthRequestsMax,
    },
    options.now,
  );
  const siweNonces = new SiweNonces(db, {
    perClientMax: config.siweNoncesPerClientMax,
    max: config.siweNoncesMax,
  });
  const storeFor = (limit: RateLimitName) => options.rateLimitStore?.(limit) ?? shared?.rateLimitStore(limit) ?? new MemoryStore();
  const rateLimitStores: Record<RateLimitName, Store> = {
    sign_in: storeFor("sign_in"),
    public: storeFor("public"),
    credential: storeFor("credential"),
    health: storeFor("health"),
  };
  const cardTopups = createSandboxCardTopups({ ledger, chain: options.chain, log: (message, error) => log(`[card] ${message}`, error) });
  const handler = createRequestListener({
    config,
    keys,
    skills,
    ledger,
    settlement,
    calls,
    refusals,
    quality,
    callService,
    egress,
    moneyPath,
    chain: options.chain,
    x402: x402?.service,
    sessions,
    magicLinks,
    oauth,
    mcpOAuth,
    cardTopups,
    wallets,
    siweNonces,
    rateLimitStores,
    redis: shared?.redis,
    log,
    logger,
    metrics,
    now: options.now,
  });

  /**
   * Deletes the sign-in state that can never be used again: expired SIWE nonces, e-mail links
   * and OAuth states, and expired or ended sessions. Anyone can make the gateway store the
   * first three, so they must not accumulate between sign-ins.
   */
  const pruneExpired = async () => ({
    siweNonces: await siweNonces.purgeExpired(),
    emailLinks: await magicLinks.purgeExpired(),
    oauthStates: await oauth.purgeExpired(),
    sessions: await sessions.purgeExpired(),
    mcpOAuth: await mcpOAuth.purgeExpired(),
  });

  // Housekeeping never throws out of a timer: a failure is logged and tried again next time.
  const every = (ms: number, what: string, fn: () => Promise<unknown>) => {
    const timer = setInterval(() => {
      fn().catch((error) => log(`${what} failed`, error));
    }, ms);
    timer.unref();
    return timer;
  };
  const timers = [
    every(3_600_000, "purging expired idempotency keys", () => idempotency.purgeExpired()),
    // API keys' last use, noted in memory by the call path, written here in one transaction.
    every(10_000, "recording API keys' last use", () => keys.flushLastUsed()),
    every(config.pruneIntervalMs, "pruning expired sign-in state and sessions", pruneExpired),
  ];

  let backgroundStarted = false;
  // An x402 payment open longer than any call can last was orphaned (its replica stopped, or its node went quiet):
  // the leader completes, refunds or closes it from the escrow's events.
  let x402Recovery: NodeJS.Timeout | undefined;
  const startLoops = (walletSweepIntervalMs: number) => {
    if (x402) x402Recovery = every(60_000, "resolving orphaned x402 payments", () => x402.recover(Date.now() - 15 * 60_000));
    moneyPath?.start();
    wallets?.start(walletSweepIntervalMs);
  };
  const stopLoops = async () => {
    clearInterval(x402Recovery);
    await wallets?.stop();
    await moneyPath?.stop();
  };
  let leadership: SettlementLeadership | undefined;

  return {
    config,
    db,
    ledger,
    keys,
    skills,
    calls,
    quality,
    handler,
    moneyPath,
    x402: x402?.service,
    sessions,
    wallets,
    magicLinks,
    cardTopups,
    recovered,
    pruneExpired,
    startBackground({ walletSweepIntervalMs = config.walletSweepIntervalMs } = {}) {
      if (backgroundStarted) return;
      backgroundStarted = true;
      if (!f.membership) {
        startLoops(walletSweepIntervalMs);
        return;
      }
      leadership = new SettlementLeadership({
        config,
        db,
        ledger,
        idempotency,
        membership: f.membership,
        start: () => startLoops(walletSweepIntervalMs),
        stop: stopLoops,
        log,
      });
      leadership.start();
    },
    isLeader: () => (leadership ? leadership.isLeader : backgroundStarted),
    async close() {
      for (const timer of timers) clearInterval(timer);
      for (const store of Object.values(rateLimitStores)) await store.shutdown?.();
      if (leadership) await leadership.stop();
      else await stopLoops();
      await forwarder.close();
      await skills.close();
      await keys.flushLastUsed().catch((error) => log("recording API keys' last use at close failed", error));
      await refusals.close();
      await quality.close();
      // Releases and keys the database did not take while it was unavailable: one last try.
      await ledger.closeDeferred();
      await idempotency.closeDeferred();
      await closeFoundations(f);
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
