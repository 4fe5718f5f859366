import http from "node:http";
import type { AddressInfo } from "node:net";
import { ApiKeys } from "./identity/api-keys";
import { SqliteApiKeysStore } from "./identity/api-keys-store";
import { SqliteSessionsStore } from "./identity/sessions-store";
import { SqliteEmailTokensStore, SqliteOAuthStatesStore, SqliteOutboxStore, SqliteSiweNoncesStore } from "./identity/sign-in-store";
import { Sessions } from "./identity/sessions";
import { WalletService, type WalletServiceParameters } from "./wallets/wallet-service";
import { MagicLinks, type MailMessage, type Mailer, createMailer } from "./identity/email";
import { OAuthSignIn, oauthSettings } from "./identity/oauth";
import { SiweNonces } from "./identity/siwe";
import { MemoryStore, type Store } from "express-rate-limit";
import type { CardTopups } from "./payments/card-topups";
import { createSandboxCardTopups } from "./payments/sandbox-card";
import { type ChainConnection, type MoneyPath, createMoneyPath } from "./settlement/money-path";
import { settlementStores } from "./settlement/store";
import type { Config } from "./config";
import { CallService } from "./gateway/call-service";
import { callAnswers } from "./http/call-answer";
import { SqliteCallsStore, type CallsStore } from "./gateway/calls-store";
import { EgressPolicy, type HostResolver } from "./gateway/egress";
import { Forwarder } from "./gateway/forward";
import { IdempotencyKeys } from "./gateway/idempotency";
import { SqliteIdempotencyStore } from "./gateway/idempotency-store";
import { DailyCap, RateLimiter } from "./gateway/rate-limit";
import { SkillRegistry } from "./catalog/skills";
import { SqliteSkillsStore } from "./catalog/skills-store";
import { createRequestListener } from "./http/app";
import type { RateLimitName } from "./http/rate-limits";
import { type Db, openDatabase } from "./db/db";
import { SCHEMA } from "./schema";
import { GroupCommit } from "./db/group-commit";
import { assertBalanced } from "./ledger/invariants";
import { lockDatabase } from "./db/lock";
import { Ledger } from "./ledger/ledger";
import type { Logger } from "pino";
import { type LogFunction, createLogger, logFunction } from "./ops/log";
import { GatewayMetrics } from "./ops/metrics";
import { currentRequest } from "./ops/request-context";

export interface Gateway {
  config: Config;
  db: Db;
  ledger: Ledger;
  keys: ApiKeys;
  skills: SkillRegistry;
  calls: CallsStore;
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
  /** Deposits, settlement and withdrawals, when the gateway has a chain (start() runs their loops). */
  moneyPath?: MoneyPath;
  /** What the startup recovery found: holds and idempotency keys left open by a crash. */
  recovered: { holds: number; idempotencyKeys: number };
  /** Deletes expired sign-in state and sessions now (a timer does it every PRUNE_INTERVAL_SEC); returns how many of each. */
  pruneExpired(): { siweNonces: number; emailLinks: number; oauthStates: number; sessions: number };
  close(): Promise<void>;
}

export interface RunningGateway extends Omit<Gateway, "close"> {
  server: http.Server;
  url: string;
  close(drainMs?: number): Promise<void>;
}

/**
 * What the gateway does when its books and its disk may disagree (a ledger commit failed).
 * It stops: the process cannot tell which writes survived, while a restart can, and
 * startup recovery releases every hold the failure left open. Crash-only, like a database
 * after a failed fsync. pino writes out what it still buffers as the process exits.
 */
const fatalFor = (logger: Logger) => (error: unknown) => {
  logger.fatal({ err: error }, "a ledger commit failed; stopping so the next start can recover");
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
  /** Called when a ledger commit fails; by default the process exits. */
  onFatal?: (error: unknown) => void;
  /**
   * The escrow chain. Without it the gateway bills calls against its ledger only: no
   * deposits are indexed, nothing settles, and POST /v1/withdrawals answers 503.
   */
  chain?: ChainConnection;
  /** Resolves skill backends' host names for the egress policy; the system resolver by default. */
  resolveHost?: HostResolver;
  /** Where e-mail goes; by default what the config says (SMTP_URL, or the outbox table). */
  mailer?: Mailer;
  /** With the outbox mailer (no SMTP_URL): also hands each message here, for a developer to read. */
  outboxEcho?: (message: MailMessage) => void;
  /** Embedded wallets (ERC-4337): every account that signs in gets one; USDC sent to it is swept into the escrow. */
  wallets?: Omit<WalletServiceParameters, "ledger" | "sessions" | "log" | "vouchers">;
  /**
   * Where each per-address limit of the unauthenticated endpoints keeps its counters (one
   * store per limit): express-rate-limit's MemoryStore by default, which holds for this
   * process only; a shared store (Redis) makes the limits hold across instances.
   */
  rateLimitStore?: (limit: RateLimitName) => Store;
}

/**
 * The composition root: config → database → ledger (with crash recovery and the startup
 * self-check) → services → HTTP app. The gateway refuses to start on broken books.
 */
