import type { Address } from "viem";
import { type Database, type Sql, within } from "../db/sql";

/** An address as the database stores it: `0x` and 40 lowercase hex digits. */
export type StoredAddress = Lowercase<Address>;

/** A `Deposited` log as recorded in `chain_deposits`. */
export interface ChainDeposit {
  txHash: string;
  logIndex: number;
  blockNumber: bigint;
  blockHash: string;
  /** The escrow account credited on-chain (the event's `account`). */
  address: StoredAddress;
  /** Who paid (the event's `from`). */
  sender: StoredAddress;
  amountMicros: bigint;
}

/** A recorded deposit no account has taken yet (its address was not linked when it was indexed). */
export type WaitingDeposit = { txHash: string; logIndex: number; amountMicros: bigint };

/**
 * The `account_addresses` and `chain_deposits` tables (./addresses.ts, ./indexer.ts): which account an escrow
 * address belongs to, and every deposit log the indexer recorded. The credit a deposit brings is the ledger's
 * write (Ledger.creditChainDeposit); this records the log and the entry beside it, in the same transaction.
 * Addresses are passed already lowercase (normalizeAddress). A write given `tx` joins that transaction, and
 * runs in one of its own otherwise.
 */
export class AddressesStore {
  constructor(private readonly db: Database) {}

  /** The account an address is linked to, if any. */
  async accountFor(address: StoredAddress, sql: Sql = this.db): Promise<string | undefined> {
    return sql.value<string>("SELECT account_id FROM account_addresses WHERE address = ?", [address]);
  }

  /** Every address linked to an account, oldest link first. */
  async addressesOf(accountId: string, sql: Sql = this.db): Promise<StoredAddress[]> {
    const rows = await sql.all<{ address: StoredAddress }>(
      "SELECT address FROM account_addresses WHERE account_id = ? ORDER BY created_at, address",
      [accountId],
    );
    return rows.map((r) => r.address);
  }

  /** Links an address no account has; throws (a unique violation) if one has it already. */
  async link(address: StoredAddress, accountId: string, atMs: number, tx?: Sql): Promise<void> {
    await within(this.db, tx, (tx) =>
      tx.run("INSERT INTO account_addresses (address, account_id, created_at) VALUES (?, ?, ?)", [address, accountId, atMs]),
    );
  }

  /**
   * Recorded deposits to `address` that no account has taken yet, in chain order. Inside a transaction the
   * rows stay locked until it ends (PostgreSQL), so of two transactions crediting them, the second finds
   * them taken.
   */
  async waitingDeposits(address: StoredAddress, sql: Sql = this.db): Promise<WaitingDeposit[]> {
    const rows = await sql.all<{ tx_hash: string; log_index: bigint; amount: bigint }>(
      `SELECT tx_hash, log_index, amount FROM chain_deposits
       WHERE address = ? AND account_id IS NULL ORDER BY block_number, log_index${sql.dialect.forUpdate}`,
      [address],
    );
    return rows.map((r) => ({ txHash: r.tx_hash, logIndex: Number(r.log_index), amountMicros: r.amount }));
  }

  /** Gives a waiting deposit to an account and its credit entry; false if an account had it already. */
  async claimDeposit(txHash: string, logIndex: number, accountId: string, entryId: bigint, tx?: Sql): Promise<boolean> {
    const changed = await within(this.db, tx, (tx) =>
      tx.run("UPDATE chain_deposits SET account_id = ?, entry_id = ? WHERE tx_hash = ? AND log_index = ? AND account_id IS NULL", [
        accountId,
        entryId,
        txHash,
        logIndex,
      ]),
    );
    return changed === 1;
  }

  /** What was recorded for a deposit log, if it was. */
  async deposit(
    txHash: string,
    logIndex: number,
    sql: Sql = this.db,
  ): Promise<{ address: StoredAddress; amountMicros: bigint } | undefined> {
    const row = await sql.one<{ address: StoredAddress; amount: bigint }>(
      "SELECT address, amount FROM chain_deposits WHERE tx_hash = ? AND log_index = ?",
      [txHash, logIndex],
    );
    return row && { address: row.address, amountMicros: row.amount };
  }

  /**
   * Records a deposit log, credited to `accountId` by `entryId`, or waiting (both null). Throws (a unique
   * violation) if the log was recorded already.
   */
  async recordDeposit(deposit: ChainDeposit, accountId: string | null, entryId: bigint | null, atMs: number, tx?: Sql): Promise<void> {
    await within(this.db, tx, (tx) =>
      tx.run(
        `INSERT INTO chain_deposits (tx_hash, log_index, block_number, block_hash, address, sender, amount, account_id, entry_id, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          deposit.txHash,
          deposit.logIndex,
          deposit.blockNumber,
          deposit.blockHash,
          deposit.address,
          deposit.sender,
          deposit.amountMicros,
          accountId,
          entryId,
          atMs,
        ],
      ),
    );
  }
}
