/**
 * Which ledger account an on-chain address belongs to, and what happens to the deposits that reached the
 * escrow before the gateway knew. The escrow credits addresses; the ledger credits accounts; this module is
 * the join. An account may have several addresses, an address belongs to one account for good (a relink
 * would move money already credited, so it is refused).
 *
 * Addresses are stored lowercase (`normalizeAddress`): one spelling, so a lookup never misses because of a
 * checksum's letter case.
 */
import { isAddress, type Address } from "viem";
import type { Db } from "../db/db";
import type { Ledger } from "../ledger/ledger";

/** An address as the database stores it: `0x` and 40 lowercase hex digits. */
export type StoredAddress = Lowercase<Address>;

/** Lowercases a 20-byte hex address (any letter case, checksum not enforced); undefined if it is not one. */
export function normalizeAddress(address: string): StoredAddress | undefined {
  if (!isAddress(address, { strict: false })) return undefined;
  return address.toLowerCase() as StoredAddress;
}

/** How a chain deposit is named in messages and in its entry's note: `<tx hash>:<log index>`. */
export function depositMemo(txHash: string, logIndex: number): string {
  return `${txHash.toLowerCase()}:${logIndex}`;
}

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

/** Account kinds whose `available` bucket a deposit may land in. */
const DEPOSITING_KINDS: ReadonlySet<string> = new Set(["user", "seller"]);

export type LinkAddressParameters = { accountId: string; address: string };

export type LinkAddressReturnType =
  | {
      ok: true;
      address: StoredAddress;
      /** False when this exact link already existed (linking is idempotent). */
      created: boolean;
      /** Deposits that had been waiting for this address and were credited by this link. */
      creditedDeposits: number;
      creditedMicros: bigint;
    }
  | { ok: false; reason: "invalid_address" | "unknown_account" | "account_cannot_deposit" }
  /**
   * The account already has an address. Settlement debits one address per account, so money at a
   * second one would make batches fail; until balances are kept per address, one is allowed.
   */
  | { ok: false; reason: "second_address" }
  /**
   * The address completed an exit while no account owned it: the escrow paid out of deposits the
   * ledger still holds as waiting, so linking would credit money that is gone. An operator must look.
   */
  | { ok: false; reason: "address_exited" }
  | { ok: false; reason: "address_taken"; accountId: string };

/**
 * Links `address` to `accountId` and, in the same ledger operation, credits every recorded deposit that was
 * waiting for it; resolves once that is durable. Expected refusals are results, not throws.
 */
export async function linkAddress(ledger: Ledger, parameters: LinkAddressParameters): Promise<LinkAddressReturnType> {
  const result = linkAddressSync(ledger, parameters);
  await ledger.commit.durable();
  return result;
}

/**
 * `linkAddress` without waiting for the disk, for a caller composing it into a larger ledger operation.
 * Whoever reports the result must await `ledger.commit.durable()` first.
 */
export function linkAddressSync(ledger: Ledger, parameters: LinkAddressParameters): LinkAddressReturnType {
  const address = normalizeAddress(parameters.address);
  if (!address) return { ok: false, reason: "invalid_address" };
  const { accountId } = parameters;
  return ledger.commit.run(() => {
    const account = ledger.getAccount(accountId);
    if (!account) return { ok: false as const, reason: "unknown_account" as const };
    if (!DEPOSITING_KINDS.has(account.kind)) return { ok: false as const, reason: "account_cannot_deposit" as const };
    const owner = accountForAddress(ledger.db, address);
    if (owner !== undefined && owner !== accountId) {
      return { ok: false as const, reason: "address_taken" as const, accountId: owner };
    }
    if (owner === undefined) {
      if (addressesOf(ledger.db, accountId).length > 0) return { ok: false as const, reason: "second_address" as const };
      const exited = ledger.db
        .prepare("SELECT COUNT(*) FROM chain_exits WHERE address = ? AND account_id IS NULL AND status = 'completed'")
        .pluck()
        .get(address) as bigint;
      if (exited > 0n) return { ok: false as const, reason: "address_exited" as const };
      ledger.db
        .prepare("INSERT INTO account_addresses (address, account_id, created_at) VALUES (?, ?, ?)")
        .run(address, accountId, Date.now());
    }
    // Exits the address requested before anyone owned it become the account's: a pending one
    // is frozen like any other (its whole amount is owed to the freeze, taken from the
    // deposits credited just below), so none of that money can be spent before it is paid.
    const adopted = ledger.db
      .prepare(
        `UPDATE chain_exits SET account_id = ?, shortfall = CASE WHEN status = 'pending' THEN requested ELSE 0 END
         WHERE address = ? AND account_id IS NULL`,
      )
      .run(accountId, address).changes;
    const { count, totalMicros } = creditWaitingDeposits(ledger, address, accountId);
    if (adopted > 0) {
      ledger.noteExitShortfall();
      ledger.topUpExitFreezes(accountId);
    }
    return { ok: true as const, address, created: owner === undefined, creditedDeposits: count, creditedMicros: totalMicros };
  });
}

/** The account an address is linked to, if any. */
export function accountForAddress(db: Db, address: string): string | undefined {
  const normalized = normalizeAddress(address);
  if (!normalized) return undefined;
  return db.prepare("SELECT account_id FROM account_addresses WHERE address = ?").pluck().get(normalized) as string | undefined;
}

/** Every address linked to an account, oldest link first. */
export function addressesOf(db: Db, accountId: string): StoredAddress[] {
  return db
    .prepare("SELECT address FROM account_addresses WHERE account_id = ? ORDER BY created_at, address")
    .pluck()
    .all(accountId) as StoredAddress[];
}

/**
 * Credits one chain deposit to `accountId` as a `deposit` entry linked to its log and returns the entry's id,
 * which the caller stores beside the deposit. Runs inside the caller's ledger operation: the indexer's (a
 * deposit to a known address) or the link's (a deposit that was waiting).
 */
export function creditChainDeposit(
  ledger: Ledger,
  deposit: Pick<ChainDeposit, "txHash" | "logIndex" | "amountMicros">,
  accountId: string,
): bigint {
  const log = { txHash: deposit.txHash.toLowerCase(), logIndex: deposit.logIndex };
  return ledger.creditChainDeposit(accountId, deposit.amountMicros, log, depositMemo(log.txHash, log.logIndex));
}

/** Credits the recorded deposits to `address` that no account had taken yet. */
function creditWaitingDeposits(ledger: Ledger, address: StoredAddress, accountId: string): { count: number; totalMicros: bigint } {
  const waiting = ledger.db
    .prepare(
      `SELECT tx_hash, log_index, amount FROM chain_deposits
       WHERE address = ? AND account_id IS NULL ORDER BY block_number, log_index`,
    )
    .all(address) as { tx_hash: string; log_index: bigint; amount: bigint }[];
  const claim = ledger.db.prepare(
    "UPDATE chain_deposits SET account_id = ?, entry_id = ? WHERE tx_hash = ? AND log_index = ? AND account_id IS NULL",
  );
  let totalMicros = 0n;
  for (const row of waiting) {
    const entryId = creditChainDeposit(
      ledger,
      { txHash: row.tx_hash, logIndex: Number(row.log_index), amountMicros: row.amount },
      accountId,
    );
    const { changes } = claim.run(accountId, entryId, row.tx_hash, row.log_index);
    if (changes !== 1) throw new Error(`deposit ${depositMemo(row.tx_hash, Number(row.log_index))} was claimed twice`);
    totalMicros += row.amount;
  }
  return { count: waiting.length, totalMicros };
}
