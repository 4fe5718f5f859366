import fs from "node:fs";
import type { Config } from "./config";
import { openGatewayDatabase } from "./database";
import { lockDatabase } from "./db/lock";
import type { Database } from "./db/sql";
import { IdempotencyKeys } from "./gateway/idempotency";
import { IdempotencyStore } from "./gateway/idempotency-store";
import { CallsStore } from "./gateway/calls-store";
import { type HoldBook, LedgerHolds } from "./gateway/ledger-payment";
import { SqliteLedgerWriter } from "./gateway/ledger-writer";
import { WriterLock } from "./db/writer-lock";
import { assertBalanced } from "./ledger/invariants";
import { Ledger } from "./ledger/ledger";
import { ReplicaMembership, type SharedState, openSharedState } from "./replication";

/** What startup recovery found: holds and idempotency keys left open by a crash. */
export interface Recovered {
  holds: number;
  idempotencyKeys: number;
}

/** The database, its lock (SQLite) or registry membership (PostgreSQL), and the shared state (Redis). */
interface Foundations {
  db: Database;
  unlock: () => void;
  membership?: ReplicaMembership;
  shared?: SharedState;
  /** SQLite's ledger writer thread, when SQLITE_LEDGER_WRITER=thread. */
  writer?: SqliteLedgerWriter;
}

/** Closes whatever of the foundations was opened, in reverse order; never throws. */
async function closeFoundations(f: Partial<Foundations>): Promise<void> {
  await f.membership?.leave();
  await f.shared?.close().catch(() => {});
  await f.writer?.close().catch(() => {});
  await f.db?.close().catch(() => {});
  f.unlock?.();
}

/**
 * The foundations and the books: the database (locked, or this replica registered), the ledger with crash recovery
 * and the startup self-check, the idempotency keys (recovered with the holds), and Redis's shared state. Whatever
 * was opened is closed again when a step fails.
 */
export async function openBooks(config: Config, log: (message: string, error?: unknown) => void, onFatal: (error: unknown) => void) {
  const onPostgres = config.databaseUrl !== "";
  const f: Partial<Foundations> = {};
  try {
    // One process owns a SQLite file: the lock refuses a second. PostgreSQL is shared by design.
    f.unlock = onPostgres ? () => {} : lockDatabase(config.dbPath);
    // Keyed calls' ledger writes on a thread of their own (SQLITE_LEDGER_WRITER=thread): a file only, as a second
    // connection cannot open an in-memory database.
    const writerLock =
      !onPostgres && config.sqliteLedgerWriter === "thread" && config.dbPath !== ":memory:" && config.dbPath !== ""
        ? new WriterLock()
        : undefined;
    const db = await openGatewayDatabase({
      databaseUrl: config.databaseUrl,
      sqlitePath: config.dbPath,
      groupCommitMaxOps: config.groupCommitMaxOps,
      onCommitError: onFatal,
      writerLock,
      applicationName: `skill-gateway:${config.replicaId}`,
      onIdleError: (error) => log("a PostgreSQL connection closed while idle; the pool opens another", error),
      pingTimeoutMs: config.databasePingTimeoutMs,
      log,
    });
    f.db = db;
    if (onPostgres) f.membership = await ReplicaMembership.join(config, onFatal, log);
    const ledger = await Ledger.open(db, { replicaId: onPostgres ? config.replicaId : undefined, log });
    const idempotency = new IdempotencyKeys(new IdempotencyStore(db), config.idempotencyTtlMs, log);
    const recovered: Recovered = onPostgres
      ? // A replica joining has no call in flight: holds under its name are a previous life's (the same
        // REPLICA_ID restarted once its old heartbeat went stale), and no other replica may take them.
        { holds: await ledger.recoverOpenHolds({ ofReplicas: [config.replicaId] }), idempotencyKeys: 0 }
      : await db.transaction(
          async (tx) => ({
            holds: await ledger.recoverOpenHolds({}, tx),
            idempotencyKeys: await idempotency.recoverInProgress({}, tx),
          }),
          { durable: true },
        );
    await assertBalanced(db);
    // Started once recovery has closed what a crash left open: the thread finds only its own holds.
    if (writerLock) {
      f.writer = await SqliteLedgerWriter.start(fs.realpathSync(config.dbPath), writerLock, onFatal);
      ledger.otherWriter = f.writer;
    }
    if (config.redisUrl) {
      // The daily cap counts the calls log when Redis has no count yet.
      const calls = new CallsStore(db);
      f.shared = await openSharedState(config, (accountId, sinceMs) => calls.countSince(accountId, sinceMs), log);
    }
    const holds: HoldBook = f.writer ?? new LedgerHolds(ledger);
    return { db, ledger, holds, idempotency, recovered, membership: f.membership, shared: f.shared, close: () => closeFoundations(f) };
  } catch (error) {
    await closeFoundations(f);
    throw error;
  }
}
