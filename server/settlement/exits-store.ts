import { type Database, type Sql, within } from "../db/sql";
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

/** A request as recorded: its log, its address and account, and what it asks. */
export type ExitRequestRecord = ExitLogPosition & {
  address: StoredAddress;
  accountId: string | null;
  requestedMicros: bigint;
  readyAtSec: bigint;
};

/** How a pending request ended. */
export type ExitEnd = {
  status: "replaced" | "cancelled" | "completed";
  keptMicros: bigint;
  paidMicros: bigint | null;
  uncoveredMicros: bigint;
};

/**
 * The `chain_exits` table (./exits.ts): one row per exit request, from pending to replaced, cancelled or
 * completed. The money an exit freezes and gives back moves only through the ledger's write API
 * (Ledger.topUpExitFreezes, Ledger.returnExitFreeze), which keeps `frozen` and `shortfall` as it moves it;
 * this store records requests and their ends. A write given `tx` joins that transaction, and runs in one of
 * its own otherwise.
 */
export class ExitsStore {
  constructor(private readonly db: Database) {}

  /** The request a log recorded, if it was. */
  byRequestLog(
    txHash: string,
    logIndex: number,
    sql: Sql = this.db,
  ): Promise<{ address: string; requested: bigint; ready_at: bigint } | undefined> {
    return sql.one("SELECT address, requested, ready_at FROM chain_exits WHERE tx_hash = ? AND log_index = ?", [txHash, logIndex]);
  }

  /** The exit a closing log (cancel or completion) closed, if it was recorded. */
  byClosingLog(
    txHash: string,
    logIndex: number,
    sql: Sql = this.db,
  ): Promise<{ tx_hash: string; log_index: bigint; status: string } | undefined> {
    return sql.one("SELECT tx_hash, log_index, status FROM chain_exits WHERE closed_tx_hash = ? AND closed_log_index = ?", [
      txHash,
      logIndex,
    ]);
  }

  /**
   * The pending request at an address (the escrow keeps at most one). Inside a transaction its row stays
   * locked until the transaction ends (PostgreSQL), so what it has frozen cannot move under a caller that
   * closes it on the strength of this read.
   */
  pendingAt(address: string, sql: Sql = this.db): Promise<ExitRow | undefined> {
    return sql.one(
      `SELECT tx_hash, log_index, address, account_id, requested, ready_at, frozen, shortfall
       FROM chain_exits WHERE address = ? AND status = 'pending'${sql.dialect.forUpdate}`,
      [address],
    );
  }

  /** Records a pending request with nothing frozen yet and `shortfallMicros` owed to its freeze. */
  async insertPending(request: ExitRequestRecord, shortfallMicros: bigint, atMs: number, tx?: Sql): Promise<void> {
    await within(this.db, tx, (tx) =>
      tx.run(
        `INSERT INTO chain_exits (tx_hash, log_index, block_number, block_hash, address, account_id, requested, ready_at, status, frozen, shortfall, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)`,
        [
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
        ],
      ),
    );
  }

  /** What a request has frozen. */
  frozen(txHash: string, logIndex: number, sql: Sql = this.db): Promise<bigint | undefined> {
    return sql.value<bigint>("SELECT frozen FROM chain_exits WHERE tx_hash = ? AND log_index = ?", [txHash, logIndex]);
  }

  /** Closes a pending request; false if it was not pending. */
  async close(
    request: { tx_hash: string; log_index: bigint },
    end: ExitEnd,
    by: ExitLogPosition,
    atMs: number,
    tx?: Sql,
  ): Promise<boolean> {
    const changed = await within(this.db, tx, (tx) =>
      tx.run(
        `UPDATE chain_exits SET status = ?, frozen = ?, shortfall = 0, paid = ?, uncovered = ?,
              closed_tx_hash = ?, closed_log_index = ?, closed_block_number = ?, closed_at = ?
       WHERE tx_hash = ? AND log_index = ? AND status = 'pending'`,
        [
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
        ],
      ),
    );
    return changed === 1;
  }

  /** How many exits an address completed while no account owned it. */
  async completedUnownedCount(address: StoredAddress, sql: Sql = this.db): Promise<number> {
    const count = await sql.value<bigint>(
      "SELECT COUNT(*) FROM chain_exits WHERE address = ? AND account_id IS NULL AND status = 'completed'",
      [address],
    );
    return Number(count);
  }

  /**
   * Gives the exits an address requested before anyone owned it to `accountId`; a pending one owes its whole
   * request to its freeze (the caller then has the ledger top the freeze up). Returns how many.
   */
  adoptUnowned(address: StoredAddress, accountId: string, tx?: Sql): Promise<number> {
    return within(this.db, tx, (tx) =>
      tx.run(
        `UPDATE chain_exits SET account_id = ?, shortfall = CASE WHEN status = 'pending' THEN requested ELSE 0 END
         WHERE address = ? AND account_id IS NULL`,
        [accountId, address],
      ),
    );
  }
}