export function createGateway(config: Config, options: GatewayOptions = {}): Gateway {
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  const log = options.log ?? logFunction(logger);
  const unlock = lockDatabase(config.dbPath);
  let db: Db | undefined;
  let commit: GroupCommit, ledger: Ledger, idempotency: IdempotencyKeys, recovered: Gateway["recovered"];
  try {
    db = openDatabase(config.dbPath, SCHEMA);
    commit = new GroupCommit(db, config.groupCommitMaxOps, options.onFatal ?? fatalFor(logger));
    ledger = new Ledger(db, commit);
    idempotency = new IdempotencyKeys(new SqliteIdempotencyStore(db), config.idempotencyTtlMs);
    recovered = commit.run(() => ({ holds: ledger.recoverOpenHolds(), idempotencyKeys: idempotency.recoverInProgress() }));
    commit.flush();
    assertBalanced(db);
  } catch (error) {
    db?.close();
    unlock();
    throw error;
  }

  // Process metrics (CPU, memory, event loop) each start a sampler: only when someone can scrape them.
  const metrics = new GatewayMetrics(
    {
      openHolds: () => ledger.openHoldCount(),
      indexer: options.chain ? () => moneyPath!.indexer.health : undefined,
      settler: options.chain ? () => moneyPath?.settler?.health ?? { started: false, running: false, failures: 0 } : undefined,
    },
    { processMetrics: config.metricsToken !== "" },
  );
  commit.onCommit = (stats) => metrics.observeCommit(stats);

  const keys = new ApiKeys(new SqliteApiKeysStore(db), config.keyCacheTtlMs);
  const egress = new EgressPolicy({ allowlist: config.skillBackendAllowlist, allowedPorts: config.skillBackendPorts }, options.resolveHost);
  const skills = new SkillRegistry(new SqliteSkillsStore(db), (message) => log(message));
  const calls = new SqliteCallsStore(db);
  const forwarder = new Forwarder({ maxResponseBytes: config.maxResponseBytes, egress });
  const callService = new CallService({
    config,
    ledger,
    skills,
    calls,
    idempotency,
    limiter: new RateLimiter(),
    dailyCap: new DailyCap((accountId, sinceMs) => calls.countSince(accountId, sinceMs)),
    forwarder,
    answers: callAnswers,
    onCall: (call) => {
      metrics.observeCall(call);
      // For the request's log line: which skill, how it ended, what it charged.
      const request = currentRequest();
      if (request) {
        request.skill = call.skill;
        request.outcome = call.outcome;
        request.chargedMicros = call.chargedMicros;
      }
    },
  });
  const settlement = settlementStores(db);
  const moneyPath = options.chain ? createMoneyPath(ledger, settlement, config, options.chain, log) : undefined;
  const sessions = new Sessions(new SqliteSessionsStore(db), ledger);
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
  const magicLinks = new MagicLinks(
    new SqliteEmailTokensStore(db),
    commit,
    options.mailer ?? createMailer(config, commit, new SqliteOutboxStore(db), options.outboxEcho),
    {
      ttlMs: config.emailLinkTtlMs,
      pendingMax: config.emailLinksMax,
    },
  );
  const oauth = new OAuthSignIn(new SqliteOAuthStatesStore(db), commit, oauthSettings(config), config.oauthStatesMax);
  const siweNonces = new SiweNonces(new SqliteSiweNoncesStore(db), commit, {
    perClientMax: config.siweNoncesPerClientMax,
    max: config.siweNoncesMax,
  });
  const rateLimitStores: Record<RateLimitName, Store> = {
    sign_in: options.rateLimitStore?.("sign_in") ?? new MemoryStore(),
    public: options.rateLimitStore?.("public") ?? new MemoryStore(),
  };
  const cardTopups = createSandboxCardTopups({ ledger, chain: options.chain, log: (message, error) => log(`[card] ${message}`, error) });
  const handler = createRequestListener({
    config,
    keys,
    skills,
    ledger,
    settlement,
    calls,
    callService,
    egress,
    moneyPath,
    chain: options.chain,
    sessions,
    magicLinks,
    oauth,
    cardTopups,
    wallets,
    siweNonces,
    rateLimitStores,
    log,
    logger,
    metrics,
  });

  /**
   * Deletes the sign-in state that can never be used again: expired SIWE nonces, e-mail links
   * and OAuth states, and expired or ended sessions. Anyone can make the gateway store the
   * first three, so they must not accumulate between sign-ins.
   */
  const pruneExpired = () => ({
    siweNonces: siweNonces.purgeExpired(),
    emailLinks: magicLinks.purgeExpired(),
    oauthStates: oauth.purgeExpired(),
    sessions: sessions.purgeExpired(),
  });

  // Housekeeping never throws out of a timer: a failure is logged and tried again next time.
  const every = (ms: number, what: string, fn: () => void) => {
    const timer = setInterval(() => {
      try {
        fn();
      } catch (error) {
        log(`${what} failed`, error);
      }
    }, ms);
    timer.unref();
    return timer;
  };
  const timers = [
    every(3_600_000, "purging expired idempotency keys", () => commit.run(() => idempotency.purgeExpired())),
    every(2_000, "reloading the skill catalogue", () => skills.refreshIfChanged()),
    // API keys' last use, noted in memory by the call path, written here in the group commit.
    every(10_000, "recording API keys' last use", () => commit.run(() => keys.flushLastUsed())),
    every(config.pruneIntervalMs, "pruning expired sign-in state and sessions", () => {
      pruneExpired();
    }),
  ];

  return {
    config,
    db,
    ledger,
    keys,
    skills,
    calls,
    handler,
    moneyPath,
    sessions,
    wallets,
    magicLinks,
    cardTopups,
    recovered,
    pruneExpired,
    async close() {
      for (const timer of timers) clearInterval(timer);
      for (const store of Object.values(rateLimitStores)) await store.shutdown?.();
      await wallets?.stop();
      await moneyPath?.stop();
      await forwarder.close();
      await skills.close();
      commit.run(() => keys.flushLastUsed());
      commit.flush();
      db.close();
      unlock();
    },
  };
}

/** Creates the gateway and listens on config.host:config.port (0 for any free port). */
export async function startGateway(config: Config, options: GatewayOptions = {}): Promise<RunningGateway> {
  const gateway = createGateway(config, options);
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
