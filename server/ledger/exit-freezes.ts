import type { Sql } from "../db/sql";

/** Names an exit request by its ExitRequested log (server/settlement/exits.ts). */
export interface ExitKey {
  txHash: string;
  logIndex: number;
}

/**
 * What the freezes need of the Ledger (server/ledger/ledger.ts), and nothing more: an account's available
 * balance, and the two entries that move money into and out of a freeze. The Ledger writes the entries and
 * their postings; this file decides when and how much. Every operation runs in its caller's transaction.
 */
export interface FreezeBooks {
  /** The account's available balance, read under the row's lock until the transaction ends (PostgreSQL). */
  availableOf(tx: Sql, accountId: string): Promise<bigint>;
  /** Writes an 'exit_freeze' entry linked to the exit: `amountMicros` from available to the escrow's side. */
  freeze(tx: Sql, accountId: string, amountMicros: bigint, exit: ExitKey, memo: string): Promise<bigint>;
  /** Writes an 'exit_return' entry linked to the exit: `amountMicros` from the escrow's side back to available. */
  unfreeze(tx: Sql, accountId: string, amountMicros: bigint, exit: ExitKey, memo: string): Promise<bigint>;
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
  /**
   * False while no exit can be short of its freeze, so the call path pays nothing for exits until one
   * exists. Set when the exits module opens a shortfall (noteShortfall), or when one is found at open, and
   * never cleared within a process: a stale `true` costs one indexed query, a wrong `false` would let
   * frozen money be spent. Several replicas share the books: the one whose indexer records an exit notes
   * it; the others learn of it at their next open, or through the exits module's own note (it runs on
   * every replica that reads exits).
   */
  private exitShortfallPossible = false;

  constructor(private readonly books: FreezeBooks) {}

  /**
   * Freezes money that reached a short account by a path that does not top up (a deposit credited when its
   * address was linked, see Ledger.credit()) before anything else runs. The Ledger calls it once, in its
   * opening transaction.
   */
  async open(tx: Sql): Promise<void> {
    const short = await tx.all<{ account_id: string }>(
      "SELECT DISTINCT account_id FROM chain_exits WHERE status = 'pending' AND shortfall > 0 ORDER BY account_id",
    );
    if (short.length > 0) this.exitShortfallPossible = true;
    for (const { account_id } of short) await this.topUp(tx, account_id);
  }

  /** Whether a pending exit of the account is still short of its freeze (so its money is frozen). */
  async hasShortfall(sql: Sql, accountId: string): Promise<boolean> {
    return this.exitShortfallPossible && (await this.shortExits(sql, accountId)).length > 0;
  }

  /** Says an exit with a shortfall may now exist: from here on, money reaching an account checks for it. */
  noteShortfall(): void {
    this.exitShortfallPossible = true;
  }

  /** The account's pending exits still short of their freeze, oldest request first; `lock`ed for a top-up. */
  private shortExits(sql: Sql, accountId: string, lock = false) {
    return sql.all<{ tx_hash: string; log_index: bigint; address: string; shortfall: bigint }>(
      `SELECT tx_hash, log_index, address, shortfall FROM chain_exits
       WHERE account_id = ? AND status = 'pending' AND shortfall > 0 ORDER BY block_number, log_index${lock ? sql.dialect.forUpdate : ""}`,
      [accountId],
    );
  }

  /**
   * Moves the account's available balance into the freezes of its pending exits that are still short,
   * oldest request first, each move an 'exit_freeze' entry linked to its exit; returns the total moved.
   */
  async topUp(tx: Sql, accountId: string): Promise<bigint> {
    if (!this.exitShortfallPossible) return 0n;
    // The available balance, then the exits' rows, are read under their locks (PostgreSQL), so that two
    // replicas topping up one account's freezes at once queue and the second sees what the first froze (read
    // unlocked, both would freeze the same money, and the second would fail on the balance's CHECK). The
    // balance comes first, as in every other ledger operation that reaches here (a hold, a release, a credit).
    let available = await this.books.availableOf(tx, accountId);
    if (available <= 0n) return 0n;
    let moved = 0n;
    for (const exit of await this.shortExits(tx, accountId, true)) {
      if (available <= 0n) break;
      const amount = available < exit.shortfall ? available : exit.shortfall;
      await this.books.freeze(
        tx,
        accountId,
        amount,
        { txHash: exit.tx_hash, logIndex: Number(exit.log_index) },
        `exit ${exit.address} ${exit.tx_hash}:${exit.log_index}: frozen`,
      );
      const changed = await tx.run(
        `UPDATE chain_exits SET frozen = frozen + ?, shortfall = shortfall - ?
         WHERE tx_hash = ? AND log_index = ? AND status = 'pending' AND shortfall >= ?`,
        [amount, amount, exit.tx_hash, exit.log_index, amount],
      );
      if (changed !== 1) throw new Error(`exit ${exit.tx_hash}:${exit.log_index} changed while its freeze was topped up`);
      available -= amount;
      moved += amount;
    }
    return moved;
  }

  /**
   * Gives back `amountMicros` of an exit's freeze (a cancelled or replaced request, or one the escrow paid
   * less than frozen), as a linked 'exit_return' entry; other short exits of the account are topped up from it.
   */
  async giveBack(tx: Sql, exit: ExitKey, accountId: string, amountMicros: bigint, memo: string): Promise<bigint> {
    if (amountMicros <= 0n) throw new RangeError(`returned exit freeze must be positive, got ${amountMicros}`);
    const entryId = await this.books.unfreeze(tx, accountId, amountMicros, exit, memo);
    await this.topUp(tx, accountId);
    return entryId;
  }
}
