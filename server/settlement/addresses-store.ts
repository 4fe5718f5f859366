import type { Address } from "viem";
import type { Db } from "../db/db";

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
 * write (Ledger.creditChainDeposit); this records the log and the entry beside it, in the same ledger operation.
 * Addresses are passed already lowercase (normalizeAddress).
 */
export interface AddressesStore {
  /** The account an address is linked to, if any. */
  accountFor(address: StoredAddress): string | undefined;
  /** Every address linked to an account, oldest link first. */
  addressesOf(accountId: string): StoredAddress[];
  /** Links an address no account has; throws (UNIQUE) if one has it already. */
  link(address: StoredAddress, accountId: string, atMs: number): void;
  /** Recorded deposits to `address` that no account has taken yet, in chain order. */
  waitingDeposits(address: StoredAddress): WaitingDeposit[];
  /** Gives a waiting deposit to an account and its credit entry; false if an account had it already. */
  claimDeposit(txHash: string, logIndex: number, accountId: string, entryId: bigint): boolean;
  /** What was recorded for a deposit log, if it was. */
  deposit(txHash: string, logIndex: number): { address: StoredAddress; amountMicros: bigint } | undefined;
  /** Records a deposit log, credited to `accountId` by `entryId`, or waiting (both null). */
  recordDeposit(deposit: ChainDeposit, accountId: string | null, entryId: bigint | null, atMs: number): void;
}

/** AddressesStore on the gateway's SQLite database. */
export class SqliteAddressesStore implements AddressesStore {
  private readonly stmt;

  constructor(db: Db) {
    this.stmt = {
      accountFor: db.prepare("SELECT account_id FROM account_addresses WHERE address = ?").pluck(),
      addressesOf: db.prepare("SELECT address FROM account_addresses WHERE account_id = ? ORDER BY created_at, address").pluck(),
      link: db.prepare("INSERT INTO account_addresses (address, account_id, created_at) VALUES (?, ?, ?)"),
      waiting: db.prepare(
        `SELECT tx_hash, log_index, amount FROM chain_deposits
         WHERE address = ? AND account_id IS NULL ORDER BY block_number, log_index`,
      ),
      claim: db.prepare(
        "UPDATE chain_deposits SET account_id = ?, entry_id = ? WHERE tx_hash = ? AND log_index = ? AND account_id IS NULL",
      ),
      deposit: db.prepare("SELECT address, amount FROM chain_deposits WHERE tx_hash = ? AND log_index = ?"),
      record: db.prepare(
        `INSERT INTO chain_deposits (tx_hash, log_index, block_number, block_hash, address, sender, amount, account_id, entry_id, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
    };
  }

  accountFor(address: StoredAddress): string | undefined {
    return this.stmt.accountFor.get(address) as string | undefined;
  }

  addressesOf(accountId: string): StoredAddress[] {
    return this.stmt.addressesOf.all(accountId) as StoredAddress[];
  }

  link(address: StoredAddress, accountId: string, atMs: number): void {
    this.stmt.link.run(address, accountId, atMs);
  }

  waitingDeposits(address: StoredAddress): WaitingDeposit[] {
    const rows = this.stmt.waiting.all(address) as { tx_hash: string; log_index: bigint; amount: bigint }[];
    return rows.map((r) => ({ txHash: r.tx_hash, logIndex: Number(r.log_index), amountMicros: r.amount }));
  }

  claimDeposit(txHash: string, logIndex: number, accountId: string, entryId: bigint): boolean {
    return this.stmt.claim.run(accountId, entryId, txHash, logIndex).changes === 1;
  }

  deposit(txHash: string, logIndex: number): { address: StoredAddress; amountMicros: bigint } | undefined {
    const row = this.stmt.deposit.get(txHash, logIndex) as { address: StoredAddress; amount: bigint } | undefined;
    return row && { address: row.address, amountMicros: row.amount };
  }

  recordDeposit(deposit: ChainDeposit, accountId: string | null, entryId: bigint | null, atMs: number): void {
    this.stmt.record.run(
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
    );
  }
}
