import type { Db } from "../db/db";

/** Names an exit request by its ExitRequested log (server/settlement/exits.ts). */
export interface ExitKey {
  txHash: string;
  logIndex: number;
}

/**
 * What the freezes need of the Ledger (server/ledger/ledger.ts), and nothing more: its operation boundary, an
 * account's available balance, and the two entries that move money into and out of a freeze. The Ledger
 * writes the entries and their postings; this file decides when and how much.
 */
export interface FreezeBooks {
  /** Runs `fn` as one ledger operation (a GroupCommit savepoint, nested in the caller's if there is one). */
  run<T>(fn: () => T): T;
  /** The account's available balance. */
  availableOf(accountId: string): bigint;
  /** Writes an 'exit_freeze' entry linked to the exit: `amountMicros` from available to the escrow's side. */
  freeze(accountId: string, amountMicros: bigint, exit: ExitKey, memo: string): bigint;
  /** Writes an 'exit_return' entry linked to the exit: `amountMicros` from the escrow's side back to available. */
  unfreeze(accountId: string, amountMicros: bigint, exit: ExitKey, memo: string): bigint;
}

/*
 * Unilateral exits (server/settlement/exits.ts). When the escrow reports an ExitRequested for an account's
 * address, the ledger must make sure no call can spend the requested amount, since the escrow will pay it
 * out after the delay whatever the ledger did meanwhile. The rule: an exit's freeze is an 'exit_freeze'
 * entry (available -> escrow source) of min(requested, available); what the available balance could not
 * cover (money held by calls in flight, or spent and not yet settled) is the exit's shortfall. While an
 * account has a shortfall, every unit that reaches its available balance (a released hold, a deposit, a
 * returned voucher or freeze) goes to the freeze first. So a short account's available balance stays at
 * zero and hold() refuses every call; a captured hold's money never comes back, which is right: it is
 * spent, the settler debits it on-chain, and the escrow then pays that much less.
 */

/**
 * The exits' freezes and the shortfall bookkeeping behind them (the `frozen` and `shortfall` columns of
 * chain_exits). Built by the Ledger, which exposes these operations as its own (Ledger.topUpExitFreezes,
 * Ledger.returnExitFreeze, ...) and runs topUp wherever money reaches an available balance.
 */
export class ExitFreezes {
  private readonly stmt;
  /** The accounts short of an exit's freeze when the Ledger was opened (topped up by topUpAtOpen). */
  private readonly shortAtOpen: string[];
  /**
   * False while no exit can be short of its freeze, so the call path pays nothing for exits until one
   * exists. Set when the exits module opens a shortfall (noteShortfall) and never cleared within a
   * process: a stale `true` costs one indexed query, a wrong `false` would let frozen money be spent.
   */
  private exitShortfallPossible: boolean;

  constructor(
    db: Db,
    private readonly books: FreezeBooks,
  ) {
    this.stmt = {
      exitShortfalls: db.prepare(
        `SELECT tx_hash, log_index, address, shortfall FROM chain_exits
         WHERE account_id = ? AND status = 'pending' AND shortfall > 0 ORDER BY block_number, log_index`,
      ),
      accountsShortOfExits: db.prepare("SELECT DISTINCT account_id FROM chain_exits WHERE status = 'pending' AND shortfall > 0").pluck(),
      topUpExit: db.prepare(
        `UPDATE chain_exits SET frozen = frozen + ?, shortfall = shortfall - ?
         WHERE tx_hash = ? AND log_index = ? AND status = 'pending' AND shortfall >= ?`,
      ),
    };
    this.shortAtOpen = this.stmt.accountsShortOfExits.all() as string[];
    this.exitShortfallPossible = this.shortAtOpen.length > 0;
  }

  /**
   * Freezes money that reached a short account by a path that does not top up (a deposit credited when its
   * address was linked, see Ledger.credit()) before anything else runs. The Ledger calls it once, in its
   * opening operation.
   */
  topUpAtOpen(): void {
    for (const accountId of this.shortAtOpen) this.topUp(accountId);
  }

  /** Whether a pending exit of the account is still short of its freeze (so its money is frozen). */
  hasShortfall(accountId: string): boolean {
    return this.exitShortfallPossible && this.stmt.exitShortfalls.all(accountId).length > 0;
  }

  /** Says an exit with a shortfall may now exist: from here on, money reaching an account checks for it. */
  noteShortfall(): void {
    this.exitShortfallPossible = true;
  }

  /**
   * Moves the account's available balance into the freezes of its pending exits that are still short,
   * oldest request first, each move an 'exit_freeze' entry linked to its exit; returns the total moved.
   */
  topUp(accountId: string): bigint {
    if (!this.exitShortfallPossible) return 0n;
    return this.books.run(() => {
      const short = this.stmt.exitShortfalls.all(accountId) as { tx_hash: string; log_index: bigint; address: string; shortfall: bigint }[];
      let moved = 0n;
      for (const exit of short) {
        const available = this.books.availableOf(accountId);
        if (available <= 0n) break;
        const amount = available < exit.shortfall ? available : exit.shortfall;
        this.books.freeze(
          accountId,
          amount,
          { txHash: exit.tx_hash, logIndex: Number(exit.log_index) },
          `exit ${exit.address} ${exit.tx_hash}:${exit.log_index}: frozen`,
        );
        if (this.stmt.topUpExit.run(amount, amount, exit.tx_hash, exit.log_index, amount).changes !== 1) {
          throw new Error(`exit ${exit.tx_hash}:${exit.log_index} changed while its freeze was topped up`);
        }
        moved += amount;
      }
      return moved;
    });
  }

  /**
   * Gives back `amountMicros` of an exit's freeze (a cancelled or replaced request, or one the escrow paid
   * less than frozen), as a linked 'exit_return' entry; other short exits of the account are topped up from it.
   */
  giveBack(exit: ExitKey, accountId: string, amountMicros: bigint, memo: string): bigint {
    if (amountMicros <= 0n) throw new RangeError(`returned exit freeze must be positive, got ${amountMicros}`);
    return this.books.run(() => {
      const entryId = this.books.unfreeze(accountId, amountMicros, exit, memo);
      this.topUp(accountId);
      return entryId;
    });
  }
}
