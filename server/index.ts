import http from "node:http";
import type { AddressInfo } from "node:net";
import { ApiKeys } from "./accounts/api-keys";
import type { Config } from "./config";
import { CallService } from "./gateway/call-service";
import { CallsLog } from "./gateway/calls-log";
import { Forwarder } from "./gateway/forward";
import { IdempotencyStore } from "./gateway/idempotency";
import { DailyCap, RateLimiter } from "./gateway/rate-limit";
import { SkillRegistry } from "./gateway/skills";
import { createRequestListener } from "./http/app";
import { type Db, openDatabase } from "./ledger/db";
import { GroupCommit } from "./ledger/group-commit";
import { assertBalanced } from "./ledger/invariants";
import { Ledger } from "./ledger/ledger";

export interface Gateway {
  config: Config;
  db: Db;
  ledger: Ledger;
  keys: ApiKeys;
  skills: SkillRegistry;
  calls: CallsLog;
  /** The HTTP request listener: the call endpoints, then the Express app for the rest. */
  handler: http.RequestListener;
  /** What the startup recovery found: holds and idempotency keys left open by a crash. */
  recovered: { holds: number; idempotencyKeys: number };
  close(): Promise<void>;
}

export interface RunningGateway extends Gateway {
  server: http.Server;
  url: string;
}

const defaultLog = (message: string, error?: unknown) => console.error(`[gateway] ${message}`, error ?? "");

/**
 * The composition root: config → database → ledger (with crash recovery and the startup
 * self-check) → services → HTTP app. The gateway refuses to start on broken books.
 */
export function createGateway(config: Config, options: { log?: typeof defaultLog } = {}): Gateway {
  const log = options.log ?? defaultLog;
  const db = openDatabase(config.dbPath);
  const commit = new GroupCommit(db, config.groupCommitMaxOps, (error) => log("a ledger commit failed and was rolled back", error));
  const ledger = new Ledger(db, commit);
  const idempotency = new IdempotencyStore(db, config.idempotencyTtlMs);

  const recovered = commit.run(() => ({ holds: ledger.recoverOpenHolds(), idempotencyKeys: idempotency.recoverInProgress() }));
  commit.flush();
  assertBalanced(db);

  const keys = new ApiKeys(db, config.keyCacheTtlMs);
  const skills = new SkillRegistry(db);
  const calls = new CallsLog(db);
  const forwarder = new Forwarder({ maxResponseBytes: config.maxResponseBytes });
  const callService = new CallService({
    config,
    ledger,
    skills,
    calls,
    idempotency,
    limiter: new RateLimiter(),
    dailyCap: new DailyCap((accountId, sinceMs) => calls.countSince(accountId, sinceMs)),
    forwarder,
  });
  const handler = createRequestListener({ config, keys, skills, ledger, calls, callService, log });

  const purge = setInterval(() => commit.run(() => idempotency.purgeExpired()), 3_600_000);
  purge.unref();

  return {
    config, db, ledger, keys, skills, calls, handler, recovered,
    async close() {
      clearInterval(purge);
      await forwarder.close();
      commit.flush();
      db.close();
    },
  };
}

/** Creates the gateway and listens on config.host:config.port (0 for any free port). */
export async function startGateway(config: Config, options: { log?: typeof defaultLog } = {}): Promise<RunningGateway> {
  const gateway = createGateway(config, options);
  const server = http.createServer({ keepAliveTimeout: 65_000 }, gateway.handler);
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
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await gateway.close();
    },
  };
}
