import type { Db } from "../db/db";
import type { StoredAddress } from "./addresses-store";

/** A pending row of `chain_exits`, keyed by its request's log (tx_hash, log_index). */
export type ExitRow = {
  tx_hash: string;
  log_index: bigint;
  address: string;
  account_id: string | null;
  requested: bigint;
  ready_at: bigint;
  frozen: bigint;
  shortfall: bigint;
};

/** Where a log is on the chain. */
export type ExitLogPosition = { txHash: string; logIndex: number; blockNumber: bigint; blockHash: string };

/**
 * The `chain_exits` table (./exits.ts): one row per exit request, from pending to replaced, cancelled or
 * completed. The money an exit freezes and gives back moves only through the ledger's write API
 * (Ledger.topUpExitFreezes, Ledger.returnExitFreeze), which keeps `frozen` and `shortfall` as it moves it;
 * this store records requests and their ends. Writes run inside the caller's ledger operation.
 */
export interface ExitsStore {
  /** The request a log recorded, if it was. */
  byRequestLog(txHash: string, logIndex: number): { address: string; requested: bigint; ready_at: bigint } | undefined;
  /** The exit a closing log (cancel or completion) closed, if it was recorded. */
  byClosingLog(txHash: string, logIndex: number): { tx_hash: string; log_index: bigint; status: string } | undefined;
  /** The pending request at an address (the escrow keeps at most one). */
  pendingAt(address: string): ExitRow | undefined;
  /** Records a pending request with nothing frozen yet and `shortfallMicros` owed to its freeze. */
  insertPending(
    request: ExitLogPosition & { address: StoredAddress; accountId: string | null; requestedMicros: bigint; readyAtSec: bigint },
    shortfallMicros: bigint,
    atMs: number,
  ): void;
  /** What a request has frozen. */
  frozen(txHash: string, logIndex: number): bigint | undefined;
  /** Closes a pending request; false if it was not pending. */
  close(
    request: { tx_hash: string; log_index: bigint },
    end: { status: "replaced" | "cancelled" | "completed"; keptMicros: bigint; paidMicros: bigint | null; uncoveredMicros: bigint },
    by: ExitLogPosition,
    atMs: number,
  ): boolean;
  /** How many exits an address completed while no account owned it. */
  completedUnownedCount(address: StoredAddress): number;
  /**
   * Gives the exits an address requested before anyone owned it to `accountId`; a pending one owes its whole
   * request to its freeze (the caller then has the ledger top the freeze up). Returns how many.
   */
  adoptUnowned(address: StoredAddress, accountId: string): number;
}

/** ExitsStore on the gateway's SQLite database. */
export class SqliteExitsStore implements ExitsStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      byRequestLog: db.prepare("SELECT address, requested, ready_at FROM chain_exits WHERE tx_hash = ? AND log_index = ?"),
      byClosingLog: db.prepare("SELECT tx_hash, log_index, status FROM chain_exits WHERE closed_tx_hash = ? AND closed_log_index = ?"),
      pendingAt: db.prepare(
        `SELECT tx_hash, log_index, address, account_id, requested, ready_at, frozen, shortfall
         FROM chain_exits WHERE address = ? AND status = 'pending'`,
      ),
      insert: db.prepare(
        `INSERT INTO chain_exits (tx_hash, log_index, block_number, block_hash, address, account_id, requested, ready_at, status, frozen, shortfall, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)`,
      ),
      frozen: db.prepare("SELECT frozen FROM chain_exits WHERE tx_hash = ? AND log_index = ?").pluck(),
      close: db.prepare(
        `UPDATE chain_exits SET status = ?, frozen = ?, shortfall = 0, paid = ?, uncovered = ?,
                closed_tx_hash = ?, closed_log_index = ?, closed_block_number = ?, closed_at = ?
         WHERE tx_hash = ? AND log_index = ? AND status = 'pending'`,
      ),
      completedUnowned: db
        .prepare("SELECT COUNT(*) FROM chain_exits WHERE address = ? AND account_id IS NULL AND status = 'completed'")
        .pluck(),
      adopt: db.prepare(
        `UPDATE chain_exits SET account_id = ?, shortfall = CASE WHEN status = 'pending' THEN requested ELSE 0 END
         WHERE address = ? AND account_id IS NULL`,
      ),
    };
  }

  byRequestLog(txHash: string, logIndex: number): { address: string; requested: bigint; ready_at: bigint } | undefined {
    return this.stmt.byRequestLog.get(txHash, logIndex) as { address: string; requested: bigint; ready_at: bigint } | undefined;
  }

  byClosingLog(txHash: string, logIndex: number): { tx_hash: string; log_index: bigint; status: string } | undefined {
    return this.stmt.byClosingLog.get(txHash, logIndex) as { tx_hash: string; log_index: bigint; status: string } | undefined;
  }

  pendingAt(address: string): ExitRow | undefined {
    return this.stmt.pendingAt.get(address) as ExitRow | undefined;
  }

  insertPending(
    request: ExitLogPosition & { address: StoredAddress; accountId: string | null; requestedMicros: bigint; readyAtSec: bigint },
    shortfallMicros: bigint,
    atMs: number,
  ): void {
    this.stmt.insert.run(
      request.txHash,
      request.logIndex,
      request.blockNumber,
      request.blockHash,
      request.address,
      request.accountId,
      request.requestedMicros,
      request.readyAtSec,
      shortfallMicros,
      atMs,
    );
  }

  frozen(txHash: string, logIndex: number): bigint | undefined {
    return this.stmt.frozen.get(txHash, logIndex) as bigint | undefined;
  }

  close(
    request: { tx_hash: string; log_index: bigint },
    end: { status: "replaced" | "cancelled" | "completed"; keptMicros: bigint; paidMicros: bigint | null; uncoveredMicros: bigint },
    by: ExitLogPosition,
    atMs: number,
  ): boolean {
    return (
      this.stmt.close.run(
        end.status,
        end.keptMicros,
        end.paidMicros,
        end.uncoveredMicros,
        by.txHash,
        by.logIndex,
        by.blockNumber,
        atMs,
        request.tx_hash,
        request.log_index,
      ).changes === 1
    );
  }

  completedUnownedCount(address: StoredAddress): number {
    return Number(this.stmt.completedUnowned.get(address) as bigint);
  }

  adoptUnowned(address: StoredAddress, accountId: string): number {
    return this.stmt.adopt.run(accountId, address).changes;
  }
}
